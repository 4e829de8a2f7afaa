"""The partial file of a build, ``<out>.partial``: created with every attribute and both datasets at their
full size, resumed when it holds this build's rows, or restarted keeping the rows of the same stream.
"""
import contextlib
import datetime
import importlib.metadata
import logging
import os

import h5py
import numpy as np

from motion_matching.cache.format import (
    BUILD_KEYS,
    H5PY_ERRORS,
    Refusal,
    check_datasets,
    hdf5_reason,
    open_hdf5,
    read_attributes,
)
from motion_matching.cache.grow import copy_prefix, keeps_rows_of
from motion_matching.cache.rows import rows_for
from motion_matching.errors import CorruptCache, WriteFailed

LOG = logging.getLogger(__name__)
HDF5_LIBVER = ("v108", "v108")
"""HDF5 1.8 file format: checksummed superblock and object headers (the attributes live there), so
damaged metadata is refused by HDF5 instead of being decoded; 1.10's format would also checksum the
chunk index, but marks files open for writing in a way that a killed build could not resume."""
DISTRIBUTIONS = {"numpy": ("numpy",), "faiss": ("faiss-cpu", "faiss-gpu", "faiss"), "h5py": ("h5py",),
                 "torch": ("torch",), "sklearn": ("scikit-learn",), "motion_matching": ("motion-matching-projector",)}


def library_versions():
    """Versions (dict str -> str) of the libraries that shape the cache's contents, plus HDF5's."""
    versions = {"hdf5": h5py.version.hdf5_version}
    for name, distributions in DISTRIBUTIONS.items():
        versions[name] = "not installed"
        for distribution in distributions:
            try:
                versions[name] = importlib.metadata.version(distribution)
                break
            except importlib.metadata.PackageNotFoundError:
                continue
    return versions


def _create(path, wanted, features):
    """A new partial file at ``path`` with both datasets allocated and every attribute set; returns the handle.

    Early allocation gives the file its full size here, so a file-size limit or a full disk usually
    stops the build now, before any search; the unusable file is then removed (``WriteFailed``), as is
    the file a Ctrl-C stops half-made.
    """
    try:
        return _create_datasets(h5py.File(path, "w", libver=HDF5_LIBVER), wanted, features)
    except H5PY_ERRORS as error:
        _remove_quietly(path)
        raise WriteFailed(path, f"cannot create it ({hdf5_reason(error)})") from None
    except BaseException:
        _remove_quietly(path)
        raise


def _create_whole(partial, wanted, features):
    """``_create`` under the name ``<partial>.new``, renamed to ``partial`` once every attribute is set, so
    that a partial file, whenever it exists, has the ``completed`` count a rerun resumes from."""
    fresh = partial + ".new"
    try:
        _create(fresh, wanted, features).close()
    except WriteFailed as error:  # the user knows the partial file, not its scratch name
        raise WriteFailed(partial, error.problem) from None
    os.replace(fresh, partial)
    return h5py.File(partial, "r+")


def _remove_quietly(path):
    with contextlib.suppress(FileNotFoundError):
        os.remove(path)


def _create_datasets(handle, wanted, features):
    """Allocate both datasets of ``handle`` and set every attribute; returns the handle (closed on failure)."""
    try:
        return _fill_new_file(handle, wanted, features)
    except BaseException:
        close_quietly(handle)
        raise


def close_quietly(handle):
    """Close an HDF5 file whose writes failed: its final flush fails too, and that second error says nothing new."""
    with contextlib.suppress(*H5PY_ERRORS):
        handle.close()


