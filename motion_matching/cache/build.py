"""Building the cache: stream queries, search their nearest frames, write row chunks to ``<out>.partial``.

The partial file records the build's arguments and a ``completed`` row count after every chunk, so a
killed build resumes from its last chunk; the file takes its final name only when every row is written.
"""
import concurrent.futures
import dataclasses
import datetime
import importlib.metadata
import logging
import os
import shutil
import time

import h5py
import numpy as np

from motion_matching.cache import streams
from motion_matching.cache.commands import DEFAULT_FEATURES
from motion_matching.cache.format import (
    BUILD_KEYS,
    DEFAULT_CHUNK_ROWS,
    DEFAULT_NQUERIES,
    DEFAULT_SEED,
    FORMAT,
    FORMAT_VERSION,
    Refusal,
    check_datasets,
    features_sha256,
    open_hdf5,
    open_validated,
    read_attributes,
)
from motion_matching.cache.lock import exclusive_lock
from motion_matching.cache.rows import chunk_rows_for, rows_for
from motion_matching.errors import CorruptCache, InvalidFile, MissingFile, MotionMatchingError
from motion_matching.neighbours.search import DEFAULT_BACKEND, make_searcher
from motion_matching.toolkit import formats, recipe

LOG = logging.getLogger(__name__)
DISTRIBUTIONS = {"numpy": ("numpy",), "faiss": ("faiss-cpu", "faiss-gpu", "faiss"), "h5py": ("h5py",),
                 "torch": ("torch",), "sklearn": ("scikit-learn",), "motion_matching": ("motion-matching-projector",)}


@dataclasses.dataclass
class BuildResult:
    """What ``build_cache`` did: status is "built", "up-to-date" or "interrupted" (``stop_after``)."""

    path: str
    status: str
    nqueries: int
    resumed_from: int = 0   # rows found in the partial file when this call started
    rows_written: int = 0   # rows searched and written by this call
    seconds: float = 0.0    # wall time of this call


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


def wanted_attributes(features, *, sha256, nqueries, seed, chunk_rows, backend, toolkit=None):
    """The root attributes (dict) of a new cache of ``features`` (F, n) float32, with ``completed`` 0.

    ``toolkit`` (dict: batch_size, save_every, preview_rows) asks for the toolkit script's stream.
    """
    batch_size = toolkit["batch_size"] if toolkit else None
    wanted = {"format": FORMAT, "format_version": FORMAT_VERSION, "features_sha256": sha256,
              "nframes": features.shape[0], "nfeatures": features.shape[1], "nqueries": nqueries, "seed": seed,
              "chunk_rows": chunk_rows_for(chunk_rows, nqueries, batch_size), "completed": 0, "backend": backend}
    if toolkit:
        wanted.update(streams.stream_attributes(streams.TOOLKIT, features, **toolkit))
    else:
        wanted.update(streams.stream_attributes(streams.DEFAULT, features))
    return wanted


def _create(path, wanted, features):
    """A new partial file at ``path`` with both datasets allocated and every attribute set; returns the handle."""
    handle = h5py.File(path, "w")
    rows = wanted["chunk_rows"]
    for name, shape, chunks, dtype in (("queries", (wanted["nqueries"], wanted["nfeatures"]),
                                        (rows, wanted["nfeatures"]), np.float32),
                                       ("nearest", (wanted["nqueries"],), (rows,), np.int32)):
        # Early allocation: writing rows later never changes HDF5 metadata, so a killed build leaves a
        # readable file whose ``completed`` attribute is the last value flushed.
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_alloc_time(h5py.h5d.ALLOC_TIME_EARLY)
        handle.create_dataset(name, shape=shape, dtype=dtype, chunks=chunks, dcpl=dcpl, fill_time="never",
                              track_times=False)
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
    except (OSError, CorruptCache) as error:
        return f"it cannot be read ({error.problem if isinstance(error, CorruptCache) else error})", 0


