"""How close does a database come back from BVH export and re-import? World-space distances per bone.

For each database (smooth procedural motion; the synthetic generator; the LaFAN1 reference
database when ../shared/fixtures is beside the project), writes every range as BVH, imports the
files again and compares world (forward-kinematics) positions frame by frame, every bone but the
simulation bone (which import re-derives from Spine2 and the Hips). Prints a table in millimetres.

    python benchmarks/bvh_round_trip.py [--json FILE]
"""
import json
import os
import sys
import tempfile

import click
import numpy as np
from bench_bvh import procedural_clip

from motion_matching.data import database_build
from motion_matching.data.bvh import exporter as bvh_export
from motion_matching.data.bvh import importer as bvh_import
from motion_matching.data.synthetic import locomotion as synthetic
from motion_matching.toolkit import formats, skeleton

LAFAN1 = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "fixtures", "reference-features",
                      "database.bin")
FEET = [skeleton.LEFT_FOOT, skeleton.RIGHT_FOOT, skeleton.LEFT_TOE, skeleton.RIGHT_TOE]


def round_trip_distances(database):
    """World distances (frames, 23) metres between each range and its re-import (bone 0 zero-filled)."""
    with tempfile.TemporaryDirectory() as folder:
        again = bvh_import.database_from_bvh_files(bvh_export.write_database_bvh(database, folder))
    distances = []
    for index in range(len(database.range_starts)):
        before = database_build.range_world_positions(database, index)
        after = database_build.range_world_positions(again, index)
        distances.append(np.linalg.norm(before[:len(after)] - after, axis=-1))
    distances = np.concatenate(distances)
    distances[:, 0] = 0.0
    return distances


def databases():
    yield "smooth procedural", database_build.build_database([procedural_clip(240, seed=1),
                                                              procedural_clip(150, seed=2)])
    yield "synthetic seed 0, 1200 frames", synthetic.generate_synthetic_database(seed=0, nframes=1200)
    if os.path.exists(LAFAN1):
        yield "LaFAN1 reference database", formats.load_database(LAFAN1)


@click.command()
@click.option("--json", "json_path", type=click.Path(dir_okay=False), default=None, help="Write results here.")
def main(json_path):
    """Measure world-space error of BVH export followed by import."""
    rows = []
    for name, database in databases():
        distances = round_trip_distances(database) * 1000.0
        feet = distances[:, FEET]
        rows.append({"database": name, "frames": len(distances),
                     "hips_max_mm": float(distances[:, skeleton.HIPS].max()), "feet_max_mm": float(feet.max()),
                     "feet_p99_mm": float(np.percentile(feet, 99)), "feet_median_mm": float(np.median(feet)),
                     "all_bones_max_mm": float(distances.max())})
    print(f"command: python {' '.join(sys.argv)}")
    print(f"{'database':<32} {'frames':>6} {'hips max':>9} {'feet max':>9} {'feet p99':>9} {'feet med':>9}  (mm)")
    for row in rows:
        print(f"{row['database']:<32} {row['frames']:6d} {row['hips_max_mm']:9.3f} {row['feet_max_mm']:9.3f} "
              f"{row['feet_p99_mm']:9.3f} {row['feet_median_mm']:9.3f}")
    if json_path:
        with open(json_path, "w") as stream:
            json.dump({"rows": rows}, stream, indent=2)


if __name__ == "__main__":
    main()
