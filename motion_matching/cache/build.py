"""Building the cache: stream queries, search their nearest frames, write row chunks to ``<out>.partial``.

The partial file records the build's arguments and a ``completed`` row count after every chunk, so a
killed build resumes from its last chunk; the file takes its final name only when every row is written.
"""
import concurrent.futures
import dataclasses
import logging
import os
import shutil
import time

import h5py
import numpy as np

from motion_matching.cache import streams
from motion_matching.cache.commands import DEFAULT_FEATURES
from motion_matching.cache.format import (
    DEFAULT_CHUNK_ROWS,
    DEFAULT_NQUERIES,
    DEFAULT_SEED,
    FORMAT,
    FORMAT_VERSION,
    H5PY_ERRORS,
    Refusal,
    features_sha256,
    hdf5_reason,
    open_validated,
)
from motion_matching.cache.grow import same_stream
from motion_matching.cache.lock import exclusive_lock
from motion_matching.cache.partial import close_quietly, open_partial
from motion_matching.cache.rows import chunk_rows_for, rows_for
from motion_matching.cache.targets import check_out
from motion_matching.errors import CorruptCache, InvalidFile, MissingFile, MotionMatchingError, StaleCache, WriteFailed
from motion_matching.neighbours.search import DEFAULT_BACKEND, check_backend, make_searcher
from motion_matching.threads import Sample, logged
from motion_matching.toolkit import formats, recipe

LOG = logging.getLogger(__name__)


@dataclasses.dataclass
class BuildResult:
    """What ``build_cache`` did: status is "built", "up-to-date" or "interrupted" (``stop_after``)."""

    path: str
    status: str
    nqueries: int
    resumed_from: int = 0   # rows found in the partial file when this call started
    rows_written: int = 0   # rows searched and written by this call
    seconds: float = 0.0    # wall time of this call
    search_seconds: float = 0.0  # from the first progress call to the last chunk: the bar's seconds


class BuildInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped a build; ``result`` (a ``BuildResult``, status "interrupted") and ``partial`` (the
    file kept, whose rows the same call resumes from) say what was kept."""

    def __init__(self, result, partial):
        super().__init__(f"interrupted with {result.resumed_from + result.rows_written} rows kept in {partial}")
        self.result, self.partial = result, partial


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


def _existing_state(out, features_path, wanted, *, force, toolkit_command=None):
    """What ``out`` is to this build: "absent", "current" (it holds at least the queries wanted), "smaller"
    (a prefix of them: grow it) or "replace" (another cache, with ``force``); raise if another or damaged."""
    if not os.path.exists(out):
        return "absent"
    refusal = Refusal(out, features_path=features_path, nqueries=wanted["nqueries"], seed=wanted["seed"],
                      toolkit=toolkit_command)
    try:
        handle, attributes, _, problem = open_validated(out, features_path=features_path, require_fresh=False,
                                                        refusal=refusal)
    except CorruptCache as error:
        if not force:
            raise CorruptCache(out, f"{error.problem}; not replaced without --force", command=error.command) from None
        LOG.warning("%s: replacing it: %s", out, error.problem)
        return "replace"
    handle.close()
    option = None
    if problem is None:
        problem = streams.stream_problem(attributes, wanted)
    if problem is None and attributes["seed"] != wanted["seed"]:
        problem = f"holds {attributes['nqueries']:,} queries of seed {attributes['seed']}, not of seed {wanted['seed']}"
        option = f"--seed {attributes['seed']} to use it"
    if problem is None and attributes["nqueries"] >= wanted["nqueries"]:
        return "current"  # every backend finds the exact neighbours: the cache's prefix serves
    if problem is None and not same_stream(attributes, wanted):
        problem = f"holds {attributes['nqueries']:,} queries searched by the {attributes['backend']} backend"
        option = f"--backend {attributes['backend']} to grow it to {wanted['nqueries']:,}"
    if problem is None and streams.toolkit_settings(attributes) is not None:
        # its rows follow from the generator state, not from the row index: rebuilt, not grown
        problem = f"holds {attributes['nqueries']:,} queries of the toolkit stream; a toolkit-stream cache is not grown"
    if problem is None:
        return "smaller"
    if not force:
        raise StaleCache(out, f"{problem}; not replaced without --force", command=refusal.command, option=option)
    LOG.warning("%s: replacing it: %s", out, problem)
    return "replace"


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


def _write_partial(partial, features, searcher, wanted, *, progress, stop_after, grow_from=None):
    """Create or resume ``partial`` and fill it; returns ``(completed rows, rows found on resuming, seconds from
    the first progress report to the last)``: a bar's seconds, so the final rate is the bar's."""
    _check_space(partial, wanted)
    handle, resumed = open_partial(partial, wanted, features, grow_from=grow_from)
    reported = []

    def report(done, total):
        reported.append(time.monotonic())
        if progress is not None:
            progress(done, total)
    try:
        report(resumed, wanted["nqueries"])
        completed = _fill(handle, features, searcher, wanted, resumed, progress=report, stop_after=stop_after)
    except KeyboardInterrupt as stop:
        stop.kept_rows = (int(handle.attrs["completed"]), resumed)  # rows written stay: a resume starts there
        close_quietly(handle)
        raise
    except BaseException:
        close_quietly(handle)
        raise
    handle.close()
    return completed, resumed, reported[-1] - reported[0]


def _held_queries(out):
    with h5py.File(out, "r") as handle:
        return int(handle.attrs["nqueries"])


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
    ``stop_after`` (int) stops after that many chunks as if interrupted. An existing ``out`` of the same
    features, seed and stream is grown when it holds fewer queries and left alone (its prefix serves) when
    it holds as many or more (``result.nqueries`` then says how many); one built from other features or
    another seed, or damaged, raises ``StaleCache``/``CorruptCache`` unless ``force``. Returns a
    ``BuildResult``. Raises ``CacheLocked`` if another build holds ``<out>.lock``, ``BuildInterrupted``
    on Ctrl-C (the partial file kept).
    """
    started, sample = time.monotonic(), Sample()  # other processes' load, measured during setup
    out, partial = os.fspath(out), os.fspath(out) + ".partial"
    if nqueries < 1 or chunk_rows < 1:
        raise ValueError("nqueries and chunk_rows must be positive")
    folder = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(folder):
        raise MissingFile(out, f"its folder {folder} does not exist")
    check_out(out, features_path=features_path)  # before the lock: not even a .lock beside a user's file
    check_backend(backend, device=device)  # before anything is read: a bad option is refused at once
    LOG.info("reading %s", features_path)  # setup takes seconds on a large database: say what it is doing
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
        state = _existing_state(out, features_path, wanted, force=force, toolkit_command=command)
        if state == "current":
            return BuildResult(out, "up-to-date", _held_queries(out), seconds=time.monotonic() - started)
        LOG.info("building the %s search over %s frames", backend, f"{features.shape[0]:,}")
        pooled = backend.startswith("cells")  # a pool of blocks, no barriers: more threads get more of busy cores
        threads = logged(sample.choice(threads, free_only=not pooled), "searching").threads
        searcher = make_searcher(features, backend=backend, threads=threads, device=device)
        try:
            completed, resumed, searched = _write_partial(partial, features, searcher, wanted, progress=progress,
                                                          stop_after=stop_after,
                                                          grow_from=out if state == "smaller" else None)
            if completed == nqueries:
                _publish(partial, out)
        except H5PY_ERRORS as error:  # a full disk, a vanished folder: keep what was written for a resume
            raise WriteFailed(partial, f"cannot write it ({hdf5_reason(error)}); fix that and run the same "
                                       "command again to resume") from None
        except KeyboardInterrupt as stop:
            kept, resumed = getattr(stop, "kept_rows", (0, 0))
            result = BuildResult(out, "interrupted", nqueries, resumed, kept - resumed, time.monotonic() - started)
            raise BuildInterrupted(result, partial) from None
    status = "built" if completed == nqueries else "interrupted"
    return BuildResult(out, status, nqueries, resumed, completed - resumed, time.monotonic() - started, searched)

