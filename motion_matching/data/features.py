"""Matching features computed like the toolkit's C++ feature builder (``database_build_matching_features``).

27 columns, in order, each group normalised on its own:

====================  =======  ==========================================================
group                 columns  value (in the simulation bone's frame at the current frame)
====================  =======  ==========================================================
left foot position    0-2      LeftFoot world position minus simulation position, unrotated
right foot position   3-5      RightFoot, likewise
left foot velocity    6-8      LeftFoot world velocity (forward kinematics with angular velocity)
right foot velocity   9-11     RightFoot, likewise
hip velocity          12-14    Hips, likewise
trajectory positions  15-20    (x, z) of the simulation position at +20, +40, +60 frames
trajectory directions 21-26    (x, z) of the simulation direction (its rotation applied to +z)
====================  =======  ==========================================================

Future frames are clamped to the last frame of the current frame's range. A group's offset is its
per-column mean; its scale is the average of its per-column population standard deviations divided
by the group's weight, so ``features = (raw - offset) / scale``.

Everything is float32 in the C++'s order of operations (``float32_kinematics``, ``normalise``), so
features.bin is the C++ builder's byte for byte.
"""
import dataclasses

import numpy as np

from motion_matching.data import float32_kinematics as f32
from motion_matching.errors import InvalidFile
from motion_matching.toolkit import skeleton
from motion_matching.toolkit.formats import Database, Features

TRAJECTORY_FRAMES = (20, 40, 60)
"""Look-ahead of the trajectory features in frames (1/3, 2/3 and 1 second at 60 fps)."""


@dataclasses.dataclass(frozen=True)
class FeatureWeights:
    """Weight of each feature group: a larger weight gives the group more say in the nearest-neighbour search."""

    foot_position: float = 0.75
    foot_velocity: float = 1.0
    hip_velocity: float = 1.0
    trajectory_positions: float = 1.0
    trajectory_directions: float = 1.5


DEFAULT_WEIGHTS = FeatureWeights()

FEATURE_NAMES = tuple(
    [f"left_foot_position_{a}" for a in "xyz"] + [f"right_foot_position_{a}" for a in "xyz"]
    + [f"left_foot_velocity_{a}" for a in "xyz"] + [f"right_foot_velocity_{a}" for a in "xyz"]
    + [f"hip_velocity_{a}" for a in "xyz"]
    + [f"trajectory_position_{t}_{a}" for t in TRAJECTORY_FRAMES for a in "xz"]
    + [f"trajectory_direction_{t}_{a}" for t in TRAJECTORY_FRAMES for a in "xz"])
"""Name of each of the 27 columns."""

GROUPS = (("foot_position", 0, 3), ("foot_position", 3, 3), ("foot_velocity", 6, 3),
          ("foot_velocity", 9, 3), ("hip_velocity", 12, 3), ("trajectory_positions", 15, 6),
          ("trajectory_directions", 21, 6))
"""(weight name, first column, width) of each group normalised on its own, in the toolkit's order."""


def raw_features(database, *, source="<database>"):
    """Unnormalised matching features (F, 27) float32: metres, metres/second and unit directions.

    Bit for bit the C++ builder's values: float32 throughout, in its order of operations.
    """
    _check_database(database, source)
    parents = [int(parent) for parent in database.bone_parents]
    chain = _ancestors((skeleton.LEFT_FOOT, skeleton.RIGHT_FOOT, skeleton.HIPS), parents)
    local = [{bone: f32.components(getattr(database, name)[:, bone]) for bone in chain} for name in
             ("bone_positions", "bone_velocities", "bone_rotations", "bone_angular_velocities")]
    world = {bone: f32.forward_kinematics_velocity(*local, parents, bone)
             for bone in (skeleton.LEFT_FOOT, skeleton.RIGHT_FOOT, skeleton.HIPS)}
    sim_position = local[0][skeleton.SIMULATION]
    sim_rotation = local[2][skeleton.SIMULATION]
    inverse = f32.quat_inv(sim_rotation)
    columns = []
    for bone in (skeleton.LEFT_FOOT, skeleton.RIGHT_FOOT):
        columns += f32.quat_mul_vec3(inverse, f32.sub(world[bone][0], sim_position))
    for bone in (skeleton.LEFT_FOOT, skeleton.RIGHT_FOOT, skeleton.HIPS):
        columns += f32.quat_mul_vec3(inverse, world[bone][1])
    future = [trajectory_indices(database, offset) for offset in TRAJECTORY_FRAMES]
    for frames in future:
        ahead = tuple(component[frames] for component in sim_position)
        columns += f32.quat_mul_vec3(inverse, f32.sub(ahead, sim_position))[::2]
    zeros = np.zeros(database.nframes, dtype=np.float32)
    forward = (zeros, zeros, np.ones_like(zeros))
    for frames in future:
        ahead = tuple(component[frames] for component in sim_rotation)
        columns += f32.quat_mul_vec3(inverse, f32.quat_mul_vec3(ahead, forward))[::2]
    return np.stack(columns, axis=1)


