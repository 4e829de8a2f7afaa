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
"""
import dataclasses

import numpy as np

from motion_matching.errors import InvalidFile
from motion_matching.toolkit import quat, skeleton
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
    """Unnormalised matching features (F, 27) float64: metres, metres/second and unit directions."""
    _check_database(database, source)
    parents = [int(parent) for parent in database.bone_parents]
    chain = _ancestors((skeleton.LEFT_FOOT, skeleton.RIGHT_FOOT, skeleton.HIPS), parents)
    # Only the bones on the feet's and hips' chains, renumbered, so float64 copies stay small.
    arrays = [np.asarray(getattr(database, name)[:, chain], dtype=np.float64) for name in
              ("bone_positions", "bone_velocities", "bone_rotations", "bone_angular_velocities")]
    chain_parents = [chain.index(parents[bone]) if parents[bone] >= 0 else -1 for bone in chain]
    bones = [chain.index(bone) for bone in (skeleton.LEFT_FOOT, skeleton.RIGHT_FOOT, skeleton.HIPS)]
    positions, velocities, _, _ = quat.forward_kinematics_velocities(*arrays, chain_parents, bones=bones)
    sim_position = arrays[0][:, chain.index(skeleton.SIMULATION)]
    sim_rotation = arrays[2][:, chain.index(skeleton.SIMULATION)]
    columns = [quat.inv_mul_vec(sim_rotation, positions[:, index] - sim_position) for index in (0, 1)]
    columns += [quat.inv_mul_vec(sim_rotation, velocities[:, index]) for index in (0, 1, 2)]
    future = [trajectory_indices(database, offset) for offset in TRAJECTORY_FRAMES]
    forward = np.array([0.0, 0.0, 1.0])
    for values in (lambda t: sim_position[t] - sim_position,
                   lambda t: quat.mul_vec(sim_rotation[t], forward)):
        for frames in future:
            columns.append(quat.inv_mul_vec(sim_rotation, values(frames))[:, [0, 2]])
    return np.concatenate(columns, axis=1)


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

    Raises ``InvalidFile`` naming ``source`` when a group is constant (its scale would be zero).
    """
    check_weights(weights)
    raw = np.asarray(raw, dtype=np.float64)
    offset = raw.mean(axis=0)
    scale = np.empty_like(offset)
    for name, first, width in GROUPS:
        columns = slice(first, first + width)
        std = np.sqrt(np.mean((raw[:, columns] - offset[columns]) ** 2, axis=0)).mean()
        scale[columns] = std / getattr(weights, name)
    if not (scale > 0).all():
        dead = sorted({name for name, first, width in GROUPS if not scale[first] > 0})
        raise InvalidFile(source, f"feature group(s) {', '.join(dead)} do not vary over the database")
    features = (raw - offset) / scale
    return Features(features.astype(np.float32), offset.astype(np.float32), scale.astype(np.float32))


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
