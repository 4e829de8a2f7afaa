"""The ``mm-projector`` click group and the one place library errors become CLI errors."""
import functools
import importlib
import logging
import os
import sys

import click

from motion_matching.errors import InvalidOption, MotionMatchingError
from motion_matching.interrupts import exit_interrupted, interrupts_exit
from motion_matching.interrupts import interrupted_exit as interrupted_exit  # the commands' exit status on a stop

# the module of motion_matching.cli that registers each command, and the command's one-line summary
# (its ``short_help``); a module is imported only when its command runs, so that ``--help`` and the
# commands without torch (cache-info, check-files, ...) start in a fraction of a second
COMMANDS = {
    "build-cache": ("cache", "Build the exact-neighbour cache (resumable, growable)."),
    "cache-info": ("cache", "Print a cache's metadata and whether it is fresh."),
    "verify-cache": ("cache", "Re-check a cache's rows against a float64 brute force."),
    "check-files": ("files", "Validate toolkit files; check their frame counts agree."),
    "demo": ("demo", "The whole pipeline on synthetic data, step by step."),
    "evaluate": ("export", "Held-out errors and match accuracy of a projector."),
    "evaluate-decompressor": ("decompressor", "Pose errors of a decompressor over every frame."),
    "evaluate-stepper": ("stepper", "Rollout errors of a stepper over windows across its database."),
    "export": ("export", "A checkpoint or .bin to the runtime .bin or ONNX."),
    "generate-database": ("data", "Write database.bin, features.bin and latent.bin."),
    "retrain": ("retrain", "database.bin to the three runtime networks, make-like."),
    "train": ("train", "Train the projector (online, or --offline from a cache)."),
    "train-decompressor": ("decompressor", "Train the decompressor and write latent.bin."),
    "train-stepper": ("stepper", "Train the stepper (features and latent, one frame on)."),
}
COMMAND_MODULES = {name: module for name, (module, _) in COMMANDS.items()}
USAGE_EXIT = 2  # click's status for a usage error, kept: scripts tell it from a failed run (1)
# every option can also come from the environment: MM_PROJECTOR_<COMMAND>_<OPTION>, e.g. MM_PROJECTOR_TRAIN_THREADS
ENV_PREFIX = "MM_PROJECTOR"
CONTEXT = {"help_option_names": ["-h", "--help"], "auto_envvar_prefix": ENV_PREFIX}


SEED = click.IntRange(min=0, max=2 ** 63 - 1)
"""The type of every --seed option: numpy's generators take non-negative seeds, the cache stores int64."""


def summary(name):
    """The one-line summary (str) of command ``name``, shown by ``mm-projector --help``."""
    return COMMANDS[name][1]


class OneLineUsageError(click.UsageError):
    """A usage error printed as one line, ``Error: <problem> (see '<command> --help')``."""

    def show(self, file=None):
        hint = f" (see '{self.ctx.command_path} --help')" if self.ctx is not None else ""
        click.echo(f"Error: {self.format_message()}{hint}", file=file, err=file is None)


def _one_line(error):
    if isinstance(error, OneLineUsageError):
        return error
    one_line = OneLineUsageError(_naming_the_variable(error), ctx=error.ctx)
    one_line.exit_code = error.exit_code
    return one_line


def environment_variable(ctx, name):
    """The environment variable (str) that set parameter ``name`` of ``ctx``'s command, or None when its
    value came from elsewhere (the command line, a default)."""
    parameter = next((one for one in ctx.command.params if one.name == name), None)
    if parameter is None or ctx.get_parameter_source(name) is not click.core.ParameterSource.ENVIRONMENT:
        return None
    named = [parameter.envvar] if isinstance(parameter.envvar, str) else list(parameter.envvar or ())
    named = [variable for variable in named if os.environ.get(variable)]
    return named[0] if named else f"{ctx.auto_envvar_prefix}_{name.upper()}"


def _naming_the_variable(error):
    """The message (str) of usage error ``error``; a bad value that came from the environment is named by its
    variable ("MM_PROJECTOR_TRAIN_THREADS: 'x' is not a valid integer; it sets --threads"), not its option."""
    parameter = getattr(error, "param", None)
    variable = None if parameter is None or error.ctx is None else environment_variable(error.ctx, parameter.name)
    if variable is None or not isinstance(error, click.BadParameter):
        return error.format_message()
    return f"{variable}: {error.message.rstrip('.')}; it sets {parameter.opts[0]}"


