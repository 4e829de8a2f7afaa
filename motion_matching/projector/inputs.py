"""What projector training reads before its first step: the toolkit's files and the cache
(``training.resume`` reads the checkpoint to resume).

Each check raises a ``MotionMatchingError`` naming the file, so a bad input stops a run before it starts.
"""
import contextlib
import typing

import numpy as np

from motion_matching.cache import open_cache
from motion_matching.cache.commands import build_cache_command, command_line
from motion_matching.errors import InvalidFile, MismatchedFiles, MissingFile, StaleCache
from motion_matching.fingerprint import file_sha256
from motion_matching.neighbours import toolkit_stream
from motion_matching.toolkit import formats


class Inputs(typing.NamedTuple):
    """Features ``X`` (F, n) and latent ``Z`` (F, L) float32, clip ranges or None, and file SHA-256s."""

    X: np.ndarray
    Z: np.ndarray
    ranges: typing.Optional[tuple]
    hashes: dict
    features_path: str
    latent_path: str
    database_path: typing.Optional[str] = None


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
    return Inputs(X, Z, ranges, hashes, str(features_path), str(latent_path),
                  None if database_path is None else str(database_path))


def toolkit_preview_rows(inputs):
    """Rows (int) the toolkit's preview draws noise for, from database.bin's range 2; raises naming the file."""
    if inputs.ranges is None:
        raise MissingFile("database.bin", "--exact-toolkit needs the toolkit's database.bin (--database): its "
                                          "preview draws noise for range 2 of it")
    try:
        return toolkit_stream.preview_rows(*inputs.ranges)
    except toolkit_stream.PreviewClipMissing as error:
        raise InvalidFile(inputs.database_path, str(error)) from None


@contextlib.contextmanager
def open_cache_reader(cache_path, config, inputs):
    """``cache.open_cache`` for this run (a context manager); refuses a cache another run needs."""
    with open_cache(cache_path, features_path=inputs.features_path) as reader:
        _check_cache(reader, cache_path, config, inputs)
        yield reader


def _check_cache(reader, cache_path, config, inputs):
    """Raise unless the open, fresh cache ``reader`` holds this run's query stream (``open_cache`` has already
    checked it against features.bin); the error carries the command that builds a cache fit for this run."""
    # a rebuild keeps the cache's own query count: a short run must not suggest shrinking a big cache
    nqueries = max(int(reader.nqueries), config.batch_size)
    toolkit = None
    if config.exact_toolkit:
        toolkit = {"batch_size": config.batch_size, "save_every": config.save_every,
                   "database_path": inputs.database_path}
        # the toolkit stream is never cycled: whole batches, enough for every iteration
        nqueries = max(nqueries // config.batch_size * config.batch_size, config.iterations * config.batch_size)
    command = build_cache_command(cache_path, features_path=inputs.features_path, nqueries=nqueries,
                                  seed=config.seed, toolkit=toolkit)
    if int(reader.seed) != config.seed:
        raise MismatchedFiles(cache_path, f"holds the query stream of seed {reader.seed}, not {config.seed}",
                              option=command_line("--seed", reader.seed), command=command)
    if int(reader.nqueries) < config.batch_size:
        raise StaleCache(cache_path, f"holds {reader.nqueries} queries, fewer than one batch of {config.batch_size}",
                         command=command)
    problem = _stream_mismatch(reader.attributes, config, inputs)
    if problem:
        option = None if config.exact_toolkit else "--exact-toolkit"  # a toolkit cache, a default run
        raise MismatchedFiles(cache_path, problem, option=option, command=command)


def _stream_mismatch(attributes, config, inputs):
    """Why the cache's query stream is not the one this run draws (str), or None."""
    kind = attributes.get("stream", "default")
    if not config.exact_toolkit:
        if kind != "default":
            return "holds the toolkit script's query stream (build-cache --exact-toolkit)"
        return None
    if kind != "toolkit":
        return "holds the default query stream, not the toolkit script's that --exact-toolkit needs"
    wanted = {"batch_size": config.batch_size, "save_every": config.save_every,
              "preview_rows": toolkit_preview_rows(inputs)}
    for name, value in wanted.items():
        if attributes[name] != value:
            return f"was drawn for the toolkit stream with {name} {attributes[name]}, this run has {value}"
    if attributes["nqueries"] < config.iterations * config.batch_size:
        return (f"holds {attributes['nqueries']} queries of the toolkit stream, this --exact-toolkit run needs "
                f"{config.iterations * config.batch_size}")
    return None

