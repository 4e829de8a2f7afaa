"""How fast are the data steps on a toolkit-sized (50,000-frame) database?

Times, as medians of several runs: the synthetic generator, ``features.compute_features``
(vectorised numpy), ``latent.compute_latent`` and writing the three files. Side by side it times a
frame-by-frame loop written like the toolkit's C++ feature builder (forward kinematics per frame
and bone, in Python) on the first ``--loop-frames`` frames, checks it agrees with the vectorised
result, and prints the per-frame speed ratio.

    python benchmarks/bench_features.py [--frames 50000] [--repeats 3] [--loop-frames 200] [--json FILE]
"""
import json
import statistics
import tempfile
import time

import click
import numpy as np

from motion_matching.data import features, generate, latent
from motion_matching.data.synthetic import locomotion as synthetic
from motion_matching.toolkit import quat, skeleton


def loop_raw_features(database, nframes):
    """Raw features (nframes, 27) computed one frame at a time, like the C++ loops."""
    parents = database.bone_parents.tolist()
    result = np.zeros((nframes, 27))
    future = [features.trajectory_indices(database, offset) for offset in features.TRAJECTORY_FRAMES]
    positions = database.bone_positions[:, 0].astype(np.float64)
    rotations = database.bone_rotations[:, 0].astype(np.float64)
    for frame in range(nframes):
        state = _frame_state(database, frame, parents)
        sim_position, _, sim_rotation, _ = state[0]
        row = [quat.inv_mul_vec(sim_rotation, state[bone][0] - sim_position)
               for bone in (skeleton.LEFT_FOOT, skeleton.RIGHT_FOOT)]
        row += [quat.inv_mul_vec(sim_rotation, state[bone][1])
                for bone in (skeleton.LEFT_FOOT, skeleton.RIGHT_FOOT, skeleton.HIPS)]
        row += [quat.inv_mul_vec(sim_rotation, positions[indices[frame]] - sim_position)[[0, 2]] for indices in future]
        row += [quat.inv_mul_vec(sim_rotation, quat.mul_vec(rotations[indices[frame]], [0.0, 0.0, 1.0]))[[0, 2]]
                for indices in future]
        result[frame] = np.concatenate(row)
    return result


def _frame_state(database, frame, parents):
    arrays = [getattr(database, name)[frame].astype(np.float64) for name in
              ("bone_positions", "bone_velocities", "bone_rotations", "bone_angular_velocities")]
    state = {}
    for bone, parent in enumerate(parents):
        local = tuple(array[bone] for array in arrays)
        if parent < 0:
            state[bone] = local
            continue
        position, velocity, rotation, angular = state[parent]
        offset = quat.mul_vec(rotation, local[0])
        state[bone] = (position + offset,
                       velocity + quat.mul_vec(rotation, local[1]) + np.cross(angular, offset),
                       quat.mul(rotation, local[2]), angular + quat.mul_vec(rotation, local[3]))
    return state


def median_seconds(function, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


@click.command()
@click.option("--frames", default=synthetic.DEFAULT_FRAMES, show_default=True, help="Synthetic database size.")
@click.option("--repeats", default=3, show_default=True, help="Runs per measurement (median reported).")
@click.option("--loop-frames", default=200, show_default=True, help="Frames for the frame-by-frame loop.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), default=None, help="Write results here.")
def main(frames, repeats, loop_frames, json_path):
    """Time generation, features, latent and file writing; compare features with a per-frame loop."""
    database = synthetic.generate_synthetic_database(seed=0, nframes=frames)
    loop_frames = min(loop_frames, database.nframes)
    with tempfile.TemporaryDirectory() as scratch:
        steps = {
            "synthetic database": lambda: synthetic.generate_synthetic_database(seed=0, nframes=frames),
            "compute_features (vectorised)": lambda: features.compute_features(database),
            "compute_latent": lambda: latent.compute_latent(database),
            "write_toolkit_files": lambda: generate.write_toolkit_files(scratch, database),
            f"raw features, per-frame loop ({loop_frames} frames)": lambda: loop_raw_features(database, loop_frames),
        }
        rows = [{"step": name, "seconds": median_seconds(step, repeats)} for name, step in steps.items()]
    looped = loop_raw_features(database, loop_frames)
    error = float(np.abs(looped - features.raw_features(database)[:loop_frames]).max())
    vectorised = rows[1]["seconds"] / database.nframes
    loop = rows[-1]["seconds"] / loop_frames
    print(f"{database.nframes} frames, median of {repeats} runs")
    for row in rows:
        print(f"  {row['step']:<44} {row['seconds']:8.3f} s")
    print(f"  per-frame loop / vectorised, per frame:      {loop / vectorised:8.0f} x"
          f"  (max abs difference {error:.1e})")
    if json_path:
        with open(json_path, "w") as stream:
            json.dump({"frames": database.nframes, "repeats": repeats, "rows": rows,
                       "loop_over_vectorised_per_frame": loop / vectorised, "loop_max_abs_difference": error},
                      stream, indent=2)


if __name__ == "__main__":
    main()
