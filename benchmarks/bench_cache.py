"""Is build-cache only as slow as its search? Times a whole build against its parts, side by side.

For the synthetic locomotion database's matching features, each repeat times, in turn: building the
searcher, searching pre-generated chunks (search only), generating the same queries (generation only), a whole
``build_cache`` (searcher, generation overlapped with search, HDF5 writes, rename), and reading the
cache back in order with ``open_cache``/``read``. Prints medians and the ratio build / (searcher + search):
1.00 means the builder adds nothing to the search.

    python benchmarks/bench_cache.py [--frames 10000] [--queries 262144] [--backend B] [--threads T]
                                     [--repeats 3] [--json FILE]
"""
import json
import os
import statistics
import tempfile
import time

import click
import numpy as np

from motion_matching import cache
from motion_matching.data import features as features_module
from motion_matching.data.synthetic import locomotion as synthetic
from motion_matching.neighbours import queries
from motion_matching.neighbours.search import DEFAULT_BACKEND, make_searcher
from motion_matching.toolkit import formats


def synthetic_features(nframes, *, seed=0):
    """The synthetic locomotion database's matching features (about nframes, 27) float32."""
    database = synthetic.generate_synthetic_database(seed=seed, nframes=nframes)
    return np.ascontiguousarray(features_module.compute_features(database).features, dtype=np.float32)


def timed(function):
    """(seconds, result) of calling ``function()``."""
    start = time.perf_counter()
    result = function()
    return time.perf_counter() - start, result


def one_repeat(features_path, features, folder, *, nqueries, chunk_rows, backend, threads):
    """Seconds (dict) of each measured step for one repeat."""
    seconds = {}
    seconds["searcher"], searcher = timed(lambda: make_searcher(features, backend=backend, threads=threads))
    starts = range(0, nqueries, chunk_rows)
    chunks = [queries.generate_queries(features, seed=1234, start=s, stop=min(s + chunk_rows, nqueries))
              for s in starts]
    seconds["search"] = sum(timed(lambda c=chunk: searcher.nearest(*c))[0] for chunk in chunks)
    seconds["generate"] = sum(timed(lambda s=s: queries.generate_queries(
        features, seed=1234, start=s, stop=min(s + chunk_rows, nqueries)))[0] for s in starts)
    out = os.path.join(folder, "bench.h5")
    if os.path.exists(out):
        os.remove(out)
    seconds["build"], _ = timed(lambda: cache.build_cache(features_path, out=out, nqueries=nqueries, seed=1234,
                                                          backend=backend, threads=threads, chunk_rows=chunk_rows))

    def read_all():
        with cache.open_cache(out, features_path=features_path) as reader:
            for start in range(0, nqueries, 4096):
                reader.read(start, min(start + 4096, nqueries))
    seconds["read"], _ = timed(read_all)
    return seconds


@click.command()
@click.option("--frames", default=10_000, show_default=True)
@click.option("--queries", "nqueries", default=262_144, show_default=True)
@click.option("--chunk-rows", default=cache.DEFAULT_CHUNK_ROWS, show_default=True)
@click.option("--backend", default=DEFAULT_BACKEND, show_default=True)
@click.option("--threads", type=int, default=None)
@click.option("--repeats", default=3, show_default=True)
@click.option("--json", "json_path", type=click.Path(dir_okay=False), default=None)
def main(frames, nqueries, chunk_rows, backend, threads, repeats, json_path):
    """Time build-cache against its search; print a table of medians."""
    features = synthetic_features(frames)
    with tempfile.TemporaryDirectory() as folder:
        features_path = os.path.join(folder, "features.bin")
        zeros = np.zeros(features.shape[1], np.float32)
        formats.save_features(features_path, formats.Features(features, zeros, zeros + 1))
        runs = [one_repeat(features_path, features, folder, nqueries=nqueries, chunk_rows=chunk_rows,
                           backend=backend, threads=threads) for _ in range(repeats)]
    medians = {name: statistics.median(run[name] for run in runs) for name in runs[0]}
    ratio = medians["build"] / (medians["searcher"] + medians["search"])
    click.echo(f"{frames:,} frames, {nqueries:,} queries, chunks of {chunk_rows:,}, backend {backend}, "
               f"threads {threads or 'default'}, median of {repeats}")
    click.echo(f"{'step':<28}{'seconds':>10}{'queries/s':>14}")
    for name, label in (("searcher", "build searcher"), ("search", "search only"), ("generate", "generate only"),
                        ("build", "build_cache (all)"), ("read", "read back (4096-row reads)")):
        click.echo(f"{label:<28}{medians[name]:>10.3f}{nqueries / medians[name]:>14,.0f}")
    click.echo(f"ratio build / (searcher + search): {ratio:.3f}")
    if json_path:
        with open(json_path, "w", encoding="utf-8") as stream:
            json.dump({"frames": frames, "queries": nqueries, "chunk_rows": chunk_rows, "backend": backend,
                       "threads": threads, "repeats": runs, "medians": medians, "ratio": ratio}, stream, indent=2)


if __name__ == "__main__":
    main()
