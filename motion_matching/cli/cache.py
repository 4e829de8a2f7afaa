"""Commands: build-cache, cache-info, verify-cache (the exact-neighbour cache, docs/cache.md)."""
import contextlib
import logging
import sys

import click
import numpy as np

from motion_matching import cache
from motion_matching.cache.build import BuildInterrupted
from motion_matching.cli.group import SEED, interrupted_exit, main, reports_errors, summary
from motion_matching.cli.paths import INPUT_FILE, OUTPUT_FILE
from motion_matching.cli.progress import ProgressBar
from motion_matching.neighbours.search import BACKENDS, DEFAULT_BACKEND
from motion_matching.toolkit import recipe

FILE = INPUT_FILE


@main.command("build-cache", short_help=summary("build-cache"))
@click.option("--features", "features_path", type=FILE, default="features.bin", show_default=True,
              help="The toolkit's features.bin.")
@click.option("--queries", "nqueries", type=click.IntRange(min=1), default=cache.DEFAULT_NQUERIES, show_default=True,
              help="Number of noisy queries (rows) to store.")
@click.option("--seed", type=SEED, default=cache.DEFAULT_SEED, show_default=True, help="Seed of the query stream.")
@click.option("--out", type=OUTPUT_FILE, metavar="FILE", default="projector_cache.h5", show_default=True,
              help="The cache file to write.")
@click.option("--backend", type=click.Choice(sorted(BACKENDS)), default=DEFAULT_BACKEND, show_default=True,
              help="Exact nearest-neighbour search backend.")
@click.option("--threads", type=click.IntRange(min=1), default=None,
              help="Search threads [default: every core the process may use; faiss-flat and torch: the free ones].")
@click.option("--device", default="cpu", show_default=True, help="Search device, for backends that have one.")
@click.option("--chunk-rows", type=click.IntRange(min=1), default=cache.DEFAULT_CHUNK_ROWS, show_default=True,
              help="Rows per search call, HDF5 chunk and resume step.")
@click.option("--force", is_flag=True, help="Replace a cache built from other features or arguments.")
@click.option("--quiet", is_flag=True, help="No progress bar or notes, only errors and the final line.")
@click.option("--exact-toolkit", is_flag=True,
              help="Store the toolkit script's own query stream (for train --exact-toolkit --offline).")
@click.option("--database", "database_path", type=FILE, default="database.bin", show_default=True,
              help="With --exact-toolkit: the database.bin whose range 2 sets the preview's draws.")
@click.option("--batch-size", type=click.IntRange(min=1), default=recipe.BATCH_SIZE, show_default=True,
              help="With --exact-toolkit: the training batch size the stream is drawn for.")
@click.option("--save-every", type=click.IntRange(min=1), default=recipe.SAVE_EVERY, show_default=True,
              help="With --exact-toolkit: the training's projector.bin save interval (its preview draws).")
@reports_errors
def build_cache_command(features_path, nqueries, seed, out, backend, threads, device, chunk_rows, force, quiet,
                        **toolkit):
    """Build the exact-neighbour cache: noisy queries and their nearest frames, in HDF5.

    Resumes an interrupted build of the same arguments; does nothing if OUT is already up to date.

    Example: mm-projector build-cache --features features.bin --out projector_cache.h5 --queries 16000000
    """
    bar = ProgressBar(unit="queries", label="build-cache", quiet=quiet)
    # faiss's loader logs INFO lines that are not for users; --quiet also hides our resume notes
    with log_levels({"faiss": logging.WARNING, "motion_matching": logging.WARNING if quiet else logging.INFO}):
        try:
            result = cache.build_cache(features_path, out=out, nqueries=nqueries, seed=seed, backend=backend,
                                       threads=threads, device=device, chunk_rows=chunk_rows, force=force,
                                       progress=None if quiet else bar, **toolkit)
        except BuildInterrupted as stop:
            bar.close()
            click.echo(describe_interruption(stop), err=True)
            sys.exit(interrupted_exit())
        finally:
            bar.close()
    click.echo(describe_build(result, requested=nqueries))


def describe_interruption(stop):
    """The line (str) build-cache prints on Ctrl-C: what was kept and how to resume."""
    kept = stop.result.resumed_from + stop.result.rows_written
    if not kept:
        return "interrupted before the first chunk was written; run the same command again to start the build"
    return (f"interrupted: {stop.partial} keeps {kept:,} of {stop.result.nqueries:,} queries; run the same "
            "command again to resume from there")


