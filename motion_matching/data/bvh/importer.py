"""LaFAN1-style BVH clips -> toolkit ``Database``, following the toolkit's resources/generate_database.py.

Per clip: optional source-frame window; Euler degrees -> quaternions (unrolled over time);
centimetres -> metres; cubic resampling from 30 fps to 60 fps with the toolkit's 10% speed-up
(``int(0.9 * (2n - 1))`` output frames spanning the same n source frames); a simulation bone from the
Spine2 position and the Hips forward (local +Y) direction, both projected on the ground and smoothed
by Savitzky-Golay filters (31 and 61 frames, cubic); the Hips made local to it. Then
``database_build.build_database`` appends mirrored copies and computes velocities and contacts.
"""
import logging
import os

import numpy as np
from scipy import interpolate, signal

from motion_matching.data.bvh.text import POSITION_CHANNELS, ROTATION_CHANNELS, read_bvh
from motion_matching.data.database_build import build_database
from motion_matching.errors import BvhError
from motion_matching.toolkit import quat, skeleton

LOG = logging.getLogger(__name__)

LAFAN1_NAMES = skeleton.BONE_NAMES[1:]
"""The 22 joints a LaFAN1 file has: the toolkit's skeleton without the Simulation bone."""
LAFAN1_PARENTS = tuple(parent - 1 for parent in skeleton.BONE_PARENTS[1:])
SOURCE_FPS = 30.0
CENTIMETRES = 0.01
HIPS_FORWARD = np.array([0.0, 1.0, 0.0])
"""The Hips' local axis that points forward in LaFAN1 (the toolkit projects it to face the simulation bone)."""
POSITION_WINDOW = 31
DIRECTION_WINDOW = 61
SMOOTHING_ORDER = 3
MIN_SOURCE_FRAMES = 4
"""Fewest source frames a clip (or window) may have: 4 give 6 frames at 60 fps, enough for the filters."""


def resampled_length(nsource):
    """Frames at 60 fps the toolkit makes from ``nsource`` 30 fps frames (10% faster): ``int(0.9 (2n - 1))``."""
    return int(0.9 * (2 * nsource - 1))


def database_from_bvh_files(paths, *, windows=None):
    """Database from LaFAN1-style BVH files, one range per file plus one mirrored range per file.

    ``windows[i]`` is ``(start, stop)`` in source frames of ``paths[i]`` or None for the whole clip.
    Returns a ``formats.Database`` (23 toolkit bones, 60 fps, ranges: files in order, then mirrors).
    """
    paths = [os.fspath(path) for path in paths]
    windows = list(windows) if windows is not None else [None] * len(paths)
    if len(windows) != len(paths):
        raise ValueError(f"{len(windows)} windows for {len(paths)} BVH files")
    clips = []
    for path, window in zip(paths, windows):
        clips.append(clip_from_bvh(read_bvh(path), path=path, window=window))
        LOG.info("%s: %d frames at 60 fps", path, len(clips[-1][0]))
    return build_database(clips, mirror=True, fps=60, names=paths)


def clip_from_bvh(bvh, *, path, window=None):
    """build_database inputs from a parsed LaFAN1-style ``bvh``; ``path`` labels errors.

    Returns (local positions (F, 23, 3) float64 metres, local rotations (F, 23, 4) w x y z) in
    skeleton.py order at 60 fps; bone 0 is the simulation bone in world space.
    """
    order = lafan1_joint_order(bvh, path=path)
    check_frame_time(bvh, path=path)
    start, stop = check_window(bvh, window, path=path)
    positions, rotations = source_local_states(bvh, order, start, stop)
    positions, rotations = resample(positions, rotations)
    global_positions, global_rotations = quat.forward_kinematics(positions, rotations, LAFAN1_PARENTS)
    hips = skeleton.HIPS - 1
    sim_position, sim_rotation = simulation_bone(
        global_positions[:, skeleton.SPINE2 - 1], global_rotations[:, hips],
        path=path, frame_line=_frame_line(bvh, start, stop))
    positions[:, hips] = quat.inv_mul_vec(sim_rotation, positions[:, hips] - sim_position)
    rotations[:, hips] = quat.inv_mul(sim_rotation, rotations[:, hips])
    positions = np.concatenate([sim_position[:, None], positions], axis=1)
    rotations = np.concatenate([sim_rotation[:, None], rotations], axis=1)
    return positions, rotations