def _standalone(run):
    """click's standalone mode around ``run()`` (its ``main`` in non-standalone mode), with every Ctrl-C,
    wherever it lands, sent to ``exit_interrupted``."""
    with interrupts_exit():
        try:
            status = run()
        except click.Abort as abort:  # click's name for a KeyboardInterrupt (or an EOF at a prompt)
            if isinstance(abort.__cause__, KeyboardInterrupt):
                raise KeyboardInterrupt from None
            click.echo("Aborted!", err=True)
            sys.exit(1)
        except click.ClickException as error:
            error.show()
            sys.exit(error.exit_code)
        sys.exit(status if isinstance(status, int) else 0)  # an int: a ctx.exit(code); else a callback's value


class InterruptibleContext(click.Context):
    """A click context whose closing, after the command ran, also turns Ctrl-C into the one-line exit."""

    def __exit__(self, kind, value, traceback):
        with interrupts_exit():
            super().__exit__(kind, value, traceback)
            if kind is not None and issubclass(kind, KeyboardInterrupt):
                exit_interrupted()


class OneLineErrors:
    """Mixin for click commands and groups: usage errors (unknown option, bad value) print one line, and
    Ctrl-C at any moment prints one line and exits 130 (click says ``Aborted!`` and exits 1)."""

    context_class = InterruptibleContext

    def main(self, *args, standalone_mode=True, **extra):
        if not standalone_mode:
            return super().main(*args, standalone_mode=False, **extra)
        return _standalone(functools.partial(super().main, *args, standalone_mode=False, **extra))

    # Ctrl-C is turned into the exit here, inside click's main, which would first print an empty line
    def make_context(self, *args, **kwargs):
        with interrupts_exit():
            try:
                return super().make_context(*args, **kwargs)
            except click.UsageError as error:
                raise _one_line(error) from None

    def invoke(self, ctx):
        with interrupts_exit():
            try:
                return super().invoke(ctx)
            except click.UsageError as error:
                raise _one_line(error) from None


class Command(OneLineErrors, click.Command):
    """A click command whose usage errors are one line."""


class LazyGroup(OneLineErrors, click.Group):
    """A click group whose commands' modules are imported when a command is looked up."""

    command_class = Command

    def list_commands(self, ctx):
        return sorted(set(COMMANDS) | set(self.commands))

    def get_command(self, ctx, name):
        if name not in self.commands and name in COMMANDS:
            importlib.import_module(f"{__package__}.{COMMAND_MODULES[name]}")
        return self.commands.get(name)

    def format_commands(self, ctx, formatter):
        """The command list from the summaries table, without importing any command's module."""
        rows = [(name, summary(name) if name in COMMANDS else self.commands[name].get_short_help_str())
                for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings=CONTEXT)
@click.version_option(package_name="motion-matching-projector")
def main():
    """Train the Learned Motion Matching projector from the toolkit's files, fast and exactly."""
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    logging.getLogger("faiss").setLevel(logging.WARNING)  # its loader reports which CPU build it picked
    # torch's own default, set before it loads: a Ctrl-C inside its import would leave its INFO lines at exit
    logging.getLogger("torch").setLevel(logging.WARNING)


def reports_errors(command):
    """Decorate a click callback so ``MotionMatchingError`` becomes ``Error: <path>: <problem>``, exit 1."""
    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except InvalidOption as error:
            raise click.ClickException(_option_from_environment(error)) from None
        except MotionMatchingError as error:
            raise click.ClickException(str(error)) from None
    return wrapper


def _option_from_environment(error):
    """The line (str) of ``InvalidOption`` ``error``, naming the environment variable when that set the option."""
    context = click.get_current_context(silent=True)
    names = {} if context is None else {one.opts[0]: one.name for one in context.command.params if one.opts}
    variable = environment_variable(context, names[error.path]) if error.path in names else None
    return str(error) if variable is None else f"{variable}: {error.problem}; it sets {error.path}"