def trajectory_indices(database, offset):
    """Frame ``i + offset`` for every frame i, clamped to the last frame of i's range; (F,) int64."""
    starts = np.asarray(database.range_starts, dtype=np.int64)
    stops = np.asarray(database.range_stops, dtype=np.int64)
    frames = np.arange(database.nframes)
    lengths = stops - starts
    last = np.repeat(stops - 1, lengths)
    return np.minimum(frames + offset, last)


def normalise(raw, *, weights=DEFAULT_WEIGHTS, source="<database>"):
    """Normalise raw features (F, 27) group by group; returns ``Features`` (float32 arrays).

    In float32 like the C++ (``normalize_feature``): each mean and variance summed frame after
    frame, ``raw / F`` and ``(raw - offset)**2 / F`` term by term; a group's std is the running
    sum of ``sqrt(variance) / width`` over its columns, its scale ``std / weight``.
    Raises ``InvalidFile`` naming ``source`` when a group is constant (its scale would be zero).
    """
    check_weights(weights)
    raw = np.asarray(raw, dtype=np.float32)
    rows = np.float32(len(raw))
    offset = sequential_sum(raw / rows)
    variance = sequential_sum(np.square(raw - offset) / rows)
    scale = np.empty_like(offset)
    for name, first, width in GROUPS:
        std = np.float32(0.0)
        for column in range(first, first + width):
            std = std + np.sqrt(variance[column]) / np.float32(width)
        scale[first:first + width] = std / np.float32(getattr(weights, name))
    # A constant column's float32 mean need not be its value exactly: test the raw values themselves.
    varies = (raw != raw[:1]).any(axis=0)
    dead = sorted({name for name, first, width in GROUPS
                   if not (scale[first] > 0 and varies[first:first + width].any())})
    if dead:
        raise InvalidFile(source, f"feature group(s) {', '.join(dead)} do not vary over the database")
    return Features((raw - offset) / scale, offset, scale)


def sequential_sum(values):
    """Column sums of ``values`` (F, N) in float32, added frame after frame like a C loop; (N,).

    ``np.cumsum`` adds in order by definition; ``np.sum``'s order depends on the memory layout
    (pairwise along a contiguous axis), and each order rounds differently.
    """
    if len(values) == 0:
        return np.zeros(values.shape[1:], dtype=np.float32)
    return np.cumsum(values, axis=0, dtype=np.float32)[-1]


def compute_features(database, *, weights=DEFAULT_WEIGHTS, source="<database>"):
    """Normalised matching features of ``database``; returns ``formats.Features`` with (F, 27) float32.

    ``source`` (e.g. the database's path) names the data in errors.
    """
    return normalise(raw_features(database, source=source), weights=weights, source=source)


def check_weights(weights):
    """Raise ``ValueError`` unless every group weight is a finite number above zero."""
    for field in dataclasses.fields(FeatureWeights):
        value = getattr(weights, field.name)
        if not (np.isfinite(value) and value > 0):
            raise ValueError(f"weight {field.name} must be a finite number above zero, got {value}")


def parse_weights(text):
    """``FeatureWeights`` from five comma-separated numbers in GROUP order (see ``FeatureWeights``)."""
    names = [field.name for field in dataclasses.fields(FeatureWeights)]
    try:
        values = [float(part) for part in text.split(",")]
    except ValueError:
        values = []
    if len(values) != len(names):
        raise ValueError(f"expected {len(names)} comma-separated numbers ({', '.join(names)}), got {text!r}")
    weights = FeatureWeights(*values)
    check_weights(weights)
    return weights


def _ancestors(bones, parents):
    """Sorted list of ``bones`` and all their ancestors (parents precede children)."""
    found = set()
    for bone in bones:
        while bone >= 0:
            found.add(bone)
            bone = parents[bone]
    return sorted(found)


def _check_database(database, source):
    if not isinstance(database, Database):
        raise TypeError(f"expected a formats.Database, got {type(database).__name__}")
    if database.nbones != len(skeleton.BONE_NAMES):
        raise InvalidFile(source, f"has {database.nbones} bones; features need the toolkit's "
                                        f"{len(skeleton.BONE_NAMES)}-bone skeleton")