def _open_partial(partial, wanted, features):
    """Resume ``partial`` if it matches ``wanted``, else start a new one; returns ``(handle, completed rows)``."""
    if os.path.exists(partial):
        problem, completed = _resume_problem(partial, wanted, features)
        if problem is None:
            LOG.info("%s: resuming an interrupted build at row %s of %s", partial, f"{completed:,}",
                     f"{wanted['nqueries']:,}")
            return h5py.File(partial, "r+"), completed
        LOG.warning("%s: starting over: %s", partial, problem)
        os.remove(partial)
    return _create(partial, wanted, features), 0


def _commit(handle, first, queries, nearest):
    """Write rows ``first..`` and then advance ``completed``, flushing in between so the count never runs ahead."""
    handle["queries"][first:first + len(queries)] = queries
    handle["nearest"][first:first + len(queries)] = nearest.astype(np.int32)
    handle.flush()
    handle.attrs["completed"] = np.int64(first + len(queries))
    handle.flush()


def _fill(handle, features, searcher, wanted, start, *, progress, stop_after):
    """Search and write rows ``start..nqueries`` chunk by chunk, generating the next chunk's queries in a thread
    while the current one is searched; returns the completed row count."""
    nqueries, rows = wanted["nqueries"], wanted["chunk_rows"]
    firsts = list(range(start, nqueries, rows))
    source = rows_for(features, wanted)
    source.start(handle, start)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:  # one worker: chunks drawn in order
        def submit(first):
            return pool.submit(source.rows, first, min(first + rows, nqueries))
        pending = submit(firsts[0]) if firsts else None
        for index, first in enumerate(firsts):
            queries, sources, state = pending.result()
            pending = submit(firsts[index + 1]) if index + 1 < len(firsts) else None
            nearest = searcher.nearest(queries, sources)
            source.record(handle, first + len(queries), state)  # the next chunk's start: flushed by the commit
            _commit(handle, first, queries, nearest)
            if progress is not None:
                progress(first + len(queries), nqueries)
            if stop_after is not None and index + 1 >= stop_after and first + len(queries) < nqueries:
                if pending is not None:
                    pending.cancel()
                return first + len(queries)
    return nqueries


def _existing_is_current(out, features_path, wanted, *, force, toolkit_command=None):
    """True if ``out`` already is this cache; raise if it is another or damaged (unless ``force``)."""
    if not os.path.exists(out):
        return False
    refusal = Refusal(out, features_path=features_path, nqueries=wanted["nqueries"], seed=wanted["seed"],
                      toolkit=toolkit_command)
    try:
        handle, attributes, _, problem = open_validated(out, features_path=features_path, require_fresh=False,
                                                        refusal=refusal)
    except CorruptCache as error:
        if not force:
            raise CorruptCache(out, f"{error.problem}; not replaced without --force", command=error.command) from None
        LOG.warning("%s: replacing it: %s", out, error.problem)
        return False
    handle.close()
    if problem is None and (attributes["nqueries"], attributes["seed"]) != (wanted["nqueries"], wanted["seed"]):
        problem = (f"holds {attributes['nqueries']:,} queries of seed {attributes['seed']}, not "
                   f"{wanted['nqueries']:,} of seed {wanted['seed']}")
    if problem is None:
        problem = streams.stream_problem(attributes, wanted)
    if problem is None:
        return True
    if not force:
        raise refusal.stale(f"{problem}; not replaced without --force")
    LOG.warning("%s: replacing it: %s", out, problem)
    return False


def _check_space(partial, wanted):
    """Raise ``MotionMatchingError`` if the folder of ``partial`` cannot hold the rows still to write."""
    needed = wanted["nqueries"] * (4 * wanted["nfeatures"] + 4)
    if os.path.exists(partial):
        needed -= os.path.getsize(partial)
    folder = os.path.dirname(os.path.abspath(partial))
    free = shutil.disk_usage(folder).free
    if needed > free:
        raise MotionMatchingError(partial, f"needs {needed / 1e6:,.0f} MB more but {folder} has {free / 1e6:,.0f} MB "
                                           "free; free some space or choose another --out")


