"""How fast is each exact nearest-frame backend on the training query stream, and is it exact?

For the synthetic database's matching features (``synthetic.generate_synthetic_database`` +
``features.compute_features``, 50,000 x 27 by default) and copies tiled 4x and 16x (each copy with
small jitter), it times every backend's ``nearest(queries, sources)`` on the first queries of the
training stream (``queries.generate_queries``, seed 1), round by round side by side, and prints the
median queries/s, the ratio to ``faiss-flat`` at its best (fed 65,536 queries per call, the faster of
``--threads`` and 1 thread, as faiss's OpenMP threads suffer most on a busy machine), the build
time and the fraction of a sample of queries whose answer is at the float64 brute-force minimum.
``faiss-raw`` is faiss ``IndexFlatL2`` k=1 alone (not exact: no float64 settling), for reference;
``cells-numpy`` is the fallback used where the C extension is not built.

    python benchmarks/bench_search.py [--scales 1,4,16] [--repeats 3] [--threads 2] [--json FILE]
"""
import json
import statistics
import sys
import time

import click
import numpy as np

from motion_matching.data import features
from motion_matching.data.synthetic import locomotion as synthetic
from motion_matching.neighbours import search
from motion_matching.neighbours.queries import generate_queries

LARGE_SCALE_BACKENDS = ("cells", "cells-numpy", "faiss-flat", "faiss-raw")  # balltree and torch are too slow there
FAISS_ENTRIES = ("faiss-flat", "faiss-raw")  # also timed with 1 thread: on a busy machine that can win


class FaissRaw:
    """faiss ``IndexFlatL2`` k=1 without settling: the raw float32 seed method."""

    def __init__(self, frames, *, threads):
        import faiss
        faiss.omp_set_num_threads(threads)
        self.index = faiss.IndexFlatL2(frames.shape[1])
        self.index.add(np.ascontiguousarray(frames, dtype=np.float32))

    def nearest(self, queries, sources=None):
        return self.index.search(np.ascontiguousarray(queries, dtype=np.float32), 1)[1][:, 0]


def database_features(scale, seed=0):
    """Synthetic matching features (F * scale, 27) float32: copies after the first carry jitter."""
    base = features.compute_features(synthetic.generate_synthetic_database(seed=seed)).features
    rng = np.random.default_rng(seed)
    jitter = 0.01 * base.std(axis=0)
    copies = [base] + [base + jitter * rng.standard_normal(base.shape).astype(np.float32)
                       for _ in range(scale - 1)]
    return np.ascontiguousarray(np.concatenate(copies), dtype=np.float32)


def fraction_exact(frames, queries, found, sample):
    """Fraction (float) of the first ``sample`` queries whose frame is at the float64 minimum distance."""
    frames64 = frames.astype(np.float64)
    exact = 0
    for query, index in zip(queries[:sample].astype(np.float64), found[:sample]):
        distances = ((frames64 - query) ** 2).sum(axis=1)
        exact += distances[index] <= distances.min()
    return exact / min(sample, len(queries))


def make(backend, frames, threads):
    if backend == "faiss-raw":
        return FaissRaw(frames, threads=threads)
    return search.make_searcher(frames, backend=backend, threads=threads)


def measure_scale(scale, backends, counts, repeats, threads, sample):
    """Rows of results (dicts) for one database scale; entries interleaved within each round.

    The reference is the faster of ``faiss-flat`` with ``threads`` and with 1 thread.
    """
    frames = database_features(scale)
    queries, sources = generate_queries(frames, seed=1, start=0, stop=max(counts.values()))
    entries = [(backend, threads) for backend in backends]
    entries += [(backend, 1) for backend in backends if backend in FAISS_ENTRIES and threads != 1]
    searchers, builds, times, found = {}, {}, {entry: [] for entry in entries}, {}
    for entry in entries:
        start = time.perf_counter()
        searchers[entry] = make(entry[0], frames, entry[1])
        builds[entry] = time.perf_counter() - start
    for _ in range(repeats):
        for entry in entries:
            count = counts[entry[0]]
            if entry[0] in FAISS_ENTRIES:  # faiss's thread count is process-wide: set it each time
                import faiss
                faiss.omp_set_num_threads(entry[1])
            start = time.perf_counter()
            found[entry] = searchers[entry].nearest(queries[:count], sources[:count])
            times[entry].append(count / (time.perf_counter() - start))
    reference = max(statistics.median(times[entry]) for entry in entries if entry[0] == "faiss-flat")
    return [{"frames": len(frames), "scale": scale, "backend": backend, "threads": entry_threads,
             "queries": counts[backend], "queries_per_s": statistics.median(times[(backend, entry_threads)]),
             "runs": times[(backend, entry_threads)],
             "ratio_to_faiss_flat": statistics.median(times[(backend, entry_threads)]) / reference,
             "build_s": builds[(backend, entry_threads)],
             "fraction_exact": fraction_exact(frames, queries, found[(backend, entry_threads)], sample)}
            for backend, entry_threads in entries]


@click.command()
@click.option("--scales", default="1,4,16", show_default=True, help="Database sizes, multiples of 50,000 frames.")
@click.option("--repeats", default=3, show_default=True, help="Rounds per backend (median reported).")
@click.option("--threads", default=2, show_default=True, help="Threads given to every backend.")
@click.option("--queries", "nqueries", default=131072, show_default=True, help="Queries per cells run.")
@click.option("--sample", default=256, show_default=True, help="Queries checked against float64 brute force.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), default=None, help="Write results here.")
def main(scales, repeats, threads, nqueries, sample, json_path):
    """Time every search backend side by side at several database sizes and check exactness."""
    print("command: python " + " ".join(sys.argv))
    rows = []
    for scale in [int(text) for text in scales.split(",")]:
        slow = max(8192, nqueries // (4 * scale))  # fewer queries for the brute forces at large sizes
        counts = {"cells": nqueries, "cells-numpy": nqueries // 2, "faiss-flat": slow, "faiss-raw": slow,
                  "torch": 8192, "balltree": 4096}
        backends = list(counts) if scale == 1 else list(LARGE_SCALE_BACKENDS)
        rows += measure_scale(scale, backends, counts, repeats, threads, sample)
        print_rows([row for row in rows if row["scale"] == scale])
    if scales != "1":
        print("(balltree and torch skipped at larger scales: too slow)")
    if json_path:
        with open(json_path, "w") as handle:
            json.dump({"command": " ".join(sys.argv), "threads": threads, "results": rows}, handle, indent=1)


def print_rows(rows):
    print(f"{'frames':>9} {'backend':<11} {'threads':>7} {'queries':>8} {'queries/s':>11} {'x faiss-flat':>12} "
          f"{'build s':>8} {'exact':>6}")
    for row in rows:
        print(f"{row['frames']:>9,} {row['backend']:<11} {row['threads']:>7} {row['queries']:>8,} "
              f"{row['queries_per_s']:>11,.0f} "
              f"{row['ratio_to_faiss_flat']:>12.2f} {row['build_s']:>8.1f} {row['fraction_exact']:>6.3f}")


if __name__ == "__main__":
    main()
