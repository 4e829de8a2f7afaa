"""Does a build killed at random moments (SIGKILL, mid-write included) always resume to the same cache?

Builds a reference cache without interruption, then runs ``mm-projector build-cache`` in a subprocess
and kills it with SIGKILL after a random delay, again and again, until one run completes. Checks that
the result holds exactly the reference's rows and attributes, and counts the resumes and any
"starting over" (a partial file the kill left unreadable). POSIX only.

    python benchmarks/kill_cache_build.py [--frames 2000] [--queries 1048576] [--chunk-rows 32768]
                                          [--trials 3] [--seed 0] [--json FILE]
"""
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time

import click
import h5py
import numpy as np

from motion_matching import cache
from motion_matching.toolkit import formats

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_cache import synthetic_features  # noqa: E402


def rows_and_attributes(path):
    with h5py.File(path, "r") as handle:
        attributes = {k: np.asarray(v).tolist() for k, v in handle.attrs.items() if k != "created"}
        return attributes, handle["queries"][:], handle["nearest"][:]


def same(a, b):
    return a[0] == b[0] and np.array_equal(a[1], b[1]) and np.array_equal(a[2], b[2])


def killed_build(arguments, delays):
    """Run the build, killing it after each delay in turn until it finishes; returns (kills, restarts, runs)."""
    kills = restarts = runs = 0
    while True:
        runs += 1
        child = subprocess.Popen(arguments, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
        try:
            child.wait(timeout=next(delays))
        except subprocess.TimeoutExpired:
            child.send_signal(signal.SIGKILL)
            kills += 1
        child.wait()
        restarts += "starting over" in child.stderr.read()
        if child.returncode == 0:
            return kills, restarts, runs
        if child.returncode != -signal.SIGKILL:
            raise RuntimeError(f"build failed with exit code {child.returncode}")


@click.command()
@click.option("--frames", default=2000, show_default=True)
@click.option("--queries", "nqueries", default=1 << 20, show_default=True)
@click.option("--chunk-rows", default=32768, show_default=True)
@click.option("--backend", default="faiss-flat", show_default=True)
@click.option("--trials", default=3, show_default=True)
@click.option("--seed", default=0, show_default=True, help="Seed of the random kill delays.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), default=None)
def main(frames, nqueries, chunk_rows, backend, trials, seed, json_path):
    """Kill builds at random moments; check every resumed result against an uninterrupted build."""
    rng = random.Random(seed)
    results = []
    with tempfile.TemporaryDirectory() as folder:
        features_path = os.path.join(folder, "features.bin")
        features = synthetic_features(frames)
        zeros = np.zeros(features.shape[1], np.float32)
        formats.save_features(features_path, formats.Features(features, zeros, zeros + 1))
        started = time.perf_counter()
        reference_path = os.path.join(folder, "reference.h5")
        cache.build_cache(features_path, out=reference_path, nqueries=nqueries, seed=5, backend=backend,
                          chunk_rows=chunk_rows)
        full = time.perf_counter() - started
        reference = rows_and_attributes(reference_path)
        for trial in range(trials):
            out = os.path.join(folder, f"trial{trial}.h5")
            arguments = [sys.executable, "-c", "from motion_matching.cli import main; main()", "build-cache",
                         "--features", features_path, "--out", out, "--queries", str(nqueries), "--seed", "5",
                         "--backend", backend,
                         "--chunk-rows", str(chunk_rows), "--quiet"]
            delays = iter(lambda: rng.uniform(0.3, max(0.6, full / 3)), None)
            kills, restarts, runs = killed_build(arguments, delays)
            results.append({"kills": kills, "restarts": restarts, "runs": runs,
                            "identical": same(rows_and_attributes(out), reference)})
            click.echo(f"trial {trial}: {kills} SIGKILLs, {restarts} starts over, identical to the reference: "
                       f"{results[-1]['identical']}")
    click.echo(f"uninterrupted build: {full:.2f} s for {nqueries:,} queries")
    if json_path:
        with open(json_path, "w", encoding="utf-8") as stream:
            json.dump({"frames": frames, "queries": nqueries, "chunk_rows": chunk_rows, "backend": backend,
                       "uninterrupted_seconds": full, "trials": results}, stream, indent=2)


if __name__ == "__main__":
    main()
