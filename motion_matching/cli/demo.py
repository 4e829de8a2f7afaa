"""Commands: demo (the whole retrain pipeline on the embedded synthetic data)."""
import logging
import sys

import click

from motion_matching.cli.cache import log_levels
from motion_matching.cli.group import interrupted_exit, main, reports_errors, summary
from motion_matching.cli.paths import OUTPUT_FOLDER
from motion_matching.cli.retrain import StageDisplay, summary_lines
from motion_matching.demo import DemoSettings, compare_with_reference, describe_duration, run_demo
from motion_matching.machine import busy_note
from motion_matching.pipeline.settings import RECIPE_NAMES

_DEFAULTS = DemoSettings()


def _print_paths(paths):
    for label, path in paths.items():
        for one in [path] if isinstance(path, str) else path:
            click.echo(f"   {label}: {one}")


@main.command("demo", short_help=summary("demo"))
@click.option("--out", default="demo", show_default=True, type=OUTPUT_FOLDER, metavar="FOLDER",
              help="Folder for every file.")
@click.option("--frames", default=_DEFAULTS.frames, show_default=True, type=click.IntRange(min=1000),
              help="Frames of the synthetic database.")
@click.option("--recipe", default=_DEFAULTS.recipe, show_default=True, type=click.Choice(RECIPE_NAMES),
              help="Every network's recipe, as retrain --recipe; the toolkit's takes hours.")
@click.option("--iterations", type=click.IntRange(min=1), default=_DEFAULTS.iterations,
              help="Training iterations of every network [default: each recipe's]; the projector's neighbour "
                   "cache holds one query per training sample.")
@click.option("--threads", type=click.IntRange(min=1), help="CPU threads [default: each stage's own choice].")
@click.option("--force", is_flag=True,
              help="Replace another demo's database.bin found in --out, and files of the names it writes that it "
                   "did not write.")
@reports_errors
def demo(out, frames, recipe, iterations, threads, force):
    """Generate a synthetic database.bin, run retrain on it (features, decompressor and latent.bin, neighbour
    cache, projector, stepper, verify), export the projector to ONNX and evaluate it on held-out queries.

    Run again into the same folder, the stages that are up to date do nothing (retrain.json).

    Example: mm-projector demo --out demo
    """
    settings = DemoSettings(frames=frames, recipe=recipe, iterations=iterations, threads=threads)
    busy = busy_note()  # measured before the demo loads the cores itself
    if busy:
        click.echo(busy)
    with log_levels({"motion_matching": logging.INFO}):
        result = _run(out, settings, force=force)
    _print_result(result, settings, busy)


def _run(out, settings, *, force):
    """``run_demo`` with its step lines and the pipeline's stage lines and bars; Ctrl-C: one line, exit 130."""
    shown = StageDisplay(quiet=False)

    def announce(step):
        shown.close()
        click.echo(f"== {step}")

    def report(step, paths, seconds):
        _print_paths(paths)
        click.echo(f"   took {describe_duration(seconds)}")

    stages = {"announce": shown.announce, "done": shown.done, "cache_progress": shown.cache_progress,
              "train_progress": shown.train_progress}
    try:
        return run_demo(out, settings, force=force, announce=announce, report=report, stages=stages)
    except KeyboardInterrupt:  # every file is written atomically; the pipeline's finished stages are recorded
        shown.close()
        click.echo(f"interrupted; the files in {out} are complete: run the same command again to continue", err=True)
        sys.exit(interrupted_exit())


def _print_result(result, settings, busy):
    for line in summary_lines(result.stages):
        click.echo(line)
    evaluation = result.evaluation
    losses = ", ".join(f"{name} {value:.4f}" for name, value in evaluation["losses"].items())
    click.echo(f"held-out: {losses}; top-1 match {evaluation['match']['top1']:.1%}, "
               f"top-5 {evaluation['match']['top5']:.1%}")
    for line in compare_with_reference(result, settings):
        click.echo(line)
    if busy:
        click.echo(f"   {busy} (at the start of this run)")
