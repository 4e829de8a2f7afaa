"""What training reads before its first step: the toolkit's files, the cache, a checkpoint to resume.

Each check raises a ``MotionMatchingError`` naming the file, so a bad input stops a run before it starts.
"""
import contextlib
import typing

import numpy as np
import torch

from motion_matching.cache import open_cache
from motion_matching.cache.commands import build_cache_command, command_line
from motion_matching.errors import InvalidFile, MismatchedFiles, StaleCache
from motion_matching.fingerprint import file_sha256
from motion_matching.projector.checkpoint import load_checkpoint
from motion_matching.projector.config import TrainConfig, numeric_differences
from motion_matching.toolkit import formats


class Inputs(typing.NamedTuple):
    """Features ``X`` (F, n) and latent ``Z`` (F, L) float32, clip ranges or None, and file SHA-256s."""

    X: np.ndarray
    Z: np.ndarray
    ranges: typing.Optional[tuple]
    hashes: dict
    features_path: str
    latent_path: str


def load_inputs(features_path, latent_path, database_path=None):
    """Read features.bin and latent.bin (and database.bin, for its frame count and clip ranges)."""
    features, latent = formats.load_features_and_latent(features_path, latent_path)
    X = np.ascontiguousarray(features.features, dtype=np.float32)
    Z = np.ascontiguousarray(latent, dtype=np.float32)
    ranges = None
    if database_path is not None:
        database = formats.load_database(database_path)
        if database.nframes != X.shape[0]:
            raise MismatchedFiles(database_path, f"has {database.nframes} frames but {features_path} has "
                                                 f"{X.shape[0]}")
        ranges = (database.range_starts, database.range_stops)
    hashes = {"features": file_sha256(features_path), "latent": file_sha256(latent_path)}
    return Inputs(X, Z, ranges, hashes, str(features_path), str(latent_path))


@contextlib.contextmanager
def open_cache_reader(cache_path, config, inputs):
    """``cache.open_cache`` for this run (a context manager); refuses a cache another run needs."""
    with open_cache(cache_path, features_path=inputs.features_path) as reader:
        _check_cache(reader, cache_path, config, features_path=inputs.features_path)
        yield reader


def _check_cache(reader, cache_path, config, *, features_path):
    """Raise unless the open, fresh cache ``reader`` holds this run's query stream (``open_cache`` has already
    checked it against features.bin); the error carries the command that builds a cache fit for this run."""
    command = build_cache_command(cache_path, features_path=features_path,
                                  nqueries=config.iterations * config.batch_size, seed=config.seed)
    if int(reader.seed) != config.seed:
        raise MismatchedFiles(cache_path, f"holds the query stream of seed {reader.seed}, not {config.seed}",
                              option=command_line("--seed", reader.seed), command=command)
    if int(reader.nqueries) < config.batch_size:
        raise StaleCache(cache_path, f"holds {reader.nqueries} queries, fewer than one batch of {config.batch_size}",
                         command=command)


def restore_checkpoint(run, path):
    """Load checkpoint ``path`` into ``run`` (model, optimiser, schedule, step, rolling loss, RNG)."""
    payload = load_checkpoint(path)
    try:
        saved = TrainConfig.from_dict(payload["config"])
        for name in numeric_differences(saved, run.config):
            option = "--" + name.replace("_", "-")
            raise MismatchedFiles(path, f"was written with {option} {getattr(saved, name)}, this run has "
                                        f"{getattr(run.config, name)}; pass the same value to resume")
        for name, digest in run.inputs.hashes.items():
            if payload["inputs"].get(name) != digest:
                raise MismatchedFiles(path, f"was trained on another {name}.bin than "
                                            f"{getattr(run.inputs, name + '_path')}")
        run.module.load_state_dict(payload["model"])
        run.optimizer.load_state_dict(payload["optimizer"])
        run.scheduler.load_state_dict(payload["scheduler"])
        run.step, run.rolling = int(payload["step"]), payload["rolling_loss"]
        torch.set_rng_state(payload["rng"]["torch"])
        if "cuda" in payload["rng"] and run.device.type == "cuda":
            torch.cuda.set_rng_state(payload["rng"]["cuda"], run.device)
    except (KeyError, TypeError, RuntimeError, ValueError) as error:
        raise InvalidFile(path, f"checkpoint lacks or garbles {error}") from None
