"""Commands: train (the toolkit's train_projector.py, online with a BallTree or offline from a cache)."""
import dataclasses
import logging
import os
import shlex
import sys

import click

from motion_matching.cli.group import interrupted_exit, main, reports_errors, summary
from motion_matching.cli.paths import INPUT_FILE, OUTPUT_FOLDER
from motion_matching.cli.progress import ProgressBar, training_note
from motion_matching.interrupts import exit_interrupted
from motion_matching.projector.config import TrainConfig
from motion_matching.projector.defaults import HELD_OUT_QUERIES
from motion_matching.projector.recipes import RECIPES, recipe_config

FILE = INPUT_FILE


def config_option(field, recipes=RECIPES):
    """The click option of config field ``field`` (``--recipe`` chooses among ``recipes``)."""
    name = "--" + field.name.replace("_", "-")
    if isinstance(field.default, bool):
        return click.option(f"{name}/--no-{name[2:]}", default=field.default, show_default=True,
                            help=field.metadata["help"])
    choices = recipes if field.name == "recipe" else field.metadata.get("choices")
    if choices:
        kind = click.Choice(list(choices))
    else:
        kind = field.metadata.get("type", type(field.default))
    return click.option(name, type=kind, default=field.default, show_default=field.default is not None,
                        help=field.metadata["help"])


PATH_OPTIONS = [
    click.option("--features", "features_path", type=FILE, default="features.bin", show_default=True,
                 help="The toolkit's features.bin."),
    click.option("--latent", "latent_path", type=FILE, default="latent.bin", show_default=True,
                 help="The toolkit's latent.bin."),
    click.option("--database", "database_path", type=FILE, default="database.bin", show_default=True,
                 help="The toolkit's database.bin, read for its frame count and clips ('' to skip)."),
    click.option("--out", "out_dir", type=OUTPUT_FOLDER, metavar="FOLDER", default=".",
                 show_default=True, help="Folder for projector.bin, projector_checkpoint.pt and the plots."),
    click.option("--offline", "offline_cache", type=FILE, default=None,
                 help="Train from this exact-neighbour cache (build-cache) instead of BallTree searches."),
    click.option("--preload", is_flag=True, help="Read the whole cache into memory instead of streaming it."),
    click.option("--resume", type=FILE, default=None,
                 help="Continue from this projector_checkpoint.pt [default: the one in --out, if any]."),
    click.option("--force", is_flag=True,
                 help="Replace the projector.bin and checkpoint of another run (other settings or inputs) "
                      "found in --out; this run's own checkpoint is continued."),
    click.option("--plots", is_flag=True, help="Write projector_X.png and projector_Z.png with each projector.bin."),
    click.option("--tensorboard", type=OUTPUT_FOLDER, default=None,
                 help="Write TensorBoard loss curves into this folder."),
    click.option("--held-out", "held_out_queries", type=click.IntRange(min=0), default=HELD_OUT_QUERIES,
                 show_default=True, help="Fresh queries for the final held-out loss (0: skip)."),
    click.option("--quiet", is_flag=True, help="No progress line, only errors and the final lines."),
]


def training_options(command):
    """Decorate a click callback with every ``TrainConfig`` field and path option of ``train``."""
    for option in reversed([config_option(field) for field in dataclasses.fields(TrainConfig)] + PATH_OPTIONS):
        command = option(command)
    return command


def run_rate(result):
    """Iterations per second (float) of the iterations ``result`` (a ``TrainResult``) trained in this call."""
    return (result.steps - result.resumed_from) / result.seconds if result.seconds > 0 else 0.0


def describe_result(result):
    """The lines (str) that end a run: what was written, the losses and the speed."""
    if result.steps == result.resumed_from:
        return (f"{result.network_path} is already trained ({result.steps:,} iterations, checkpoint "
                f"{result.checkpoint_path}); nothing to do (a larger --iterations continues it, another --out "
                "trains anew)")
    held = "" if not result.held_out else f", held-out loss {result.held_out['loss']:.4f}"
    rate = run_rate(result)
    arithmetic = "" if result.precision == "float32" else f", {result.precision} matrix products"
    return (f"wrote {result.network_path} and {result.checkpoint_path} after {result.steps:,} iterations "
            f"({result.source}{arithmetic}): rolling loss {result.final_loss:.4f}{held}; {rate:,.1f} it/s in this run")


