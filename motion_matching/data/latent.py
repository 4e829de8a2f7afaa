"""A stand-in for the decompressor's learned latent (``latent.bin``), and loading a user's own.

In the toolkit, ``latent.bin`` holds the 32 values per frame that the trained compressor gives
each frame: the pose information the matching features do not carry. Without that network, this
module derives a substitute with the same role and scale: a PCA of the local pose (each joint's
rotation as the first two columns of its matrix, the hips' local position and the local angular
velocities), whitened and scaled so column standard deviations fall from 0.35 to 0.15. Frames with
similar poses get similar latents, which is what the projector must learn to predict.
"""
import numpy as np
import threadpoolctl

from motion_matching.errors import InvalidOption, MismatchedFiles
from motion_matching.toolkit import quat
from motion_matching.toolkit.formats import load_latent

DEFAULT_NLATENT = 32
LATENT_STD = (0.35, 0.15)
"""Standard deviation of the first and of the last latent column (linear in between)."""
ANGULAR_VELOCITY_WEIGHT = 0.1
"""Radians/second to pose units: angular velocities count less than orientations."""


def pose_descriptors(database):
    """Per-frame pose information (F, D) float64 from the local bone states of bones 1..B-1."""
    rotations = quat.normalize(np.asarray(database.bone_rotations[:, 1:], dtype=np.float64))
    nframes = rotations.shape[0]
    return np.concatenate([
        _first_two_columns(rotations).reshape(nframes, -1),
        np.asarray(database.bone_positions[:, 1], dtype=np.float64),
        ANGULAR_VELOCITY_WEIGHT * np.asarray(database.bone_angular_velocities[:, 1:], np.float64).reshape(nframes, -1),
    ], axis=1)


def _first_two_columns(q):
    """The rotated x and y axes (..., 6) of unit quaternions (..., 4): a continuous rotation code."""
    w, x, y, z = (q[..., index] for index in range(4))
    columns = np.empty(q.shape[:-1] + (6,))
    columns[..., 0] = 1 - 2 * (y * y + z * z)
    columns[..., 1] = 2 * (x * y + w * z)
    columns[..., 2] = 2 * (x * z - w * y)
    columns[..., 3] = 2 * (x * y - w * z)
    columns[..., 4] = 1 - 2 * (x * x + z * z)
    columns[..., 5] = 2 * (y * z + w * x)
    return columns


def compute_latent(database, *, nlatent=DEFAULT_NLATENT):
    """Stand-in latent (F, nlatent) float32: whitened PCA of the local pose, column std 0.35 falling to 0.15.

    Deterministic: each component's sign makes its dot product with a fixed reference vector
    positive, so BLAS thread counts do not flip columns. Raises ``InvalidOption`` (a ``ValueError``)
    when ``nlatent`` exceeds the pose descriptor's width.
    """
    pose = pose_descriptors(database)
    if not 0 < nlatent <= pose.shape[1]:
        raise InvalidOption("--nlatent", f"must be between 1 and {pose.shape[1]} (the pose values per frame of "
                                         f"this database), got {nlatent}")
    centred = pose - pose.mean(axis=0)
    # One BLAS thread: threaded BLAS/LAPACK sum in an order that depends on the thread count,
    # which would change the latent's bytes from one machine setting to another.
    with threadpoolctl.threadpool_limits(limits=1, user_api="blas"):
        variances, vectors = np.linalg.eigh(centred.T @ centred / max(len(pose), 1))
        order = np.argsort(variances)[::-1][:nlatent]
        variances, vectors = variances[order], vectors[:, order]
        # Fix each component's sign by a fixed reference direction: a rule on the largest loading
        # is unstable here, because mirrored data gives left and right bones loadings of equal size.
        reference = np.cos(np.arange(pose.shape[1]) * 2.399 + 0.5)
        vectors = vectors * np.where(reference @ vectors < 0.0, -1.0, 1.0)
        whitened = (centred @ vectors) / np.sqrt(np.maximum(variances, 1e-12))
    target = np.linspace(LATENT_STD[0], LATENT_STD[1], nlatent)
    return (whitened * target).astype(np.float32)


def load_matching_latent(path, nframes):
    """A user's latent (F, L) float32 from ``path``; raises ``MismatchedFiles`` unless F == ``nframes``."""
    latent = load_latent(path)
    if latent.shape[0] != nframes:
        raise MismatchedFiles(path, f"has {latent.shape[0]} frames but the database has {nframes}")
    return latent
