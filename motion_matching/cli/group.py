"""The ``mm-projector`` click group and the one place library errors become CLI errors."""
import functools
import importlib
import logging

import click

from motion_matching.errors import MotionMatchingError

# the module of motion_matching.cli that registers each command; imported only when the command runs,
# so that commands without torch (cache-info, check-files, ...) start in a fraction of a second
COMMAND_MODULES = {"build-cache": "cache", "cache-info": "cache", "verify-cache": "cache", "check-files": "files",
                   "demo": "demo", "evaluate": "export", "export": "export", "generate-database": "data",
                   "train": "train"}


SEED = click.IntRange(min=0, max=2 ** 63 - 1)
"""The type of every --seed option: numpy's generators take non-negative seeds, the cache stores int64."""


class LazyGroup(click.Group):
    """A click group whose commands' modules are imported when a command is looked up."""

    def list_commands(self, ctx):
        return sorted(set(COMMAND_MODULES) | set(self.commands))

    def get_command(self, ctx, name):
        if name not in self.commands and name in COMMAND_MODULES:
            importlib.import_module(f"{__package__}.{COMMAND_MODULES[name]}")
        return self.commands.get(name)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="motion-matching-projector")
def main():
    """Train the Learned Motion Matching projector from the toolkit's files, fast and exactly."""
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    logging.getLogger("faiss").setLevel(logging.WARNING)  # its loader reports which CPU build it picked


def reports_errors(command):
    """Decorate a click callback so ``MotionMatchingError`` becomes ``Error: <path>: <problem>``, exit 1."""
    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except MotionMatchingError as error:
            raise click.ClickException(str(error)) from None
    return wrapper