def _given(name):
    """Whether option ``name`` was set on the command line (or by the environment), not left at its default."""
    context = click.get_current_context(silent=True)
    source = context.get_parameter_source(name) if context is not None else None
    return source is not None and source is not click.core.ParameterSource.DEFAULT


def pop_config(options, *, config_class=TrainConfig, recipes=RECIPES, make=recipe_config):
    """Remove the ``config_class`` fields from the parsed ``options`` dict; returns the config that
    ``make(recipe, **settings)`` builds: the ``--recipe`` preset (in ``recipes``) fills every setting not
    given explicitly.
    """
    names = {field.name for field in dataclasses.fields(config_class)}
    values = {name: options.pop(name) for name in names}
    recipe = values.pop("recipe")
    try:
        return make(recipe, **{name: value for name, value in values.items()
                               if _given(name) or name not in recipes.get(recipe, {})})
    except ValueError as error:
        raise click.UsageError(str(error)) from None


def train_projector(config, **options):
    """``projector.train.train_projector``, imported when a run starts: it loads torch, ``--help`` does not."""
    from motion_matching.projector import train
    return train.train_projector(config, **options)


def run_training(*, quiet, database_path, **options):
    """Train with parsed options, print the outcome; exit 130 after saving on Ctrl-C."""
    logging.getLogger("motion_matching").setLevel(logging.WARNING if quiet else logging.INFO)
    config = pop_config(options)
    run_with_progress(lambda progress: train_projector(config, database_path=database_path or None,
                                                       progress=progress, **options),
                      quiet=quiet, resume=options.get("resume"), describe=describe_result)


def run_with_progress(train, *, quiet, resume, describe, label="train"):
    """``train(progress)`` with a progress bar, then print ``describe(result)``; on Ctrl-C, the line saying
    what was written and how to continue (``resume``: the run's --resume), exit 130."""
    from motion_matching.training.run import TrainingInterrupted  # torch: loaded when run, not for --help
    bar = ProgressBar(unit="it", label=label, quiet=quiet)
    try:
        result = train(None if quiet else training_progress(bar))
    except TrainingInterrupted as stop:
        bar.close()
        done = stop.result
        click.echo(f"interrupted after {done.steps:,} iterations; wrote {done.network_path} "
                   f"and {done.checkpoint_path}; {continue_advice(resume, done.checkpoint_path)}", err=True)
        sys.exit(interrupted_exit())
    except KeyboardInterrupt:  # outside an iteration boundary: files are written atomically, none is half-written
        bar.close()
        exit_interrupted()  # the line of every other moment: no file is half-written
    finally:
        bar.close()
    click.echo(describe(result))


def continue_advice(resume, checkpoint_path):
    """How to continue an interrupted run (str): the same command, unless its --resume names another checkpoint
    than the one just written, which would go back to that one; then the exact command without it."""
    if resume is None or os.path.realpath(resume) == os.path.realpath(checkpoint_path):
        return "run the same command again to continue"
    context = click.get_current_context()
    if context.get_parameter_source("resume") is click.core.ParameterSource.ENVIRONMENT:
        variable = f"{context.auto_envvar_prefix}_RESUME"
        return f"unset {variable} and run the same command again to continue (--resume would go back to {resume})"
    program = context.find_root().command_path
    program = ["python", program] if program.endswith(".py") else program.split(" ")
    line = shlex.join(program + _without_resume(sys.argv[1:]))
    return f"continue with: {line} (without --resume, which would go back to {resume})"


def _without_resume(words):
    """The command-line ``words`` (list of str) with ``--resume FILE`` / ``--resume=FILE`` left out."""
    kept, skip = [], False
    for word in words:
        if skip or word.startswith("--resume="):
            skip = False
        elif word == "--resume":
            skip = True
        else:
            kept.append(word)
    return kept


def training_progress(bar):
    """A ``progress(report)`` callback for ``train_projector`` that feeds ``bar`` (a ``ProgressBar``)."""
    return lambda report: bar(report.step, report.iterations, training_note(report), eta=report.eta)


@main.command("train", short_help=summary("train"))
@training_options
@reports_errors
def train_command(**options):
    """Train the projector as the toolkit's train_projector.py does (defaults are its constants).

    Online (default): each batch's nearest frames come from a BallTree. Offline (--offline CACHE):
    they come from a cache made by build-cache with the same --seed; both give identical networks.

    Example: mm-projector train --features features.bin --latent latent.bin --offline projector_cache.h5
    """
    run_training(**options)
