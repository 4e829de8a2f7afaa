"""The projector cache's HDF5 layout (docs/cache.md): names, fingerprints and the checks every reader runs.

Root attributes describe the file; two datasets hold the rows: ``queries`` (N, n) float32 and
``nearest`` (N,) int32, both chunked by ``chunk_rows`` rows, each chunk with a Fletcher-32 checksum
(format version 2; version 1 files have none and still open, with a note). Every check raises
``CorruptCache`` or ``StaleCache`` (or ``MissingFile``) whose fields are the problem and the command
that rebuilds the cache.
"""
import contextlib
import dataclasses
import logging
import os
import re
import typing

import h5py
import numpy as np

from motion_matching.cache import streams
from motion_matching.cache.commands import build_cache_command
from motion_matching.cache.lock import lock_holder
from motion_matching.errors import CorruptCache, MissingFile, StaleCache
from motion_matching.fingerprint import file_sha256
from motion_matching.toolkit import formats, recipe
from motion_matching.toolkit.binary_io import open_for_reading
from motion_matching.toolkit.sniff import another_kind

FORMAT = "motion-matching-projector-cache"
FORMAT_VERSION = 2
READABLE_VERSIONS = (1, 2)
"""Versions this package reads: 1 (no checksums: opened with a note) and 2 (Fletcher-32 per chunk)."""
CHECKSUMMED_SINCE = 2
DEFAULT_NQUERIES = recipe.QUERIES  # one query per sample of a full toolkit run (32 x 500,000)
DEFAULT_SEED = recipe.SEED
DEFAULT_CHUNK_ROWS = 65_536
CACHE_KIND = "a projector cache (HDF5)"  # as errors name it: "x.bin: is a features.bin (...), not a projector cache"

INT_ATTRIBUTES = ("format_version", "nframes", "nfeatures", "nqueries", "seed", "chunk_rows", "completed",
                  "query_block")
STR_ATTRIBUTES = ("format", "features_sha256", "query_recipe", "backend", "created")
# Attributes that decide which rows the file holds: a partial build resumes only if all of them match.
BUILD_KEYS = ("format_version", "features_sha256", "nframes", "nfeatures", "nqueries", "seed", "chunk_rows",
              "query_recipe", "query_block", "backend", "stream") + streams.TOOLKIT_INT_ATTRIBUTES


LOG = logging.getLogger(__name__)
H5PY_ERRORS = (OSError, KeyError, RuntimeError, ValueError, TypeError)
"""What h5py raises while decoding damaged metadata (besides crashes, which the checksummed HDF5 1.8
format's object headers guard against)."""

features_sha256 = file_sha256  # the cache's name for the fingerprint it stores


@dataclasses.dataclass
class Refusal:
    """What the errors about the cache at ``path`` carry besides their problem: the command that rebuilds it.

    With ``features_path`` None the errors carry no command (the builder's own checks of a partial file,
    which only need the problem). ``nqueries`` and ``seed`` None mean the defaults until ``read_attributes``
    takes them from the file.
    """

    path: str
    features_path: typing.Optional[str] = None
    nqueries: typing.Optional[int] = None
    seed: typing.Optional[int] = None
    toolkit: typing.Optional[dict] = None  # --exact-toolkit settings (batch_size, save_every, database_path)

    def __post_init__(self):
        self.path = os.fspath(self.path)

    @property
    def command(self):
        """The rebuild command (str), or None without ``features_path``."""
        if self.features_path is None:
            return None
        return build_cache_command(self.path, features_path=self.features_path,
                                   nqueries=DEFAULT_NQUERIES if self.nqueries is None else self.nqueries,
                                   seed=DEFAULT_SEED if self.seed is None else self.seed, toolkit=self.toolkit)

    def corrupt(self, problem):
        """A ``CorruptCache`` for ``problem`` carrying the rebuild command."""
        return CorruptCache(self.path, problem, command=self.command)

    def stale(self, problem):
        """A ``StaleCache`` for ``problem`` carrying the rebuild command."""
        return StaleCache(self.path, problem, command=self.command)

    def missing(self, problem):
        """A ``MissingFile`` for ``problem`` carrying the rebuild command."""
        return MissingFile(self.path, problem, command=self.command)