def _fill_new_file(handle, wanted, features):
    rows = wanted["chunk_rows"]
    for name, shape, chunks, dtype in (("queries", (wanted["nqueries"], wanted["nfeatures"]),
                                        (rows, wanted["nfeatures"]), np.float32),
                                       ("nearest", (wanted["nqueries"],), (rows,), np.int32)):
        # Early allocation: writing rows later never changes HDF5 metadata, so a killed build leaves a
        # readable file whose ``completed`` attribute is the last value flushed. Fletcher-32 keeps every
        # chunk the same size, so this holds with the checksums too.
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_alloc_time(h5py.h5d.ALLOC_TIME_EARLY)
        handle.create_dataset(name, shape=shape, dtype=dtype, chunks=chunks, dcpl=dcpl, fill_time="never",
                              fletcher32=True, track_times=False)
    for name, value in wanted.items():
        handle.attrs[name] = np.int64(value) if isinstance(value, int) else value
    for name, version in library_versions().items():
        handle.attrs[f"version_{name}"] = version
    handle.attrs["created"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    rows_for(features, wanted).create(handle)
    handle.flush()
    return handle


def _resume_problem(path, wanted, features):
    """``(problem, completed)``: why the partial file at ``path`` cannot be resumed (str, or None if it
    can) and how many rows it holds (int)."""
    refusal = Refusal(path)  # no rebuild command: the problem goes into a log line, not an error
    try:
        with open_hdf5(path, refusal) as handle:
            attributes = read_attributes(handle, refusal)
            check_datasets(handle, attributes, refusal)
            changed = [key for key in BUILD_KEYS if attributes.get(key) != wanted.get(key)]
            if changed:
                return f"it was started with other arguments ({', '.join(changed)} differ)", 0
            completed, rows = attributes["completed"], attributes["chunk_rows"]
            if completed % rows and completed != attributes["nqueries"]:
                return f"its completed count {completed} is not a whole number of chunks", 0
            if completed:
                first = (completed - 1) // rows * rows
                expected = rows_for(features, wanted).regenerate(handle, first, completed)
                if not np.array_equal(handle["queries"][first:completed], expected):
                    return f"its last chunk (rows {first}..{completed - 1}) does not hold the expected queries", 0
            return None, completed
    except (*H5PY_ERRORS, CorruptCache) as error:
        return f"it cannot be read ({error.problem if isinstance(error, CorruptCache) else error})", 0


def open_partial(partial, wanted, features, *, grow_from=None):
    """Resume ``partial`` if it matches ``wanted``, else start a new one (seeded with the rows of the smaller
    cache ``grow_from``, if given); returns ``(handle, completed rows)``."""
    if os.path.exists(partial):
        problem, completed = _resume_problem(partial, wanted, features)
        if problem is None:
            LOG.info("%s: resuming an interrupted build at row %s of %s", partial, f"{completed:,}",
                     f"{wanted['nqueries']:,}")
            return h5py.File(partial, "r+"), completed
        held = _kept_rows(partial, wanted, features)
        if held:
            return _restart_keeping(partial, wanted, features, held)
        LOG.warning("%s: starting over: %s", partial, problem)
        os.remove(partial)
    handle = _create_whole(partial, wanted, features)
    if grow_from is None:
        return handle, 0
    try:
        copied = copy_prefix(grow_from, handle, wanted)
    except BaseException:
        handle.close()
        raise
    LOG.info("%s: growing it to %s queries: its first %s rows kept, the rest searched", grow_from,
             f"{wanted['nqueries']:,}", f"{copied:,}")
    return handle, copied


def _kept_rows(partial, wanted, features):
    """Completed rows (int) of the interrupted build at ``partial``, of other ``--queries`` or ``--chunk-rows``,
    that are rows of the build ``wanted`` (the same stream, its last chunk intact), or 0."""
    try:
        with h5py.File(partial, "r") as handle:
            attributes = read_attributes(handle, Refusal(partial))
    except (*H5PY_ERRORS, CorruptCache):
        return 0
    if not keeps_rows_of(attributes, wanted):
        return 0
    own = dict(wanted, nqueries=attributes["nqueries"], chunk_rows=attributes["chunk_rows"])
    problem, completed = _resume_problem(partial, own, features)
    whole = completed if completed >= wanted["nqueries"] else completed // wanted["chunk_rows"] * wanted["chunk_rows"]
    return 0 if problem or not whole else completed  # rows that fill no whole chunk: nothing to keep


def _restart_keeping(partial, wanted, features, held):
    """Replace ``partial`` by a new partial file of ``wanted`` holding its first ``held`` rows (whole chunks);
    returns ``(handle, rows kept)``. The old file stays until the new one is complete, so a kill loses nothing."""
    fresh = partial + ".new"
    handle = _create(fresh, wanted, features)
    try:
        copied = copy_prefix(partial, handle, wanted, held=held)
    except BaseException:
        close_quietly(handle)
        _remove_quietly(fresh)
        raise
    handle.close()
    os.replace(fresh, partial)
    LOG.info("%s: its interrupted build of other arguments searched %s rows of the same query stream: the first "
             "%s of them kept for this build of %s", partial, f"{held:,}", f"{copied:,}", f"{wanted['nqueries']:,}")
    return h5py.File(partial, "r+"), copied
