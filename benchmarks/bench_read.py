"""Is reading features.bin as fast as the disk? Times load_features against a raw sequential read.

Writes a features-shaped file (~1 GB by default), then alternates, cold (page cache dropped for the file
with posix_fadvise) and warm: a raw sequential read of the bytes, and formats.load_features (header
checks, np.fromfile, finiteness check). Prints a table of medians and the ratio.

    python benchmarks/bench_read.py [--gigabytes 1.0] [--repeats 3] [--json FILE] [--folder DIR]
"""
import json
import os
import statistics
import sys
import tempfile
import time

import click
import numpy as np

from motion_matching.toolkit import formats

NFEATURES = 27


def write_features_file(path, nframes, *, seed=0):
    """Write a features.bin of ``nframes`` random rows in 1M-row slabs (bounded memory)."""
    rng = np.random.default_rng(seed)
    with open(path, "wb") as stream:
        np.array([nframes, NFEATURES], np.uint32).tofile(stream)
        for start in range(0, nframes, 1 << 20):
            rng.standard_normal((min(1 << 20, nframes - start), NFEATURES), dtype=np.float32).tofile(stream)
        for vector in (np.zeros(NFEATURES, np.float32), np.ones(NFEATURES, np.float32)):
            np.array([NFEATURES], np.uint32).tofile(stream)
            vector.tofile(stream)


def drop_from_page_cache(path):
    with open(path, "rb") as stream:
        os.fsync(stream.fileno())
        os.posix_fadvise(stream.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)


def raw_read(path):
    buffer = bytearray(16 << 20)
    with open(path, "rb", buffering=0) as stream:
        while stream.readinto(buffer):
            pass


def timed(function, path, *, cold):
    if cold:
        drop_from_page_cache(path)
    start = time.perf_counter()
    function(path)
    return time.perf_counter() - start


@click.command()
@click.option("--gigabytes", default=1.0, show_default=True, help="Size of the features file.")
@click.option("--repeats", default=3, show_default=True, help="Runs per measurement (median reported).")
@click.option("--folder", type=click.Path(file_okay=False), default=None, help="Where to write the file.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), default=None, help="Write results here.")
def main(gigabytes, repeats, folder, json_path):
    """Time reading a ~1 GB features.bin against the disk's sequential read speed."""
    nframes = int(gigabytes * 1e9) // (4 * NFEATURES)
    with tempfile.TemporaryDirectory(dir=folder) as scratch:
        path = os.path.join(scratch, "features.bin")
        write_features_file(path, nframes)
        size = os.path.getsize(path)
        rows = []
        for cold in (True, False):
            times = {"raw sequential read": [], "formats.load_features": []}
            for _ in range(repeats):
                times["raw sequential read"].append(timed(raw_read, path, cold=cold))
                times["formats.load_features"].append(timed(formats.load_features, path, cold=cold))
            for name, values in times.items():
                median = statistics.median(values)
                rows.append({"cache": "cold" if cold else "warm", "reader": name, "seconds": median,
                             "MB/s": size / median / 1e6})
    print(f"command: python {' '.join(sys.argv)}")
    print(f"file: {size / 1e9:.2f} GB, {nframes} frames x {NFEATURES} features, medians of {repeats} runs")
    print(f"{'cache':<6} {'reader':<24} {'seconds':>8} {'MB/s':>8}")
    for row in rows:
        print(f"{row['cache']:<6} {row['reader']:<24} {row['seconds']:8.3f} {row['MB/s']:8.0f}")
    for cache in ("cold", "warm"):
        raw, ours = (row["seconds"] for row in rows if row["cache"] == cache)
        print(f"{cache}: load_features runs at {raw / ours:.2f}x the raw read speed")
    if json_path:
        with open(json_path, "w") as stream:
            json.dump({"bytes": size, "repeats": repeats, "rows": rows}, stream, indent=2)


if __name__ == "__main__":
    main()