def lafan1_joint_order(bvh, *, path):
    """Index in ``bvh`` of each of the 22 LaFAN1 joints, checking names, parents and channels.

    Returns a (22,) int64 array; raises ``BvhError`` naming the line of any unknown, misplaced or
    missing joint, or of a CHANNELS line the import cannot use.
    """
    for joint, name in enumerate(bvh.names):
        line = _line(bvh, "joints", joint)
        if name not in LAFAN1_NAMES:
            raise BvhError(path, f"line {line}: unknown joint '{name}': LaFAN1-style import expects exactly "
                                 f"the toolkit's joints ({', '.join(LAFAN1_NAMES)})")
        expected = LAFAN1_PARENTS[LAFAN1_NAMES.index(name)]
        parent = bvh.parents[joint]
        found = bvh.names[parent] if parent >= 0 else None
        wanted = LAFAN1_NAMES[expected] if expected >= 0 else None
        if found != wanted:
            where = f"under '{wanted}'" if wanted else "the root"
            raise BvhError(path, f"line {line}: joint '{name}' has parent '{found}', the toolkit skeleton "
                                 f"has it {where}")
        _check_channels(bvh, joint, path=path)
    for name in LAFAN1_NAMES:
        if name not in bvh.names:
            raise BvhError(path, f"line {_line(bvh, 'hierarchy_end')}: hierarchy ends without joint '{name}' "
                                 f"(LaFAN1-style import needs all {len(LAFAN1_NAMES)} toolkit joints)")
    return np.array([bvh.names.index(name) for name in LAFAN1_NAMES], dtype=np.int64)


def _check_channels(bvh, joint, *, path):
    channels = bvh.channels[joint]
    rotations = [channel for channel in channels if channel in ROTATION_CHANNELS]
    positions = sorted(channel for channel in channels if channel in POSITION_CHANNELS)
    wanted_positions = list(POSITION_CHANNELS) if bvh.parents[joint] < 0 else []
    if len(rotations) != 3 or positions != wanted_positions:
        kind = "3 position and 3 rotation channels" if wanted_positions else "3 rotation channels"
        raise BvhError(path, f"line {_line(bvh, 'channels', joint)}: joint '{bvh.names[joint]}' has "
                             f"{len(channels)} channels ({' '.join(channels)}); "
                             f"LaFAN1-style import expects {kind}")


def check_frame_time(bvh, *, path):
    """Raise ``BvhError`` unless the clip is 30 fps, the rate the toolkit's resampling assumes."""
    if abs(bvh.frame_time * SOURCE_FPS - 1.0) > 1e-3:
        raise BvhError(path, f"line {_line(bvh, 'frame_time')}: frame time {bvh.frame_time:g} s "
                             f"({1.0 / bvh.frame_time:.4g} fps); the toolkit's pipeline resamples 30 fps "
                             f"clips (frame time {1.0 / SOURCE_FPS:.6f})")


def check_window(bvh, window, *, path):
    """The (start, stop) source frames to use, checked against the motion block; returns two ints."""
    start, stop = (0, bvh.nframes) if window is None else (int(window[0]), int(window[1]))
    if not 0 <= start < stop <= bvh.nframes:
        raise BvhError(path, f"line {_line(bvh, 'frames', 0)}: window {start}:{stop} is not within the "
                             f"motion block's {bvh.nframes} frames")
    if stop - start < MIN_SOURCE_FRAMES:
        raise BvhError(path, f"line {_line(bvh, 'frames', 0)}: {stop - start} frames (window {start}:{stop}); "
                             f"import needs at least {MIN_SOURCE_FRAMES}")
    return start, stop


def _line(bvh, key, index=None):
    """The file line ``read_bvh`` recorded under ``key`` (and ``index``), or 0 for a Bvh built in memory."""
    value = bvh.lines.get(key)
    if value is None or (index is not None and index >= len(value)):
        return 0
    return value if index is None else value[index]


def _frame_line(bvh, start, stop):
    """A function giving the line of the source frame nearest a 60 fps frame of the resampled clip."""
    step = (stop - start - 1) / max(resampled_length(stop - start) - 1, 1)
    return lambda frame: _line(bvh, "frames", start + int(round(frame * step)))


