"""The toolkit's BVH previews of a decompressor run: a clip of the database beside its reconstruction.

At each save the toolkit's ``train_decompressor.py`` writes ``decompressor_Ygnd.bvh``, up to 1,000 frames of
clip 2 as the database holds them, and ``decompressor_Ytil.bvh``, the same frames compressed and decoded:
each bone's local rotation (from the decoded first two columns of its matrix, made orthonormal) and local
position, and the simulation bone integrated from the decoded root velocity and angular velocity, starting
from the database's at the first frame. Both in the script's layout: joints ``joint_<bone>``, the root's position
and every joint's Zrotation Yrotation Xrotation (degrees) a frame, centimetres, OFFSETs the first frame's
local positions, 60 fps.

A BVH file has no place for a writer's mark that a strict reader accepts, and what Ytil holds depends on
the network, so no file can be recognised by its content: ``decompressor_previews.json`` beside them
records the SHA-256 of each as written, and a file of those names is replaced only when it is the one
recorded there (or with ``--force``).
"""
import json
import os

import numpy as np
import torch

from motion_matching.atomic import atomic_write, staged_files
from motion_matching.data.bvh.text import POSITION_CHANNELS, Bvh, write_bvh
from motion_matching.decompressor import kinematics as kin
from motion_matching.decompressor.objective import DT, split_output
from motion_matching.decompressor.plots import preview_frames
from motion_matching.errors import MotionMatchingError
from motion_matching.fingerprint import file_sha256
from motion_matching.toolkit import quat

BVH_NAMES = ("decompressor_Ygnd.bvh", "decompressor_Ytil.bvh")
RECORD_NAME = "decompressor_previews.json"
RECORD_FORMAT, RECORD_VERSION = "mm-decompressor-bvh-previews", 1
BVH_FRAMES = 1000  # the toolkit's clip: the first 1,000 frames of range 2
ROTATION_ORDER = ("Zrotation", "Yrotation", "Xrotation")
CENTIMETRES_PER_METRE = 100.0


def preview_paths(out_dir):
    """The files the BVH previews occupy in ``out_dir`` (list of str): the two BVHs, then their record."""
    return [os.path.join(os.fspath(out_dir), name) for name in BVH_NAMES + (RECORD_NAME,)]


def read_record(out_dir):
    """The record (dict) of the previews in ``out_dir``, or None: absent, unreadable or not such a record."""
    try:
        with open(os.path.join(os.fspath(out_dir), RECORD_NAME), encoding="utf-8") as stream:
            record = json.load(stream)
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("format") != RECORD_FORMAT or not isinstance(
            record.get("sha256"), dict):
        return None
    return record


def written_by_training(path):
    """True if ``path`` is the previews' record, or a BVH with the SHA-256 that record gives it."""
    path = os.fspath(path)
    record = read_record(os.path.dirname(path) or ".")
    if record is None:
        return False
    if os.path.basename(path) == RECORD_NAME:
        return True
    try:
        return record["sha256"].get(os.path.basename(path)) == file_sha256(path)
    except MotionMatchingError:  # a folder or an unreadable file of that name
        return False


def database_clip(inputs, frames):
    """The database's local rotations (T, B, 4) and positions (T, B, 3) metres of ``frames`` (a slice), float64."""
    return (quat.normalize(inputs.arrays["Yrot"][frames].numpy().astype(np.float64)),
            inputs.arrays["Ypos"][frames].numpy().astype(np.float64))


def decoded_clip(module, inputs, latent, frames):
    """Local rotations (T, B, 4) and positions (T, B, 3) metres, float64, of ``frames`` (a slice) decoded by
    ``module`` (``decode(features, latent)``) from the features and ``latent`` (F, L) float32 numpy; the root
    integrated from the decoded velocities, from the database's root at the first frame."""
    device = next(module.parameters()).device
    with torch.no_grad():
        til = split_output(module.decode(inputs.X[frames][None].to(device),
                                         torch.as_tensor(latent[frames])[None].to(device)), inputs.nbones)
        matrices = kin.matrix_from_two_columns(til["txy"])[0].double().cpu().numpy()
    # the first column is kept as decoded, not of unit length: made one, the matrix is a rotation
    matrices[..., 0] /= np.linalg.norm(matrices[..., 0], axis=-1, keepdims=True)
    parts = {name: til[name][0].cpu().numpy().astype(np.float64) for name in ("pos", "rvel", "rang")}
    truth_rotations, truth_positions = database_clip(inputs, frames)
    root_rotations, root_positions = integrate_root(truth_rotations[0, 0], truth_positions[0, 0],
                                                    parts["rvel"], parts["rang"])
    return (np.concatenate([root_rotations[:, None], quat.from_xform(matrices)], axis=1),
            np.concatenate([root_positions[:, None], parts["pos"]], axis=1))


