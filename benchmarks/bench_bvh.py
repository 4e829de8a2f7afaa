"""How long do BVH read, import and export take on a LaFAN1-sized clip, and what does strictness cost?

Writes one LaFAN1-style clip (7,840 frames at 30 fps x 69 channels by default, the size of
walk1_subject5.bvh) exported from smooth procedural motion, then alternates: an unchecked
``np.loadtxt`` of the motion block (the floor for turning the text into numbers), the strict
``bvh.read_bvh``, the whole ``bvh_import.database_from_bvh_files`` (parse, resample, simulation
bone, mirror, velocities, contacts) and ``bvh_export.write_database_bvh`` of the imported range.
Prints medians and the strict/unchecked ratio.

    python benchmarks/bench_bvh.py [--frames 7840] [--repeats 3] [--json FILE]
"""
import json
import os
import statistics
import sys
import tempfile
import time

import click
import numpy as np

from motion_matching.data import database_build
from motion_matching.data.bvh import exporter as bvh_export
from motion_matching.data.bvh import importer as bvh_import
from motion_matching.data.bvh import text as bvh
from motion_matching.toolkit import quat, skeleton


def procedural_clip(nframes, *, seed=0):
    """build_database inputs (positions (F, 23, 3) m, rotations (F, 23, 4)) of smooth swinging joints."""
    rng = np.random.default_rng(seed)
    nbones = len(skeleton.BONE_NAMES)
    time_ = np.arange(nframes)[:, None] / 60.0
    positions = np.tile(rng.uniform(-0.15, 0.15, (1, nbones, 3)), (nframes, 1, 1))
    positions[:, 0] = np.concatenate([0.8 * np.sin(0.3 * time_), 0 * time_, 1.3 * np.sin(0.1 * time_)], axis=1)
    positions[:, 1, 1] = 0.9
    phases = rng.uniform(0, 6, (1, nbones, 3))
    rotations = quat.from_euler(0.4 * np.sin(time_[:, :, None] * rng.uniform(1, 4, (1, nbones, 3)) + phases))
    return positions, rotations


def write_clip(folder, nsource):
    """Write a LaFAN1-style clip of ``nsource`` 30 fps frames into ``folder``; returns its path."""
    database = database_build.build_database([procedural_clip(bvh_import.resampled_length(nsource))],
                                             mirror=False)
    path = bvh_export.write_database_bvh(database, folder)[0]
    assert bvh.read_bvh(path).nframes == nsource
    return path


def unchecked_read(path):
    with open(path) as stream:
        skip = next(number for number, line in enumerate(stream, 1) if line.startswith("Frame Time"))
    return np.loadtxt(path, skiprows=skip)


def timed(function, *args):
    start = time.perf_counter()
    function(*args)
    return time.perf_counter() - start


@click.command()
@click.option("--frames", default=7840, show_default=True, help="Source (30 fps) frames in the clip.")
@click.option("--repeats", default=3, show_default=True, help="Runs per measurement (median reported).")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), default=None, help="Write results here.")
def main(frames, repeats, json_path):
    """Time reading, importing and exporting one LaFAN1-sized BVH clip."""
    with tempfile.TemporaryDirectory() as scratch:
        path = write_clip(os.path.join(scratch, "in"), frames)
        database = bvh_import.database_from_bvh_files([path])
        steps = {
            "np.loadtxt (unchecked)": lambda: unchecked_read(path),
            "bvh.read_bvh (strict)": lambda: bvh.read_bvh(path),
            "database_from_bvh_files": lambda: bvh_import.database_from_bvh_files([path]),
            "write_database_bvh (1 range)": lambda: bvh_export.write_database_bvh(
                database, os.path.join(scratch, "out"), ranges=[0]),
        }
        times = {name: [] for name in steps}
        for _ in range(repeats):
            for name, step in steps.items():
                times[name].append(timed(step))
        size = os.path.getsize(path)
    rows = [{"step": name, "seconds": statistics.median(values)} for name, values in times.items()]
    print(f"command: python {' '.join(sys.argv)}")
    print(f"clip: {frames} frames x 69 channels, {size / 1e6:.1f} MB, medians of {repeats} runs")
    print(f"{'step':<30} {'seconds':>8}")
    for row in rows:
        print(f"{row['step']:<30} {row['seconds']:8.3f}")
    print(f"strict read / unchecked loadtxt: {rows[1]['seconds'] / rows[0]['seconds']:.2f}x")
    if json_path:
        with open(json_path, "w") as stream:
            json.dump({"frames": frames, "bytes": size, "repeats": repeats, "rows": rows}, stream, indent=2)


if __name__ == "__main__":
    main()