def source_local_states(bvh, order, start, stop):
    """Local positions (n, 22, 3) metres and rotations (n, 22, 4) of source frames start..stop-1.

    Non-root positions are the joint OFFSETs; the root's are its position channels (its OFFSET is
    ignored, as the toolkit's loader does). Rotations are unrolled so consecutive frames agree in sign.
    """
    motion = bvh.motion[start:stop]
    positions = np.repeat(bvh.offsets[order][None], len(motion), axis=0) * CENTIMETRES
    rotations = np.empty((len(motion), len(order), 4))
    for bone, joint in enumerate(order):
        columns = bvh.channel_columns(joint)
        channels = bvh.channels[joint]
        values = motion[:, columns]
        rotation = [index for index, channel in enumerate(channels) if channel in ROTATION_CHANNELS]
        axes = "".join(channels[index][0].lower() for index in rotation)
        rotations[:, bone] = quat.from_euler(np.radians(values[:, rotation]), order=axes)
        if bvh.parents[joint] < 0:
            for axis, channel in enumerate(POSITION_CHANNELS):
                positions[:, bone, axis] = values[:, channels.index(channel)] * CENTIMETRES
    return positions, unroll(rotations)


def unroll(rotations):
    """Flip quaternion signs (F, ..., 4) along frames so each is within 90 degrees of the previous one."""
    dots = np.sum(rotations[1:] * rotations[:-1], axis=-1)
    signs = np.cumprod(np.where(dots < 0.0, -1.0, 1.0), axis=0)
    return np.concatenate([rotations[:1], rotations[1:] * signs[..., None]], axis=0)


def spline_resample(positions, rotations, sample_times):
    """Not-a-knot cubic splines through frames 0..F-1, evaluated at ``sample_times`` (k,) in frame units.

    ``positions`` (F, ..., 3) and ``rotations`` (F, ..., 4) (unrolled: no sign flips between frames).
    Returns positions (k, ..., 3) and renormalised rotations (k, ..., 4), float64. Import (30 -> 60 fps)
    and export (back to 30 fps) both resample with it.
    """
    times = np.arange(len(positions), dtype=np.float64)
    return (interpolate.CubicSpline(times, positions, axis=0)(sample_times),
            quat.normalize(interpolate.CubicSpline(times, rotations, axis=0)(sample_times)))


def resample(positions, rotations):
    """Cubic (not-a-knot spline) resampling of n 30 fps frames to ``resampled_length(n)`` 60 fps frames.

    The output spans the same source frames 0..n-1, so it plays 10% faster, as the toolkit does.
    Returns positions (F, B, 3) and renormalised rotations (F, B, 4), float64.
    """
    nsource = len(positions)
    return spline_resample(positions, rotations, np.linspace(0.0, nsource - 1.0, resampled_length(nsource)))


def smooth(values, window):
    """Savitzky-Golay cubic smoothing along frames with the toolkit's 'interp' edges; returns (F, ...).

    Clips shorter than ``window`` (where the toolkit itself would fail) use the longest odd window
    that fits.
    """
    window = min(window, len(values) - (1 - len(values) % 2))
    return signal.savgol_filter(values, window, SMOOTHING_ORDER, axis=0, mode="interp")


def simulation_bone(spine_positions, hips_rotations, *, path="<clip>", frame_line=None):
    """World simulation-bone positions (F, 3) and rotations (F, 4) from Spine2 positions and Hips rotations.

    Position: Spine2 on the ground (y = 0), smoothed. Rotation: about +Y, facing the Hips' forward
    axis projected on the ground, smoothed and renormalised.
    """
    position = smooth(spine_positions * np.array([1.0, 0.0, 1.0]), POSITION_WINDOW)
    direction = quat.mul_vec(hips_rotations, HIPS_FORWARD) * np.array([1.0, 0.0, 1.0])
    length = np.linalg.norm(direction, axis=-1)
    if (length < 1e-6).any():
        frame = int(np.argmax(length < 1e-6))
        line = f"line {frame_line(frame)}: " if frame_line else ""
        raise BvhError(path, f"{line}the Hips forward (local +Y) axis is vertical, so the clip has no facing "
                             "direction for the simulation bone")
    direction = smooth(direction / length[:, None], DIRECTION_WINDOW)
    angle = np.arctan2(direction[:, 0], direction[:, 2])
    # the rotation about +Y taking +Z to the direction (the toolkit's quat.between, without its
    # degenerate case when facing exactly -Z)
    rotation = np.stack([np.cos(0.5 * angle), np.zeros_like(angle), np.sin(0.5 * angle), np.zeros_like(angle)], -1)
    return position, rotation
