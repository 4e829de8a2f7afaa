"""Commands: retrain (database.bin -> features, decompressor, cache, projector, stepper, verify; make-like)."""
import logging
import os
import sys

import click

from motion_matching.cli.cache import log_levels
from motion_matching.cli.group import interrupted_exit, main, reports_errors, summary
from motion_matching.cli.paths import INPUT_FILE, OUTPUT_FOLDER
from motion_matching.cli.progress import ProgressBar, format_duration
from motion_matching.cli.train import training_progress
from motion_matching.errors import InvalidOption
from motion_matching.pipeline.run import run_retrain
from motion_matching.pipeline.settings import (
    DEFAULT_CACHE_QUERIES,
    DEFAULT_RECIPE,
    NETWORKS,
    RECIPE_NAMES,
    RetrainSettings,
    network_recipes,
)
from motion_matching.pipeline.state import STATE_NAME
from motion_matching.stepper.config import SMALL_DATABASE_FRAMES

BAR_LABELS = {"decompressor": "train-decompressor", "projector": "train", "stepper": "train-stepper"}
DEFAULT_NOTES = {"stepper": f"; its fast: small on a database.bin of fewer than {SMALL_DATABASE_FRAMES:,} frames"}


def _network_options(command):
    for network in reversed(list(NETWORKS)):
        command = click.option(f"--{network}-iterations", type=click.IntRange(min=1),
                               help=f"Training iterations of the {network} [default: its recipe's].")(command)
        command = click.option(f"--{network}-recipe", type=click.Choice(network_recipes(network)),
                               help=f"The {network}'s recipe [default: --recipe{DEFAULT_NOTES.get(network, '')}].")(
                                   command)
    return command


class StageDisplay:
    """What the command shows while stages run: each stage's line, its progress bars (build-cache's and the
    training's, made anew for each stage) and a skipped stage's reason."""

    def __init__(self, *, quiet):
        self.quiet, self.cache, self.train = quiet, None, None

    def announce(self, name, reason, note):
        self.close()
        self.cache = ProgressBar(unit="queries", label="build-cache", quiet=self.quiet)
        self.train = ProgressBar(unit="it", label=BAR_LABELS.get(name, name), quiet=self.quiet)
        if not self.quiet:
            click.echo(f"== {name}: " + ("up to date" if reason is None else f"runs ({reason})")
                       + (f"; {note}" if note else ""))

    def done(self, result):
        self.close()
        if result.status == "skipped":
            click.echo(f"   skipped: {result.reason}")

    def close(self):
        for bar in (self.cache, self.train):
            if bar is not None:
                bar.close()

    def cache_progress(self, done, total):
        self.cache(done, total)

    def train_progress(self, report):
        training_progress(self.train)(report)


def _duration(seconds):
    return f"{seconds:.1f} s" if seconds < 60 else format_duration(seconds)


def summary_lines(results):
    """The summary table (list of str): stage, what it did, time, quality, files."""
    rows = [("stage", "status", "time", "quality", "files")]
    rows += [(one.name, one.status, _duration(one.seconds) if one.seconds else "-",
              one.quality or (one.reason if one.status == "skipped" else "-"),
              ", ".join(os.path.basename(path) for path in one.files) or "-") for one in results]
    widths = [max(len(row[column]) for row in rows) for column in range(4)]
    return ["   ".join([*(cell.ljust(width) for cell, width in zip(row, widths)), row[4]]).rstrip() for row in rows]


@main.command("retrain", short_help=summary("retrain"))
@click.option("--database", "database_path", type=INPUT_FILE, default="database.bin", show_default=True,
              help="The toolkit's database.bin (read only, never written).")
@click.option("--out", "out_dir", type=OUTPUT_FOLDER, metavar="FOLDER", default=".", show_default=True,
              help="Folder for the runtime files (the toolkit's resources/, say), retrain.json and retrain/.")
@click.option("--recipe", type=click.Choice(RECIPE_NAMES), default=DEFAULT_RECIPE, show_default=True,
              help="Every network's recipe: fast (minutes; each measured at least as good as the toolkit's), "
                   "preview (a first look in a fraction of that) or toolkit (hours); a network without it trains "
                   "its nearest, saying so.")
@_network_options
@click.option("--cache-queries", type=click.IntRange(min=1), default=DEFAULT_CACHE_QUERIES, show_default=True,
              help="Queries of the projector's neighbour cache.")
@click.option("--threads", type=click.IntRange(min=1), help="CPU threads [default: each stage's own choice].")
@click.option("--force", is_flag=True, help="Replace files in --out that retrain did not write (the toolkit's own).")
@click.option("--quiet", is_flag=True, help="No stage lines or progress bars, only errors and the summary.")
@reports_errors
def retrain(database_path, out_dir, recipe, cache_queries, threads, force, quiet, **networks):
    """From database.bin, make features.bin, decompressor.bin and latent.bin, the neighbour cache,
    projector.bin and stepper.bin, and check the three networks with the C evaluator.

    Like make: a rerun runs only the stages whose inputs, settings or outputs changed (retrain.json).

    Example: mm-projector retrain --database database.bin --out retrained
    """
    settings = _settings(recipe=recipe, cache_queries=cache_queries, threads=threads,
                         recipes={name: networks[f"{name}_recipe"] for name in NETWORKS},
                         iterations={name: networks[f"{name}_iterations"] for name in NETWORKS})
    with log_levels({"motion_matching": logging.WARNING if quiet else logging.INFO}):
        results = _run(out_dir, database_path=database_path, settings=settings, force=force, quiet=quiet)
    for line in summary_lines(results):
        click.echo(line)


def _settings(**values):
    """``RetrainSettings(**values)``; a value it refuses is a usage error of its option, before anything runs."""
    try:
        return RetrainSettings(**values)
    except InvalidOption as error:
        context = click.get_current_context()
        option = next(one for one in context.command.params if error.path in getattr(one, "opts", ()))
        raise click.BadParameter(error.problem, ctx=context, param=option) from None


def _run(out_dir, *, settings, quiet, **options):
    """``run_retrain`` with the stage lines and bars; Ctrl-C: one line, exit 130."""
    shown = StageDisplay(quiet=quiet)
    try:
        return run_retrain(out_dir, settings=settings, announce=shown.announce, done=shown.done,
                           cache_progress=shown.cache_progress, train_progress=shown.train_progress, **options)
    except KeyboardInterrupt:  # every file is written atomically; the stages done are recorded
        shown.close()
        click.echo(f"interrupted; the finished stages are recorded in {os.path.join(out_dir, STATE_NAME)}: "
                   "run the same command again to continue", err=True)
        sys.exit(interrupted_exit())
