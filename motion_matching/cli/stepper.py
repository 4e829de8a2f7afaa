"""Commands: train-stepper (the toolkit's train_stepper.py) and evaluate-stepper."""
import dataclasses
import logging

import click

from motion_matching.cli.group import CONTEXT, SEED, Command, main, reports_errors, summary
from motion_matching.cli.paths import INPUT_FILE, OUTPUT_FOLDER
from motion_matching.cli.train import config_option, pop_config, run_rate, run_with_progress
from motion_matching.stepper.config import EVALUATION_SEED, EVALUATION_WINDOWS, RECIPES, StepperConfig, recipe_config

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


@main.command("evaluate-stepper", short_help=summary("evaluate-stepper"))
@click.option("--stepper", "stepper_path", type=INPUT_FILE, default="stepper.bin", show_default=True,
              help="The stepper.bin to evaluate.")
@INPUT_OPTIONS[0]
@INPUT_OPTIONS[1]
@INPUT_OPTIONS[2]
@click.option("--decompressor", "decompressor_path", type=INPUT_FILE, default=None,
              help="Also decode the stepped frames with this decompressor.bin (of that latent.bin) and measure the "
                   "poses' joint positions.")
@click.option("--windows", type=click.IntRange(min=1), default=EVALUATION_WINDOWS, show_default=True,
              help="Windows of 20 frames to step: every one inside a clip, or this many evenly spaced.")
@click.option("--seed", type=SEED, default=EVALUATION_SEED, show_default=True,
              help="Seed of the offset of the evenly spaced windows.")
@click.option("--out", "out_dir", type=OUTPUT_FOLDER, metavar="FOLDER", default="evaluation", show_default=True,
              help="Folder for stepper_evaluation.json and stepper_errors.png.")
@click.option("--plots/--no-plots", default=True, show_default=True, help="Write stepper_errors.png.")
@click.option("--force", is_flag=True, help="Replace files of those names in FOLDER that it did not write.")
@reports_errors
def evaluate_stepper_command(**options):
    """Measure a stepper on windows of 20 frames across its database: from each window's first frame it steps
    19 frames on its own output; the L1 error of features and latent by horizon, with --decompressor the decoded
    poses' joint position error (cm); JSON and a plot.

    Example: mm-projector evaluate-stepper --stepper run1/stepper.bin --latent latent.bin --out evaluation
    """
    from motion_matching.stepper.evaluate import evaluate_files  # torch: not for --help
    for line in evaluation_lines(evaluate_files(options.pop("stepper_path"), **options)):
        click.echo(line)


def evaluation_lines(report):
    """The lines (list of str) that evaluate-stepper prints for ``report``."""
    last = report["window"] - 1
    lines = [f"{what} L1: mean {report[name]['mean']:.4f} over frames 1-{last} (frame 1 "
             f"{report[name]['by_horizon'][0]:.4f}, frame {last} {report[name]['by_horizon'][-1]:.4f})"
             for name, what in (("feature_l1", "feature"), ("latent_l1", "latent"))]
    if "position_error_cm" in report:
        values, alone = report["position_error_cm"], report["decompressor_alone_cm"]
        lines.append(f"position error: mean {values['mean']:.3f} cm, p95 {values['p95']:.3f}, max {values['max']:.3f} "
                     f"(the decompressor alone on the database's frames: mean {alone['mean']:.3f} cm)")
    lines.append(f"loss {report['loss_terms']['loss']:.4f} over {report['windows']:,} of "
                 f"{report['windows_possible']:,} windows of {report['window']} frames")
    return lines + [f"wrote {', '.join(report['files'])}"]


@click.command(cls=Command, context_settings=CONTEXT)
@stepper_options
@reports_errors
def script_main(**options):
    """Train the Learned Motion Matching stepper (python train_stepper.py, the toolkit's script name):
    stepper.bin from database.bin, features.bin and latent.bin, with the toolkit's settings."""
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    logging.getLogger("torch").setLevel(logging.WARNING)  # as mm-projector's group does, before torch loads
    run_stepper_training(**options)