def open_hdf5(path, refusal, *, mode="r"):
    """Open ``path`` with h5py; a missing, non-HDF5 or damaged file raises the matching error."""
    path = os.fspath(path)
    if not os.path.exists(path):
        if os.path.exists(path + ".partial"):
            raise partial_refusal(path, refusal)
        raise refusal.missing("no such file")
    open_for_reading(path).close()  # a folder or an unreadable file: the MissingFile that says which
    if not h5py.is_hdf5(path):
        raise refusal.corrupt(another_kind(path, CACHE_KIND) or "not an HDF5 file")
    try:
        return h5py.File(path, mode)
    except H5PY_ERRORS as error:
        reason = _first_line(error)
        if "truncated" in reason:
            raise refusal.corrupt("truncated HDF5 file (it ends before the data its header announces)") from None
        raise refusal.corrupt(f"damaged HDF5 file that h5py cannot open ({reason})") from None


def _first_line(error):
    return str(error).splitlines()[0] if str(error) else type(error).__name__


def hdf5_reason(error):
    """The operating system's words (str) inside an h5py error about a failed write, else its first line."""
    found = re.search(r"error message = '([^']*)'", str(error))
    return found.group(1) if found else (error.strerror if isinstance(error, OSError) and error.strerror
                                         else _first_line(error))


@contextlib.contextmanager
def damaged_metadata(refusal):
    """Turn what h5py raises while decoding damaged metadata into one ``CorruptCache``."""
    try:
        yield
    except H5PY_ERRORS as error:
        raise refusal.corrupt(f"damaged HDF5 metadata ({_first_line(error)})") from None


def partial_refusal(path, refusal):
    """The ``MissingFile`` for a cache of which only ``<path>.partial`` exists: a build holds the lock now,
    or one was interrupted (then carrying the command that resumes it: the partial file's own query count
    and seed, and no --force)."""
    holder = lock_holder(path)
    name = os.path.basename(path)
    if holder is not None:
        return MissingFile(path, f"a build is in progress ({name}.lock is held by {holder}, writing "
                                 f"{name}.partial); wait for it to finish")
    nqueries, seed = refusal.nqueries, refusal.seed
    with contextlib.suppress(OSError, KeyError, TypeError, ValueError):
        with h5py.File(path + ".partial", "r") as handle:
            nqueries, seed = int(handle.attrs["nqueries"]), int(handle.attrs["seed"])
    command = None
    if refusal.features_path is not None:
        command = build_cache_command(path, features_path=refusal.features_path, force=False,
                                      nqueries=DEFAULT_NQUERIES if nqueries is None else nqueries,
                                      seed=DEFAULT_SEED if seed is None else seed)
    return MissingFile(path, f"an interrupted build left only {name}.partial; the same command resumes it",
                       command=command)


def _scalar(handle, name, kind, refusal):
    if name not in handle.attrs:
        raise refusal.corrupt(f"attribute {name!r} is missing")
    try:
        value = handle.attrs[name]
    except (OSError, TypeError, ValueError):
        raise refusal.corrupt(f"attribute {name!r} cannot be read") from None
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if kind is str and isinstance(value, str):
        return value
    if kind is int and np.ndim(value) == 0 and np.issubdtype(np.asarray(value).dtype, np.integer):
        return int(value)
    raise refusal.corrupt(f"attribute {name!r} is {value!r}, not {'a string' if kind is str else 'an integer'}")


def read_attributes(handle, refusal):
    """Check format and version, then return every root attribute as a dict of int, str and ndarray.

    ``refusal``'s nqueries and seed, unless already set, are taken from the file for later messages.
    """
    with damaged_metadata(refusal):
        return _read_attributes(handle, refusal)


