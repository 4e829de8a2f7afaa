"""Commands: demo (the whole pipeline on the embedded synthetic data)."""
import sys

import click

from motion_matching.cli.group import INTERRUPTED_EXIT, main, reports_errors, summary
from motion_matching.cli.paths import OUTPUT_FOLDER
from motion_matching.cli.progress import ProgressBar
from motion_matching.cli.train import training_progress
from motion_matching.demo import DemoSettings, compare_with_reference, describe_duration, run_demo
from motion_matching.machine import busy_note
from motion_matching.projector.recipes import RECIPES

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
@click.option("--recipe", default=_DEFAULTS.recipe, show_default=True, type=click.Choice(list(RECIPES)),
              help="Training recipe (train --recipe); the toolkit's takes most of an hour or more.")
@click.option("--iterations", type=click.IntRange(min=1), default=_DEFAULTS.iterations,
              help="Training iterations [default: the recipe's: fast 15,625, toolkit 500,000].")
@click.option("--batch-size", type=click.IntRange(min=1), help="Queries per iteration [default: the recipe's].")
@click.option("--threads", type=click.IntRange(min=1),
              help="CPU threads for search and training [default: as build-cache's and train's].")
@click.option("--force", is_flag=True,
              help="Replace the files of another demo found in --out, and others of the names it writes.")
@reports_errors
def demo(out, frames, recipe, iterations, batch_size, threads, force):
    """Generate a synthetic database, build its exact-neighbour cache, train offline, export, evaluate.

    Run again into the same folder, it reuses what fits (the files, the cache's rows, the checkpoint).

    Example: mm-projector demo --out demo
    """
    settings = DemoSettings(frames=frames, recipe=recipe, iterations=iterations, batch_size=batch_size,
                            threads=threads)
    cache_bar, train_bar = ProgressBar(unit="queries", label="build-cache"), ProgressBar(unit="it", label="train")

    def announce(step):
        click.echo(f"== {step}")

    def report(step, paths, seconds):
        cache_bar.close()
        train_bar.close()
        _print_paths(paths)
        click.echo(f"   took {describe_duration(seconds)}")

    busy = busy_note()  # measured before the demo loads the cores itself
    if busy:
        click.echo(busy)
    try:
        result = run_demo(out, settings, force=force, announce=announce, report=report,
                          cache_progress=cache_bar, train_progress=training_progress(train_bar))
    except KeyboardInterrupt:  # every file is written atomically, at any moment of any step
        cache_bar.close()
        train_bar.close()
        click.echo(f"interrupted; the files in {out} are complete: run the same command again to continue", err=True)
        sys.exit(INTERRUPTED_EXIT)
    _print_result(result, settings, busy)


def _print_result(result, settings, busy):
    evaluation = result.evaluation
    losses = ", ".join(f"{name} {value:.4f}" for name, value in evaluation["losses"].items())
    click.echo(f"held-out: {losses}; top-1 match {evaluation['match']['top1']:.1%}, "
               f"top-5 {evaluation['match']['top5']:.1%}")
    for line in compare_with_reference(result, settings):
        click.echo(line)
    if busy:
        click.echo(f"   {busy} (at the start of this run)")
