"""What the stepper trains on: features.bin and latent.bin, database.bin for its clips.

The normalisation follows the toolkit's ``train_stepper.py``, computed in float32 numpy in its order so
every later bit is the script's: the input mean per column and one scale for all features and one for
all latent values (their standard deviation over every value); the output (a velocity: the change per
second between consecutive frames) mean and std per column, over every pair of consecutive frames.
"""
import typing

import numpy as np
import torch

from motion_matching.errors import InvalidFile, MismatchedFiles
from motion_matching.fingerprint import file_sha256
from motion_matching.toolkit import formats

DT = 1.0 / 60.0  # seconds per frame, the toolkit's


class Inputs(typing.NamedTuple):
    """Features ``X`` (F, nfeatures) and latent ``Z`` (F, nlatent) float32 tensors, the normalisation
    (name -> float32 tensor), clip ranges ``(starts, stops)``, the files' SHA-256s and paths."""

    X: torch.Tensor
    Z: torch.Tensor
    normalisation: dict
    ranges: tuple
    hashes: dict
    database_path: str
    features_path: str
    latent_path: str

    @property
    def nframes(self):
        """Frames in the database (int)."""
        return self.X.shape[0]


def clip_window_starts(ranges, window):
    """Every first frame (int64 numpy, ascending) of a ``window``-frame window inside one clip of ``ranges``
    (``(starts, stops)``), each clip's last window included."""
    return np.concatenate([np.zeros(0, np.int64)] + [np.arange(int(start), int(stop) - window + 1, dtype=np.int64)
                                                     for start, stop in zip(*ranges)])


def normalisation(X, Z):
    """The script's ``stepper_mean_in``, ``stepper_std_in``, ``stepper_mean_out`` and ``stepper_std_out`` of
    features ``X`` and latent ``Z`` (float32 numpy): a dict of float32 vectors of nfeatures + nlatent."""
    X_vel, Z_vel = (X[1:] - X[:-1]) / DT, (Z[1:] - Z[:-1]) / DT
    return {"stepper_mean_in": np.hstack([X.mean(axis=0).ravel(), Z.mean(axis=0).ravel()]).astype(np.float32),
            "stepper_std_in": np.hstack([X.std().repeat(X.shape[1]), Z.std().repeat(Z.shape[1])]).astype(np.float32),
            "stepper_mean_out": np.hstack([X_vel.mean(axis=0).ravel(), Z_vel.mean(axis=0).ravel()]).astype(np.float32),
            "stepper_std_out": np.hstack([X_vel.std(axis=0).ravel(), Z_vel.std(axis=0).ravel()]).astype(np.float32)}


def load_inputs(database_path, features_path, latent_path, *, window):
    """Read the three files, check they agree and hold a ``window``-frame window; returns ``Inputs``."""
    database = formats.load_database(database_path)
    features, latent = formats.load_features_and_latent(features_path, latent_path)
    X, Z = features.features.astype(np.float32), latent.astype(np.float32)
    if X.shape[0] != database.nframes:
        raise MismatchedFiles(features_path, f"has {X.shape[0]} frames but {database_path} has {database.nframes}")
    if X.shape[0] <= window:
        raise InvalidFile(features_path, f"has {X.shape[0]} frames; a stepper window of {window} needs at least "
                                         f"{window + 1}")
    for path, values in ((features_path, X), (latent_path, Z)):
        if not np.isfinite(values.std()) or values.std() == 0:
            raise InvalidFile(path, "has the same value everywhere (or a non-finite one): it cannot be normalised")
    hashes = {"database": file_sha256(database_path), "features": file_sha256(features_path),
              "latent": file_sha256(latent_path)}
    stats = {name: torch.as_tensor(value) for name, value in normalisation(X, Z).items()}
    return Inputs(torch.as_tensor(X), torch.as_tensor(Z), stats, (database.range_starts, database.range_stops),
                  hashes, str(database_path), str(features_path), str(latent_path))
