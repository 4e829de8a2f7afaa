"""Commands: train-decompressor (the toolkit's train_decompressor.py) and evaluate-decompressor."""
import dataclasses
import logging

import click

from motion_matching.cli.group import CONTEXT, Command, main, reports_errors, summary
from motion_matching.cli.paths import INPUT_FILE, OUTPUT_FOLDER
from motion_matching.cli.train import config_option, pop_config, run_rate, run_with_progress
from motion_matching.decompressor.config import RECIPES, DecompressorConfig, recipe_config

PATH_OPTIONS = [
    click.option("--database", "database_path", type=INPUT_FILE, default="database.bin", show_default=True,
                 help="The toolkit's database.bin."),
    click.option("--features", "features_path", type=INPUT_FILE, default="features.bin", show_default=True,
                 help="The toolkit's features.bin (of that database)."),
    click.option("--out", "out_dir", type=OUTPUT_FOLDER, metavar="FOLDER", default=".", show_default=True,
                 help="Folder for decompressor.bin, latent.bin (and latent.json) and decompressor_checkpoint.pt."),
    click.option("--resume", type=INPUT_FILE, default=None,
                 help="Continue from this decompressor_checkpoint.pt [default: the one in --out, if any]."),
    click.option("--force", is_flag=True,
                 help="Replace the decompressor.bin, latent.bin and checkpoint of another run (or the toolkit's "
                      "own) found in --out; this run's own checkpoint is continued."),
    click.option("--plots", is_flag=True,
                 help="Write decompressor_X.png and decompressor_Z.png (the features and latent of clip 2) and "
                      "decompressor_Ygnd.bvh and decompressor_Ytil.bvh (clip 2 and its reconstruction, recorded "
                      "in decompressor_previews.json) at each save."),
    click.option("--tensorboard", type=OUTPUT_FOLDER, default=None,
                 help="Write TensorBoard loss curves into this folder."),
    click.option("--quiet", is_flag=True, help="No progress line, only errors and the final lines."),
]


def decompressor_options(command):
    """Decorate a click callback with every ``DecompressorConfig`` field and the path options."""
    fields = [config_option(field, RECIPES) for field in dataclasses.fields(DecompressorConfig)]
    for option in reversed(fields + PATH_OPTIONS):
        command = option(command)
    return command


def describe_decompressor(result):
    """The line (str) that ends a decompressor run: what was written, the loss and the speed."""
    if result.steps == result.resumed_from:
        return (f"{result.network_path} is already trained ({result.steps:,} iterations, checkpoint "
                f"{result.checkpoint_path}); nothing to do (a larger --iterations continues it, another --out "
                "trains anew)")
    return (f"wrote {result.network_path}, the latent.bin beside it and {result.checkpoint_path} after "
            f"{result.steps:,} iterations: rolling loss {result.final_loss:.4f}; {run_rate(result):,.1f} it/s in "
            "this run")


def run_decompressor_training(*, quiet, **options):
    """Train the decompressor with parsed options and print the outcome; exit 130 after saving on Ctrl-C."""
    logging.getLogger("motion_matching").setLevel(logging.WARNING if quiet else logging.INFO)
    config = pop_config(options, config_class=DecompressorConfig, recipes=RECIPES, make=recipe_config)

    def train(progress):
        from motion_matching.decompressor.train import train_decompressor  # torch: not for --help
        return train_decompressor(config, progress=progress, **options)

    run_with_progress(train, quiet=quiet, resume=options.get("resume"), describe=describe_decompressor)


@main.command("train-decompressor", short_help=summary("train-decompressor"))
@decompressor_options
@reports_errors
def train_decompressor_command(**options):
    """Train the compressor and decompressor as the toolkit's train_decompressor.py does (defaults are its
    constants): decompressor.bin and latent.bin every --save-every iterations.

    Example: mm-projector train-decompressor --database database.bin --features features.bin --out run1
    """
    run_decompressor_training(**options)


@main.command("evaluate-decompressor", short_help=summary("evaluate-decompressor"))
@click.option("--decompressor", "decompressor_path", type=INPUT_FILE, default="decompressor.bin", show_default=True,
              help="The decompressor.bin to evaluate.")
@click.option("--latent", "latent_path", type=INPUT_FILE, default="latent.bin", show_default=True,
              help="The latent.bin written with it.")
@click.option("--database", "database_path", type=INPUT_FILE, default="database.bin", show_default=True,
              help="The database.bin it was trained on.")
@click.option("--features", "features_path", type=INPUT_FILE, default="features.bin", show_default=True,
              help="The features.bin of that database.")
@click.option("--out", "out_dir", type=OUTPUT_FOLDER, metavar="FOLDER", default="evaluation", show_default=True,
              help="Folder for decompressor_evaluation.json and decompressor_errors.png.")
@click.option("--plots/--no-plots", default=True, show_default=True, help="Write decompressor_errors.png.")
@click.option("--force", is_flag=True, help="Replace files of those names in FOLDER that it did not write.")
@reports_errors
def evaluate_decompressor_command(**options):
    """Measure a decompressor on every frame of its database: world joint position error (cm), local
    rotation error (degrees), contact accuracy and the toolkit's loss terms; JSON and a plot.

    Example: mm-projector evaluate-decompressor --decompressor run1/decompressor.bin --latent run1/latent.bin
    """
    from motion_matching.decompressor.evaluate import evaluate_files  # torch: not for --help
    report = evaluate_files(options.pop("decompressor_path"), options.pop("latent_path"), **options)
    for name, unit in (("position_error_cm", "cm"), ("rotation_error_deg", "degrees")):
        values = report[name]
        click.echo(f"{name.rsplit('_', 1)[0].replace('_', ' ')}: mean {values['mean']:.3f} {unit}, "
                   f"p95 {values['p95']:.3f}, max {values['max']:.3f}")
    click.echo(f"contact accuracy: {report['contact_accuracy']:.2%}; loss {report['loss_terms']['loss']:.4f}")
    click.echo(f"wrote {', '.join(report['files'])}")


@click.command(cls=Command, context_settings=CONTEXT)
@decompressor_options
@reports_errors
def script_main(**options):
    """Train the Learned Motion Matching decompressor (python train_decompressor.py, the toolkit's script name):
    decompressor.bin and latent.bin from database.bin and features.bin, with the toolkit's settings."""
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    logging.getLogger("torch").setLevel(logging.WARNING)  # as mm-projector's group does, before torch loads
    run_decompressor_training(**options)
