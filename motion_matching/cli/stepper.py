"""Commands: train-stepper (the toolkit's train_stepper.py) and evaluate-stepper."""
import dataclasses
import logging

import click

from motion_matching.cli.group import CONTEXT, Command, main, reports_errors, summary
from motion_matching.cli.paths import INPUT_FILE, OUTPUT_FOLDER
from motion_matching.cli.train import config_option, pop_config, run_rate, run_with_progress
from motion_matching.stepper.config import RECIPES, StepperConfig, recipe_config

INPUT_OPTIONS = [
    click.option("--database", "database_path", type=INPUT_FILE, default="database.bin", show_default=True,
                 help="The toolkit's database.bin (read for its frame count and clips)."),
    click.option("--features", "features_path", type=INPUT_FILE, default="features.bin", show_default=True,
                 help="The toolkit's features.bin (of that database)."),
    click.option("--latent", "latent_path", type=INPUT_FILE, default="latent.bin", show_default=True,
                 help="The latent.bin of that database (train-decompressor's)."),
]
PATH_OPTIONS = INPUT_OPTIONS + [
    click.option("--out", "out_dir", type=OUTPUT_FOLDER, metavar="FOLDER", default=".", show_default=True,
                 help="Folder for stepper.bin and stepper_checkpoint.pt."),
    click.option("--resume", type=INPUT_FILE, default=None,
                 help="Continue from this stepper_checkpoint.pt [default: the one in --out, if any]."),
    click.option("--force", is_flag=True,
                 help="Replace the stepper.bin and checkpoint of another run (or the toolkit's own) found in --out; "
                      "this run's own checkpoint is continued."),
    click.option("--plots", is_flag=True,
                 help="Write stepper_X.png and stepper_Z.png (clip 2: the database against the rollout) at each save."),
    click.option("--tensorboard", type=OUTPUT_FOLDER, default=None,
                 help="Write TensorBoard loss curves into this folder."),
    click.option("--quiet", is_flag=True, help="No progress line, only errors and the final lines."),
]


def stepper_options(command):
    """Decorate a click callback with every ``StepperConfig`` field and the path options."""
    fields = [config_option(field, RECIPES) for field in dataclasses.fields(StepperConfig)]
    for option in reversed(fields + PATH_OPTIONS):
        command = option(command)
    return command


def describe_stepper(result):
    """The line (str) that ends a stepper run: what was written, the loss and the speed."""
    if result.steps == result.resumed_from:
        return (f"{result.network_path} is already trained ({result.steps:,} iterations, checkpoint "
                f"{result.checkpoint_path}); nothing to do (a larger --iterations continues it, another --out "
                "trains anew)")
    return (f"wrote {result.network_path} and {result.checkpoint_path} after {result.steps:,} iterations: rolling "
            f"loss {result.final_loss:.4f}; {run_rate(result):,.1f} it/s in this run")


def run_stepper_training(*, quiet, **options):
    """Train the stepper with parsed options and print the outcome; exit 130 after saving on Ctrl-C."""
    logging.getLogger("motion_matching").setLevel(logging.WARNING if quiet else logging.INFO)
    config = pop_config(options, config_class=StepperConfig, recipes=RECIPES, make=recipe_config)

    def train(progress):
        from motion_matching.stepper.train import train_stepper  # torch: not for --help
        return train_stepper(config, progress=progress, **options)

    run_with_progress(train, quiet=quiet, resume=options.get("resume"), describe=describe_stepper)


@main.command("train-stepper", short_help=summary("train-stepper"))
@stepper_options
@reports_errors
def train_stepper_command(**options):
    """Train the stepper as the toolkit's train_stepper.py does (defaults are its constants): stepper.bin
    every --save-every iterations.

    Example: mm-projector train-stepper --database database.bin --features features.bin --latent latent.bin --out run1
    """
    run_stepper_training(**options)


@click.command(cls=Command, context_settings=CONTEXT)
@stepper_options
@reports_errors
def script_main(**options):
    """Train the Learned Motion Matching stepper (python train_stepper.py, the toolkit's script name):
    stepper.bin from database.bin, features.bin and latent.bin, with the toolkit's settings."""
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    logging.getLogger("torch").setLevel(logging.WARNING)  # as mm-projector's group does, before torch loads
    run_stepper_training(**options)