def integrate_root(rotation, position, velocity, angular):
    """Root rotations (T, 4) and positions (T, 3) from the first frame's ``rotation`` (4,) and ``position`` (3,)
    and the velocity and angular velocity (T, 3) of each frame in the root's own frame, one ``DT`` a frame
    (the last frame's velocities are not used)."""
    rotations, positions = [np.asarray(rotation, np.float64)], [np.asarray(position, np.float64)]
    for frame in range(1, len(velocity)):
        positions.append(positions[-1] + quat.mul_vec(rotations[-1], velocity[frame - 1]) * DT)
        rotations.append(quat.mul(rotations[-1], quat.from_scaled_angle_axis(angular[frame - 1] * DT)))
    return np.stack(rotations), np.stack(positions)


def depth_first(parents):
    """The bones (list of int) in depth-first order, children by index: BVH's joint order."""
    children = [[bone for bone, parent in enumerate(parents) if parent == joint] for joint in range(len(parents))]
    order, stack = [], [int(np.flatnonzero(np.asarray(parents) < 0)[0])]
    while stack:
        order.append(stack.pop())
        stack.extend(reversed(children[order[-1]]))
    return order


def clip_bvh(rotations, positions, parents):
    """A ``Bvh`` of local ``rotations`` (T, B, 4) and ``positions`` (T, B, 3) metres in the toolkit's preview
    layout: the root's position channels, every joint's Euler degrees, OFFSETs the first frame's positions."""
    order = depth_first(parents)
    where = {bone: joint for joint, bone in enumerate(order)}
    euler = np.degrees(quat.to_euler_zyx(rotations[:, order]))
    motion = np.concatenate([CENTIMETRES_PER_METRE * positions[:, order[0]], euler.reshape(len(euler), -1)], axis=1)
    leaves = [joint for joint, bone in enumerate(order) if bone not in parents]
    return Bvh(names=[f"joint_{bone}" for bone in order],
               parents=np.array([where.get(int(parents[bone]), -1) for bone in order], dtype=np.int64),
               offsets=CENTIMETRES_PER_METRE * positions[0, order],
               channels=[POSITION_CHANNELS + ROTATION_ORDER] + [ROTATION_ORDER] * (len(order) - 1), frame_time=DT,
               motion=motion, end_sites={joint: np.zeros(3) for joint in leaves})


def write_bvh_previews(module, inputs, latent, out_dir, *, iteration):
    """Write decompressor_Ygnd.bvh and decompressor_Ytil.bvh of the preview clip into ``out_dir``, and their
    record, all three together (``staged_files``); ``latent`` (F, L) float32 numpy is the one just saved."""
    frames = preview_frames(inputs.ranges, count=BVH_FRAMES)
    clips = (database_clip(inputs, frames), decoded_clip(module, inputs, latent, frames))
    paths = preview_paths(out_dir)
    with staged_files(paths) as staged:
        hashes = {}
        for name, path, (rotations, positions) in zip(BVH_NAMES, paths, clips):
            write_bvh(staged[path], clip_bvh(rotations, positions, inputs.parents))
            hashes[name] = file_sha256(staged[path])
        record = {"format": RECORD_FORMAT, "version": RECORD_VERSION, "made_by": "train-decompressor",
                  "iteration": int(iteration), "frames": [frames.start, frames.stop], "sha256": hashes}
        with atomic_write(staged[paths[-1]], "w") as stream:
            json.dump(record, stream, indent=1)