def _read_attributes(handle, refusal):
    fmt = handle.attrs["format"] if "format" in handle.attrs else None
    fmt = fmt.decode("utf-8", "replace") if isinstance(fmt, bytes) else fmt
    if fmt != FORMAT:
        raise refusal.corrupt(f"not a projector cache (HDF5 attribute 'format' is {fmt!r}, expected {FORMAT!r})")
    version = _scalar(handle, "format_version", int, refusal)
    if version not in READABLE_VERSIONS:
        raise refusal.corrupt(f"format_version {version} is not supported (this package reads versions "
                              f"{', '.join(map(str, READABLE_VERSIONS))})")
    attributes = {name: _scalar(handle, name, int, refusal) for name in INT_ATTRIBUTES}
    # caches written before the toolkit stream existed have no 'stream' attribute: they hold the default one
    attributes["stream"] = _scalar(handle, "stream", str, refusal) if "stream" in handle.attrs else streams.DEFAULT
    if attributes["stream"] not in streams.KINDS:
        raise refusal.corrupt(f"attribute 'stream' is {attributes['stream']!r}, not one of {', '.join(streams.KINDS)}")
    if attributes["stream"] == streams.TOOLKIT:
        attributes.update({name: _scalar(handle, name, int, refusal) for name in streams.TOOLKIT_INT_ATTRIBUTES})
    if refusal.nqueries is None:
        refusal.nqueries, refusal.seed = attributes["nqueries"], attributes["seed"]
        refusal.toolkit = streams.toolkit_settings(attributes)
    attributes.update({name: _scalar(handle, name, str, refusal) for name in STR_ATTRIBUTES})
    if "noise_scale" not in handle.attrs:
        raise refusal.corrupt("attribute 'noise_scale' is missing")
    attributes["noise_scale"] = np.asarray(handle.attrs["noise_scale"])
    attributes["versions"] = {name[len("version_"):]: str(value) for name, value in handle.attrs.items()
                              if name.startswith("version_")}
    return attributes


def check_datasets(handle, attributes, refusal):
    """Raise ``CorruptCache`` unless ``queries`` and ``nearest`` have the shapes and dtypes the attributes say."""
    with damaged_metadata(refusal):
        _check_datasets(handle, attributes, refusal)


def _check_datasets(handle, attributes, refusal):
    nqueries, nfeatures = attributes["nqueries"], attributes["nfeatures"]
    if nqueries < 1 or nfeatures < 1 or attributes["nframes"] < 1 or attributes["chunk_rows"] < 1:
        raise refusal.corrupt("counts nqueries, nfeatures, nframes and chunk_rows must be positive")
    if not 0 <= attributes["completed"] <= nqueries:
        raise refusal.corrupt(f"attribute 'completed' is {attributes['completed']}, outside 0..{nqueries}")
    if attributes["noise_scale"].shape != (nfeatures,) or attributes["noise_scale"].dtype != np.float32:
        raise refusal.corrupt(f"attribute 'noise_scale' must be {nfeatures} float32 values")
    for name, shape, dtype in (("queries", (nqueries, nfeatures), np.float32), ("nearest", (nqueries,), np.int32)):
        dataset = handle.get(name)
        if not isinstance(dataset, h5py.Dataset):
            raise refusal.corrupt(f"dataset {name!r} is missing")
        if dataset.shape != shape or dataset.dtype != dtype:
            raise refusal.corrupt(f"dataset {name!r} is {dataset.shape} {dataset.dtype}, attributes say {shape} "
                                  f"{np.dtype(dtype)}")
        if attributes["format_version"] >= CHECKSUMMED_SINCE and not dataset.fletcher32:
            raise refusal.corrupt(f"dataset {name!r} has no Fletcher-32 checksums, which format_version "
                                  f"{attributes['format_version']} requires")
    if attributes["stream"] == streams.TOOLKIT:
        check_toolkit_states(handle, attributes, refusal)


def has_checksums(attributes):
    """True if the cache's chunks carry Fletcher-32 checksums (format version 2 and later)."""
    return attributes["format_version"] >= CHECKSUMMED_SINCE


def note_missing_checksums(attributes, refusal):
    """Log a warning that a version-1 cache cannot reveal damage inside its rows (no-op for later versions)."""
    if not has_checksums(attributes):
        LOG.warning("%s: format version 1 cache: its rows have no checksums, so damage inside them cannot be "
                    "detected; rebuild it to add them: %s", refusal.path, refusal.command)


def read_rows(handle, name, first, last, out, refusal):
    """Read rows ``first .. last-1`` of dataset ``name`` into ``out`` (an array of that many rows).

    Raises ``CorruptCache`` naming the dataset and the rows of the first chunk that fails its checksum
    or cannot be read.
    """
    with damaged_metadata(refusal):
        dataset = handle[name]
    try:
        dataset.read_direct(out, np.s_[first:last])
    except H5PY_ERRORS as error:
        raise refusal.corrupt(_damaged_chunk(dataset, name, first, last, error)) from None


