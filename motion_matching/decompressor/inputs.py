"""What the decompressor trains on: database.bin's poses in the toolkit's encodings, and features.bin.

Names follow the toolkit's ``train_decompressor.py``: ``Y`` local (parent-relative) bone states, ``Q``
character space (relative to the simulation bone), ``G`` world space; ``pos``, ``rot`` (quaternions),
``txy`` (the first two columns of the rotation matrix), ``xfm`` (the whole matrix), ``vel``, ``ang``;
``rvel``/``rang`` the simulation bone's velocities in its own frame; ``extra`` the contacts. Every array
is float32, computed in the toolkit's order (``kinematics``), so the normalisation, and with it every
later bit, is the script's.
"""
import typing

import numpy as np
import torch

from motion_matching.decompressor import kinematics as kin
from motion_matching.errors import InvalidFile, MismatchedFiles
from motion_matching.fingerprint import file_sha256
from motion_matching.toolkit import formats

NLATENT = 32  # the toolkit's latent width
CONTACTS = 2  # the script's output layout holds two contact values (left and right foot)
POSE_PARTS = ("Ypos", "Ytxy", "Yvel", "Yang")  # per non-root bone, the decompressor's output (then rvel, rang, extra)
CHARACTER_PARTS = ("Qpos", "Qtxy", "Qvel", "Qang")  # the compressor also sees these


class Inputs(typing.NamedTuple):
    """The tensors of one database (``arrays``: name -> (F, ...) float32 tensor), the features ``X`` (F, n),
    normalisation vectors, skeleton and clip ranges, the files' SHA-256s and paths."""

    arrays: dict
    X: torch.Tensor
    normalisation: dict
    parents: np.ndarray
    ranges: tuple
    hashes: dict
    database_path: str
    features_path: str

    @property
    def nframes(self):
        """Frames in the database (int)."""
        return self.X.shape[0]

    @property
    def nbones(self):
        """Bones of the skeleton, the simulation bone included (int)."""
        return len(self.parents)


def pose_arrays(database):
    """The script's arrays of ``database`` (a ``formats.Database``): a dict of float32 numpy arrays."""
    Ypos, Yrot = database.bone_positions.astype(np.float32), database.bone_rotations.astype(np.float32)
    Yvel = database.bone_velocities.astype(np.float32)
    Yang = database.bone_angular_velocities.astype(np.float32)
    Grot, Gpos, Gvel, Gang = kin.quat_forward_kinematics(Yrot, Ypos, Yvel, Yang, database.bone_parents)
    root = Grot[:, 0:1]
    Qrot = kin.quat_inv_mul(root, Grot)
    return {"Ypos": Ypos, "Yrot": Yrot, "Ytxy": kin.quat_to_matrix(Yrot, columns=2).astype(np.float32),
            "Yvel": Yvel, "Yang": Yang,
            "Qpos": kin.quat_inv_mul_vec(root, Gpos - Gpos[:, 0:1]), "Qrot": Qrot,
            "Qxfm": kin.quat_to_matrix(Qrot), "Qtxy": kin.quat_to_matrix(Qrot, columns=2).astype(np.float32),
            "Qvel": kin.quat_inv_mul_vec(root, Gvel), "Qang": kin.quat_inv_mul_vec(root, Gang),
            "Yrvel": kin.quat_inv_mul_vec(Yrot[:, 0], Yvel[:, 0]),
            "Yrang": kin.quat_inv_mul_vec(Yrot[:, 0], Yang[:, 0]),
            "Yextra": database.contact_states.astype(np.float32)}


def _columns(arrays, names, statistic):
    """``statistic`` (``np.mean`` / ``np.std`` over frames) of each named array, non-root bones only for the
    per-bone ones, side by side: a float32 vector."""
    parts = [statistic(arrays[name] if name.startswith("Yr") or name == "Yextra" else arrays[name][:, 1:], axis=0)
             for name in names]
    return np.hstack([part.ravel() for part in parts]).astype(np.float32)


def normalisation(arrays, nfeatures):
    """The script's normalisation vectors (float32 numpy): the decompressor's output mean and std per
    column; the compressor's input mean per column and std shared by each part (one value a part)."""
    out_names = POSE_PARTS + ("Yrvel", "Yrang", "Yextra")
    in_names = POSE_PARTS + CHARACTER_PARTS + ("Yrvel", "Yrang", "Yextra")
    scales = []
    for name in in_names:
        values = arrays[name] if name.startswith("Yr") or name == "Yextra" else arrays[name][:, 1:]
        scale = values.std()
        scales.append(scale.repeat(int(np.prod(values.shape[1:]))))
    return {"decompressor_mean_out": _columns(arrays, out_names, np.mean),
            "decompressor_std_out": _columns(arrays, out_names, np.std),
            "decompressor_mean_in": np.zeros(nfeatures + NLATENT, dtype=np.float32),
            "decompressor_std_in": np.ones(nfeatures + NLATENT, dtype=np.float32),
            "compressor_mean_in": _columns(arrays, in_names, np.mean),
            "compressor_std_in": np.hstack(scales).astype(np.float32)}


def load_inputs(database_path, features_path):
    """Read database.bin and features.bin and compute what training needs; returns ``Inputs``."""
    database = formats.load_database(database_path)
    if database.nbones < 2:
        raise InvalidFile(database_path, f"has {database.nbones} bone; the decompressor decodes the bones after the "
                                         "simulation bone, so it needs at least 2")
    features = formats.load_features(features_path)
    X = features.features.astype(np.float32)
    if X.shape[0] != database.nframes:
        raise MismatchedFiles(features_path, f"has {X.shape[0]} frames but {database_path} has {database.nframes}")
    if database.contact_states.shape[1] != CONTACTS:
        raise InvalidFile(database_path, f"has {database.contact_states.shape[1]} contact states per frame; the "
                                         f"toolkit's decompressor takes {CONTACTS}")
    if database.nframes < 3:
        raise InvalidFile(database_path, f"has {database.nframes} frames; the decompressor needs at least 3")
    arrays = pose_arrays(database)
    stats = normalisation(arrays, X.shape[1])
    if not np.all(np.isfinite(stats["compressor_std_in"])) or np.any(stats["compressor_std_in"] == 0):
        raise InvalidFile(database_path, "a pose part has the same value in every frame: it cannot be normalised")
    hashes = {"database": file_sha256(database_path), "features": file_sha256(features_path)}
    return Inputs({name: torch.as_tensor(value) for name, value in arrays.items()}, torch.as_tensor(X),
                  {name: torch.as_tensor(value) for name, value in stats.items()},
                  np.asarray(database.bone_parents), (database.range_starts, database.range_stops), hashes,
                  str(database_path), str(features_path))