@contextlib.contextmanager
def log_levels(levels):
    """Set the levels (dict logger name -> level) of some loggers for a ``with`` block, then restore them."""
    loggers = {logging.getLogger(name): level for name, level in levels.items()}
    saved = {logger: logger.level for logger in loggers}
    try:
        for logger, level in loggers.items():
            logger.setLevel(level)
        yield
    finally:
        for logger, level in saved.items():
            logger.setLevel(level)


def describe_build(result, *, requested=None):
    """One line (str) saying what ``build_cache`` did (``requested``: the queries asked for)."""
    if result.status == "up-to-date" and requested is not None and result.nqueries > requested:
        return (f"{result.path} holds {result.nqueries:,} queries, more than the {requested:,} asked for: its first "
                f"{requested:,} are those; nothing to do")
    if result.status == "up-to-date":
        return f"{result.path} is up to date ({result.nqueries:,} queries); nothing to do"
    # the bar's rate: rows searched by this call over the seconds since its first progress call (setup excluded)
    rate = result.rows_written / result.search_seconds if result.search_seconds > 0 else 0.0
    resumed = f", resumed at row {result.resumed_from:,}" if result.resumed_from else ""
    return (f"wrote {result.path}: {result.nqueries:,} queries{resumed}; {result.rows_written:,} searched in "
            f"{result.search_seconds:.1f} s ({rate:,.0f} queries/s), {result.seconds:.1f} s in all")


@main.command("cache-info", short_help=summary("cache-info"))
@click.argument("cache_path", metavar="CACHE", type=FILE)
@click.option("--features", "features_path", type=FILE, default=None,
              help="Also say whether CACHE is fresh for this features.bin.")
@reports_errors
def cache_info_command(cache_path, features_path):
    """Print a cache's metadata and, with --features, whether it is fresh.

    Example: mm-projector cache-info projector_cache.h5 --features features.bin
    """
    info = cache.cache_info(cache_path, features_path=features_path)
    for line in describe_info(cache_path, info):
        click.echo(line)


def describe_info(path, info):
    """The lines (list of str) that ``cache-info`` prints for ``cache_info``'s dict."""
    scale = np.array2string(info["noise_scale"], precision=4, separator=" ", max_line_width=10_000)
    lines = [f"cache: {path}", f"format: {info['format']} version {info['format_version']}",
             f"queries: {info['nqueries']:,} (seed {info['seed']}, chunks of {info['chunk_rows']:,} rows)",
             f"frames: {info['nframes']:,} x {info['nfeatures']} features",
             f"features_sha256: {info['features_sha256']}", f"query_recipe: {info['query_recipe']}",
             f"query_block: {info['query_block']}", f"noise_scale: {scale}", f"backend: {info['backend']}",
             f"stream: {describe_stream(info)}",
             f"created: {info['created']}",
             "checksums: Fletcher-32 per chunk, every chunk verified" if info["checksums"] else
             "checksums: none (format version 1: damage inside its rows cannot be detected; rebuild it with "
             "build-cache --force to add them)",
             "versions: " + ", ".join(f"{name} {version}" for name, version in sorted(info["versions"].items()))]
    if info["fresh"] is None:
        lines.append("fresh: not checked (pass --features)")
    else:
        lines.append("fresh: yes" if info["fresh"] else f"fresh: no ({info['freshness']})")
    return lines


def describe_stream(info):
    """The cache's query stream in words (str)."""
    if info.get("stream", "default") == "default":
        return "default"
    return (f"toolkit (batch {info['batch_size']}, save interval {info['save_every']}, "
            f"preview {info['preview_rows']} rows)")


@main.command("verify-cache", short_help=summary("verify-cache"))
@click.argument("cache_path", metavar="CACHE", type=FILE)
@click.option("--features", "features_path", type=FILE, default="features.bin", show_default=True,
              help="The features.bin the cache must have been built from.")
@click.option("--sample", type=click.IntRange(min=0), default=1000, show_default=True,
              help="Random rows to regenerate and re-search by float64 brute force.")
@click.option("--seed", type=SEED, default=None, help="Seed of the sample (default: a fresh one).")
@reports_errors
def verify_cache_command(cache_path, features_path, sample, seed):
    """Re-check a cache: layout, freshness, and a random sample of rows against a float64 brute force.

    Example: mm-projector verify-cache projector_cache.h5 --features features.bin --sample 5000
    """
    report = cache.verify_cache(cache_path, features_path=features_path, sample=sample, seed=seed)
    checked = "pass their checksums, are " if report.checksums else "(no checksums: format version 1) "
    click.echo(f"{report.path}: OK: {report.rows_scanned:,} rows {checked}finite and in range; "
               f"{report.rows_regenerated:,} "
               f"sampled queries regenerate bit-identically; {report.neighbours_checked:,} sampled neighbours "
               f"match a float64 brute force (worst relative excess {report.worst_excess:.2g})")