def _damaged_chunk(dataset, name, first, last, error):
    """Why rows ``first..last-1`` of ``dataset`` failed to read (str), naming the first bad chunk's rows."""
    rows = dataset.chunks[0] if dataset.chunks else max(last - first, 1)
    for start in range(first // rows * rows, last, rows):
        stop = min(start + rows, dataset.shape[0])
        try:
            dataset[start:stop]
        except H5PY_ERRORS as chunk_error:
            error = chunk_error
            first, last = start, stop
            break
    reason = _first_line(error)
    if dataset.fletcher32 and "filter" in reason:
        return f"{name} rows {first}..{last - 1} fail their Fletcher-32 checksum (the file is damaged)"
    return f"{name} rows {first}..{last - 1} cannot be read ({reason})"


def check_toolkit_states(handle, attributes, refusal):
    """Raise ``CorruptCache`` unless a toolkit cache's batch settings and generator-state datasets fit."""
    batch, rows = attributes["batch_size"], attributes["chunk_rows"]
    if batch < 1 or attributes["save_every"] < 1 or attributes["preview_rows"] < 0:
        raise refusal.corrupt("attributes batch_size and save_every must be positive, preview_rows not negative")
    if rows % batch or attributes["nqueries"] % batch:
        raise refusal.corrupt(f"chunk_rows {rows} and nqueries {attributes['nqueries']} must be whole batches "
                              f"of {batch}")
    nchunks = -(-attributes["nqueries"] // rows)
    for name, dtype in streams.STATE_DATASETS.items():
        dataset = handle.get(f"{streams.STATE_GROUP}/{name}")
        shape = (nchunks, 624) if name == "keys" else (nchunks,)
        if not isinstance(dataset, h5py.Dataset) or dataset.shape != shape or dataset.dtype != dtype:
            raise refusal.corrupt(f"dataset '{streams.STATE_GROUP}/{name}' must be {shape} {np.dtype(dtype)}")


def check_complete(attributes, refusal):
    """Raise ``CorruptCache`` if a build stopped before writing every row."""
    if attributes["completed"] != attributes["nqueries"]:
        raise refusal.corrupt(f"incomplete: {attributes['completed']} of {attributes['nqueries']} rows written "
                              "(an interrupted build)")


def freshness_problem(attributes, *, sha256, nframes, nfeatures):
    """Why the cache does not match the given features (str), or None when it is fresh."""
    if attributes["features_sha256"] != sha256:
        return (f"stale: built from features with SHA-256 {attributes['features_sha256'][:16]}..., "
                f"the given features.bin has {sha256[:16]}...")
    if (attributes["nframes"], attributes["nfeatures"]) != (nframes, nfeatures):
        return (f"stale: built for {attributes['nframes']} frames x {attributes['nfeatures']} features, the "
                f"given features.bin has {nframes} x {nfeatures}")
    return streams.recipe_problem(attributes)


def check_noise_scale(attributes, features, refusal):
    """Raise ``CorruptCache`` unless the stored noise scale equals the one recomputed from ``features``."""
    if not np.array_equal(attributes["noise_scale"], streams.noise_scale(attributes, features)):
        raise refusal.corrupt("attribute 'noise_scale' differs from the one recomputed from features.bin")


def check_rows(queries, nearest, *, first, nframes, refusal):
    """Raise ``CorruptCache`` if ``queries`` holds NaN/Inf or ``nearest`` a frame outside 0..nframes-1."""
    if not np.isfinite(queries).all():
        bad = first + int(np.flatnonzero(~np.isfinite(queries).all(axis=1))[0])
        raise refusal.corrupt(f"queries row {bad} holds NaN or Inf")
    outside = (nearest < 0) | (nearest >= nframes)
    if outside.any():
        bad = int(np.flatnonzero(outside)[0])
        raise refusal.corrupt(f"nearest row {first + bad} is frame {int(nearest[bad])}, outside 0..{nframes - 1}")


def open_validated(path, *, features_path, require_fresh=True, refusal=None):
    """Open the complete cache at ``path`` and check it against ``features_path``; returns ``(handle,
    attributes, refusal, problem)``: problem is None when fresh, else why not (only if not ``require_fresh``).
    """
    refusal = Refusal(path, features_path=features_path) if refusal is None else refusal
    handle = open_hdf5(path, refusal)
    try:
        attributes = read_attributes(handle, refusal)
        check_datasets(handle, attributes, refusal)
        check_complete(attributes, refusal)
        features = formats.load_features(features_path).features
        problem = freshness_problem(attributes, sha256=features_sha256(features_path),
                                    nframes=features.shape[0], nfeatures=features.shape[1])
        if problem and require_fresh:
            raise refusal.stale(problem)
        if not problem:
            check_noise_scale(attributes, features, refusal)
    except BaseException:
        handle.close()
        raise
    return handle, attributes, refusal, problem
