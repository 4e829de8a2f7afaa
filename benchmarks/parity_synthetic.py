"""Online and offline training on the synthetic database are the same run: same held-out loss, same bytes.

Generates the synthetic locomotion database, builds the exact-neighbour cache of the training query
stream (one cached query per training sample, default backend), then trains the toolkit's projector
twice with the same settings, neighbours from BallTree searches (online) and from the cache
(offline), and prints both held-out losses (fresh queries, seed 271828), whether the two projector.bin
files are byte-identical, and each run's time.

    python benchmarks/parity_synthetic.py [--frames 50000] [--iterations 2000] [--batch-size 32] [--json FILE]
"""
import json
import os
import sys
import tempfile
import time

import click

from motion_matching.cache.build import build_cache
from motion_matching.data import generate
from motion_matching.projector.config import TrainConfig
from motion_matching.projector.train import train_projector


def run(config, files, out_dir, *, offline_cache=None):
    """Train into ``out_dir``; returns (TrainResult, wall seconds)."""
    started = time.perf_counter()
    result = train_projector(config, features_path=files["features"], latent_path=files["latent"],
                             database_path=files["database"], offline_cache=offline_cache, out_dir=out_dir)
    return result, time.perf_counter() - started


@click.command()
@click.option("--frames", default=50_000, show_default=True, help="Frames of the synthetic database.")
@click.option("--iterations", default=2_000, show_default=True, help="Training iterations of each run.")
@click.option("--batch-size", default=32, show_default=True)
@click.option("--json", "json_path", type=click.Path(dir_okay=False), default=None, help="Write results here.")
def main(frames, iterations, batch_size, json_path):
    """Train online and offline on the synthetic database and compare the two runs."""
    config = TrainConfig(iterations=iterations, batch_size=batch_size, checkpoint_every=iterations)
    with tempfile.TemporaryDirectory() as scratch:
        files = generate.generate_files(scratch, nframes=frames)
        cache_path = os.path.join(scratch, "projector_cache.h5")
        started = time.perf_counter()
        build_cache(files["features"], out=cache_path, nqueries=iterations * batch_size, seed=config.seed)
        cache_seconds = time.perf_counter() - started
        online, online_seconds = run(config, files, os.path.join(scratch, "online"))
        offline, offline_seconds = run(config, files, os.path.join(scratch, "offline"), offline_cache=cache_path)
        with open(online.network_path, "rb") as a, open(offline.network_path, "rb") as b:
            identical = a.read() == b.read()
    rows = [("online (BallTree)", online, online_seconds), ("offline (cache)", offline, offline_seconds)]
    print(f"command: python {' '.join(sys.argv)}")
    print(f"synthetic database: {frames} frames; {iterations} iterations at batch {batch_size}; "
          f"cache of {iterations * batch_size} queries built in {cache_seconds:.1f} s")
    print(f"{'run':<18} {'held-out loss':>14} {'xval':>8} {'zval':>8} {'dist':>8} {'seconds':>8}")
    for name, result, seconds in rows:
        h = result.held_out
        print(f"{name:<18} {h['loss']:14.6f} {h['xval']:8.5f} {h['zval']:8.5f} {h['dist']:8.5f} {seconds:8.1f}")
    print(f"projector.bin byte-identical: {identical}")
    if json_path:
        with open(json_path, "w") as stream:
            json.dump({"frames": frames, "iterations": iterations, "batch_size": batch_size,
                       "cache_seconds": cache_seconds, "identical_projector_bin": identical,
                       "runs": [{"run": name, "held_out": result.held_out, "seconds": seconds}
                                for name, result, seconds in rows]}, stream, indent=2)


if __name__ == "__main__":
    main()
