"""Toolkit ``Database`` -> LaFAN1-style BVH files, one per range, that ``bvh.importer`` reads back.

Each range becomes ``range_<index>.bvh``: the 22 LaFAN1 joints (no Simulation bone; the Hips are
written in world space, the simulation bone composed with the Hips' local state), centimetres,
Euler degrees in Zrotation Yrotation Xrotation order, and 30 fps. The 60 fps, 10%-faster frames are
resampled back to the source rate so that import (``int(0.9 (2n - 1))`` frames over n source
frames) lands on the database's own frames: re-importing gives frame j back at frame j.
"""
import os

import numpy as np

from motion_matching.data.bvh.importer import (
    CENTIMETRES,
    LAFAN1_NAMES,
    LAFAN1_PARENTS,
    SOURCE_FPS,
    resampled_length,
    spline_resample,
    unroll,
)
from motion_matching.data.bvh.text import POSITION_CHANNELS, Bvh, write_bvh
from motion_matching.errors import InvalidFile
from motion_matching.toolkit import quat, skeleton

ROTATION_ORDER = ("Zrotation", "Yrotation", "Xrotation")
MIN_RANGE_FRAMES = resampled_length(4)
"""Fewest frames a range needs: those import makes from the 4 source frames it needs at least."""


def write_database_bvh(database, folder, *, ranges=None, decimals=6):
    """Write ranges of ``database`` (all by default, mirrored copies included) as BVH files in ``folder``.

    ``ranges`` is an iterable of range indices. Returns the list of written paths
    (``folder/range_<index:03d>.bvh``); the folder is created if needed.
    """
    folder = os.fspath(folder)
    check_exportable(database, folder)
    nranges = len(database.range_starts)
    indices = range(nranges) if ranges is None else [int(index) for index in ranges]
    for index in indices:
        if not 0 <= index < nranges:
            raise ValueError(f"range {index} does not exist: the database has {nranges} ranges")
    os.makedirs(folder, exist_ok=True)
    written = []
    for index, path in zip(indices, bvh_paths(database, folder, ranges=indices)):
        write_bvh(path, range_to_bvh(database, index, source=folder), decimals=decimals)
        written.append(path)
    return written


def bvh_paths(database, folder, *, ranges=None):
    """The paths (list of str) ``write_database_bvh`` writes for ``ranges`` of ``database`` (all by default)."""
    indices = range(len(database.range_starts)) if ranges is None else ranges
    return [os.path.join(os.fspath(folder), f"range_{int(index):03d}.bvh") for index in indices]


def check_exportable(database, source):
    """Raise ``InvalidFile`` unless ``database`` has the toolkit skeleton and ranges long enough."""
    if tuple(database.bone_parents.tolist()) != skeleton.BONE_PARENTS:
        raise InvalidFile(source, f"database has bone parents {database.bone_parents.tolist()}; BVH export "
                                  "needs the toolkit's 23-bone skeleton")
    lengths = database.range_stops - database.range_starts
    if (lengths < MIN_RANGE_FRAMES).any():
        index = int(np.argmax(lengths < MIN_RANGE_FRAMES))
        raise InvalidFile(source, f"range {index} has {lengths[index]} frames; BVH export needs at least "
                                  f"{MIN_RANGE_FRAMES}")


def source_length(nframes):
    """Most 30 fps source frames n whose import gives at most ``nframes`` frames; returns an int."""
    nsource = int((nframes + 0.9) / 1.8) + 1
    while resampled_length(nsource) > nframes:
        nsource -= 1
    return nsource


def range_to_bvh(database, index, *, source="<database>"):
    """A LaFAN1-style ``Bvh`` (centimetres, degrees, 30 fps) of range ``index`` of ``database``.

    Bone lengths (OFFSETs) are each bone's mean local position over the range; the Hips OFFSET is
    zero so readers that add it to the position channels and readers that ignore it agree.
    """
    start, stop = int(database.range_starts[index]), int(database.range_stops[index])
    positions = database.bone_positions[start:stop].astype(np.float64)
    rotations = quat.normalize(database.bone_rotations[start:stop].astype(np.float64))
    hips = skeleton.HIPS
    hips_rotation = quat.mul(rotations[:, 0], rotations[:, hips])
    hips_position = quat.mul_vec(rotations[:, 0], positions[:, hips]) + positions[:, 0]
    joint_rotations = np.concatenate([hips_rotation[:, None], rotations[:, hips + 1:]], axis=1)
    hips_position, joint_rotations = to_source_rate(hips_position, joint_rotations)
    euler = np.degrees(quat.to_euler_zyx(joint_rotations))
    motion = np.concatenate([hips_position / CENTIMETRES, euler.reshape(len(euler), -1)], axis=1)
    offsets = positions[:, hips:].mean(axis=0) / CENTIMETRES
    offsets[0] = 0.0
    leaves = [joint for joint in range(len(LAFAN1_NAMES)) if joint not in LAFAN1_PARENTS]
    return Bvh(names=list(LAFAN1_NAMES), parents=np.array(LAFAN1_PARENTS), offsets=offsets,
               channels=[POSITION_CHANNELS + ROTATION_ORDER] + [ROTATION_ORDER] * (len(LAFAN1_NAMES) - 1),
               frame_time=1.0 / SOURCE_FPS, motion=motion, end_sites={joint: np.zeros(3) for joint in leaves})


def to_source_rate(positions, rotations):
    """Resample 60 fps frames (F, 3) and (F, J, 4) to the n 30 fps frames import turns back into them.

    Source frame k holds database frame ``k (m - 1) / (n - 1)`` where m = resampled_length(n) <= F,
    by ``spline_resample`` (rotations unrolled first). Returns (n, 3), (n, J, 4).
    """
    nsource = source_length(len(positions))
    return spline_resample(positions, unroll(rotations), np.linspace(0.0, resampled_length(nsource) - 1.0, nsource))
