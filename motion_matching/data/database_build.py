"""Build a toolkit ``Database`` from clips of local bone states, like the toolkit's generate_database.py.

Each clip becomes one range; mirrored copies are appended after the originals; velocities and
angular velocities come from central differences within each range; toe contacts from toe speed.
"""
import numpy as np

from motion_matching.errors import InvalidFile
from motion_matching.toolkit import quat, skeleton
from motion_matching.toolkit.formats import Database

CONTACT_SPEED = 0.15
"""Toe speed (metres/second) under which a toe counts as planted, as in the toolkit."""
CONTACT_WINDOW = 6
"""Frames in the majority filter that removes short contact flickers (the toolkit's median filter size)."""


def build_database(clips, *, mirror=True, fps=60, names=None):
    """Database from ``clips``, a list of (local_positions (F,B,3) metres, local_rotations (F,B,4) w x y z).

    Bones are in skeleton.py order; bone 0, the simulation bone, is in world space. With ``mirror``
    the mirrored copy of every clip is appended (ranges: originals, then mirrors, same order).
    ``names`` (one per clip, e.g. file names) label errors. Returns a ``formats.Database`` with
    float32 arrays, int32 parents and ranges, and uint8 contacts (F, 2) for LeftToe and RightToe.
    """
    names = list(names) if names is not None else [f"clip {index}" for index in range(len(clips))]
    if not clips:
        raise InvalidFile("<clips>", "no clips to build a database from")
    checked = [_checked_clip(clip, name) for clip, name in zip(clips, names)]
    if mirror:
        checked += [mirror_clip(positions, rotations) for positions, rotations in checked]
    parts = [_clip_arrays(positions, rotations, fps) for positions, rotations in checked]
    lengths = np.array([len(positions) for positions, _ in checked], dtype=np.int64)
    stops = np.cumsum(lengths)
    columns = [np.concatenate([part[index] for part in parts]) for index in range(5)]
    return Database(
        bone_positions=columns[0].astype(np.float32),
        bone_velocities=columns[1].astype(np.float32),
        bone_rotations=columns[2].astype(np.float32),
        bone_angular_velocities=columns[3].astype(np.float32),
        bone_parents=np.array(skeleton.BONE_PARENTS, dtype=np.int32),
        range_starts=(stops - lengths).astype(np.int32),
        range_stops=stops.astype(np.int32),
        contact_states=columns[4].astype(np.uint8),
    )


def _checked_clip(clip, name):
    positions, rotations = (np.asarray(array, dtype=np.float64) for array in clip)
    nbones = len(skeleton.BONE_NAMES)
    if positions.ndim != 3 or positions.shape[1:] != (nbones, 3):
        raise InvalidFile(name, f"positions have shape {positions.shape}, expected (frames, {nbones}, 3)")
    if rotations.shape != positions.shape[:2] + (4,):
        raise InvalidFile(name, f"rotations have shape {rotations.shape}, expected {positions.shape[:2] + (4,)}")
    if positions.shape[0] < 2:
        raise InvalidFile(name, f"clip has {positions.shape[0]} frame(s); at least 2 are needed for velocities")
    if not (np.isfinite(positions).all() and np.isfinite(rotations).all()):
        raise InvalidFile(name, "clip contains NaN or Inf values")
    return positions, quat.normalize(rotations)


def mirror_clip(positions, rotations):
    """Mirror local bone states across the x=0 plane; returns (positions (F,B,3), rotations (F,B,4)).

    Left and right bones swap (skeleton.MIRROR_INDICES), positions negate x and quaternions map
    (w, x, y, z) to (w, x, -y, -z), the reflection M R M with M = diag(-1, 1, 1).
    """
    order = np.array(skeleton.MIRROR_INDICES)
    mirrored_positions = positions[:, order] * np.array([-1.0, 1.0, 1.0])
    mirrored_rotations = rotations[:, order] * np.array([1.0, 1.0, -1.0, -1.0])
    return mirrored_positions, mirrored_rotations


def range_world_positions(database, index):
    """World positions (frames, B, 3) float64, metres, of range ``index`` of a ``formats.Database``."""
    start, stop = database.range_starts[index], database.range_stops[index]
    positions, _ = quat.forward_kinematics(database.bone_positions[start:stop].astype(np.float64),
                                           database.bone_rotations[start:stop].astype(np.float64),
                                           skeleton.BONE_PARENTS)
    return positions


def _clip_arrays(positions, rotations, fps):
    velocities = central_differences(positions, fps=fps)
    angular = angular_velocities(rotations, fps=fps)
    global_positions, _ = quat.forward_kinematics(positions, rotations, skeleton.BONE_PARENTS)
    contacts = contact_states(global_positions[:, list(skeleton.CONTACT_BONES)], fps=fps)
    return positions, velocities, rotations, angular, contacts


def _extrapolate_ends(values, rates):
    """Fill the first and last frame of ``rates`` (F, ...) in place, as the toolkit does."""
    if len(values) >= 4:
        rates[0] = rates[1] - (rates[3] - rates[2])
        rates[-1] = rates[-2] + (rates[-2] - rates[-3])
    elif len(values) == 3:
        rates[0] = rates[1]
        rates[-1] = rates[1]
    return rates


def central_differences(values, *, fps=60):
    """Per-second rates (F, ...) of ``values`` (F, ...) by central differences; ends extrapolated."""
    rates = np.zeros_like(values)
    if len(values) == 2:
        rates[:] = (values[1] - values[0]) * fps
        return rates
    rates[1:-1] = (values[2:] - values[:-2]) * (0.5 * fps)
    return _extrapolate_ends(values, rates)


def angular_velocities(rotations, *, fps=60):
    """Angular velocities (F, B, 3) radians/second, in the parent's frame, from rotations (F, B, 4)."""
    def step(later, earlier):
        return quat.to_scaled_angle_axis(quat.abs(quat.mul_inv(later, earlier))) * fps

    rates = np.zeros(rotations.shape[:-1] + (3,))
    if len(rotations) == 2:
        rates[:] = step(rotations[1], rotations[0])
        return rates
    rates[1:-1] = 0.5 * (step(rotations[2:], rotations[1:-1]) + step(rotations[1:-1], rotations[:-2]))
    return _extrapolate_ends(rotations, rates)


def contact_states(toe_positions, *, fps=60, threshold=CONTACT_SPEED, window=CONTACT_WINDOW):
    """Contacts (F, C) bool from world toe positions (F, C, 3): speed below ``threshold``, majority-filtered.

    Speed is the backward difference (the first frame copies the second). The filter keeps a frame
    in contact when at least half of the ``window`` frames around it are (edges repeat the end frames).
    """
    speed = np.linalg.norm(np.diff(toe_positions, axis=0), axis=-1) * fps
    speed = np.concatenate([speed[:1], speed], axis=0)
    return majority_filter(speed < threshold, window=window)


def majority_filter(states, *, window=CONTACT_WINDOW):
    """Filter booleans (F, C) along frames: True where >= half of frames i-w//2 .. i+(w-1)//2 are True."""
    before, after = window // 2, (window - 1) // 2
    padded = np.concatenate([np.repeat(states[:1], before, axis=0), states,
                             np.repeat(states[-1:], after, axis=0)], axis=0).astype(np.int64)
    totals = np.concatenate([np.zeros((1,) + states.shape[1:], np.int64), np.cumsum(padded, axis=0)])
    counts = totals[window:] - totals[:-window]
    return counts * 2 >= window