def _write_partial(partial, features, searcher, wanted, *, progress, stop_after):
    """Create or resume ``partial`` and fill it; returns ``(completed rows, rows found on resuming)``."""
    _check_space(partial, wanted)
    handle, resumed = _open_partial(partial, wanted, features)
    try:
        if progress is not None:
            progress(resumed, wanted["nqueries"])
        completed = _fill(handle, features, searcher, wanted, resumed, progress=progress, stop_after=stop_after)
    finally:
        handle.close()
    return completed, resumed


def _publish(partial, out):
    """fsync ``partial`` and rename it to ``out`` atomically."""
    descriptor = os.open(partial, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
    os.replace(partial, out)


def build_cache(features_path=DEFAULT_FEATURES, *, out="projector_cache.h5", nqueries=DEFAULT_NQUERIES,
                seed=DEFAULT_SEED, backend=DEFAULT_BACKEND, threads=None, device="cpu",
                chunk_rows=DEFAULT_CHUNK_ROWS, force=False, progress=None, stop_after=None,
                exact_toolkit=False, database_path="database.bin", batch_size=recipe.BATCH_SIZE,
                save_every=recipe.SAVE_EVERY):
    """Build (or resume, or confirm) the cache of ``nqueries`` queries of seed ``seed`` at ``out``.

    ``exact_toolkit`` stores the toolkit script's own stream for ``batch_size`` and ``save_every``
    (``database_path`` gives its preview length) instead of the default one.
    ``progress(done_rows, total_rows)`` is called before the first chunk and after each one;
    ``stop_after`` (int) stops after that many chunks as if interrupted. An existing ``out`` built from
    other features, another nqueries or seed, or damaged, raises ``StaleCache``/``CorruptCache`` unless
    ``force``. Returns a ``BuildResult``. Raises ``CacheLocked`` if another build holds ``<out>.lock``.
    """
    started = time.monotonic()
    out, partial = os.fspath(out), os.fspath(out) + ".partial"
    if nqueries < 1 or chunk_rows < 1:
        raise ValueError("nqueries and chunk_rows must be positive")
    folder = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(folder):
        raise MissingFile(out, f"its folder {folder} does not exist")
    features = formats.load_features(features_path).features
    if features.shape[0] >= 2 ** 31:
        raise InvalidFile(features_path, f"{features.shape[0]} frames do not fit the cache's int32 indices")
    toolkit = None
    if exact_toolkit:
        toolkit = streams.build_settings(database_path, nqueries=nqueries, batch_size=batch_size, save_every=save_every)
    wanted = wanted_attributes(features, sha256=features_sha256(features_path), nqueries=nqueries, seed=seed,
                               chunk_rows=chunk_rows, backend=backend, toolkit=toolkit)
    command = dict(toolkit, database_path=database_path) if toolkit else None
    with exclusive_lock(out):
        if _existing_is_current(out, features_path, wanted, force=force, toolkit_command=command):
            return BuildResult(out, "up-to-date", nqueries, seconds=time.monotonic() - started)
        searcher = make_searcher(features, backend=backend, threads=threads, device=device)
        try:
            completed, resumed = _write_partial(partial, features, searcher, wanted, progress=progress,
                                                stop_after=stop_after)
            if completed == nqueries:
                _publish(partial, out)
        except OSError as error:  # a full disk, a vanished folder: keep what was written for a resume
            raise MotionMatchingError(partial, f"cannot write it ({error}); fix that and run the same command "
                                               "again to resume") from None
    status = "built" if completed == nqueries else "interrupted"
    return BuildResult(out, status, nqueries, resumed, completed - resumed, time.monotonic() - started)

