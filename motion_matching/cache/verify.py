"""Inspecting and re-checking a cache: its metadata and freshness, and a sampled float64 brute-force audit."""
import dataclasses

import numpy as np

from motion_matching.cache.commands import DEFAULT_FEATURES
from motion_matching.cache.format import (
    Refusal,
    check_complete,
    check_datasets,
    check_rows,
    damaged_metadata,
    features_sha256,
    freshness_problem,
    has_checksums,
    note_missing_checksums,
    open_hdf5,
    open_validated,
    read_attributes,
    read_rows,
)
from motion_matching.neighbours import queries as query_stream
from motion_matching.toolkit import formats

# Exact backends may pick a frame whose float32-computed distance ties the best one; such a frame's true
# squared distance exceeds the minimum by at most a few float32 roundings of |q|^2 + |x|^2.
RELATIVE_TOLERANCE = 4e-6
SCAN_ROWS = 1 << 20


@dataclasses.dataclass
class VerifyReport:
    """What ``verify_cache`` checked; every check passed if it returns."""

    path: str
    nqueries: int
    rows_scanned: int          # rows checked for checksums, finite queries and in-range frames (all)
    rows_regenerated: int      # sampled rows whose queries regenerate bit-identically
    neighbours_checked: int    # sampled rows whose neighbour matches a float64 brute force
    worst_excess: float        # largest (stored - best) squared distance relative to |q|^2 + |x|^2
    checksums: bool = True     # False for a version-1 cache, whose rows have no checksums


def cache_info(path, *, features_path=None):
    """Metadata of the complete cache at ``path``: a dict of its root attributes plus ``fresh`` (True, False,
    or None when ``features_path`` is None), ``freshness`` (str, why it is stale, or "") and ``checksums``
    (True once every chunk passed its Fletcher-32 checksum; False for a version-1 cache, which has none).

    Raises ``CorruptCache`` naming the rows of a chunk that fails its checksum.
    """
    refusal = Refusal(path, features_path=features_path or DEFAULT_FEATURES)
    with open_hdf5(path, refusal) as handle:
        attributes = read_attributes(handle, refusal)
        check_datasets(handle, attributes, refusal)
        check_complete(attributes, refusal)
        with damaged_metadata(refusal):
            chunks = handle["queries"].chunks
        if has_checksums(attributes):
            _scan_rows(handle, attributes, refusal, check_values=False)
    info = dict(attributes, storage_chunk_rows=chunks[0] if chunks else None, fresh=None, freshness="",
                checksums=has_checksums(attributes))
    if features_path is not None:
        features = formats.load_features(features_path).features
        problem = freshness_problem(attributes, sha256=features_sha256(features_path),
                                    nframes=features.shape[0], nfeatures=features.shape[1])
        info.update(fresh=problem is None, freshness=problem or "")
    return info


def _scan_rows(handle, attributes, refusal, *, check_values=True):
    """Read every row ``SCAN_ROWS`` at a time, so each chunk's checksum is checked, and unless not
    ``check_values`` check the rows (finite queries, nearest frames in range); returns the row count."""
    nqueries, nfeatures = attributes["nqueries"], attributes["nfeatures"]
    for first in range(0, nqueries, SCAN_ROWS):
        last = min(first + SCAN_ROWS, nqueries)
        queries, nearest = np.empty((last - first, nfeatures), np.float32), np.empty(last - first, np.int32)
        read_rows(handle, "queries", first, last, queries, refusal)
        read_rows(handle, "nearest", first, last, nearest, refusal)
        if check_values:
            check_rows(queries, nearest, first=first, nframes=attributes["nframes"], refusal=refusal)
    return nqueries


def _check_regenerated(rows, stored, features, attributes, refusal):
    """Raise ``CorruptCache`` unless the stored queries of ``rows`` equal the stream's, bit for bit."""
    block = query_stream.QUERY_BLOCK
    for start in np.unique(rows // block) * block:
        stop = min(start + block, attributes["nqueries"])
        expected, _ = query_stream.generate_queries(features, seed=attributes["seed"], start=int(start),
                                                    stop=int(stop), scale=attributes["noise_scale"])
        inside = (rows >= start) & (rows < stop)
        same = expected[rows[inside] - start].view(np.uint32) == stored[inside].view(np.uint32)
        if not same.all():
            bad = int(rows[inside][np.flatnonzero(~same.all(axis=1))[0]])
            raise refusal.corrupt(f"queries row {bad} differs from query {bad} regenerated from seed "
                                  f"{attributes['seed']}")


def _check_neighbours(rows, queries, nearest, features, refusal, *, batch=256):
    """Raise ``CorruptCache`` unless each stored neighbour is as near as the float64 brute-force best;
    returns the worst relative excess (float)."""
    frames = features.astype(np.float64)
    squares = (frames ** 2).sum(axis=1)
    worst = 0.0
    for lo in range(0, len(rows), batch):
        q = queries[lo:lo + batch].astype(np.float64)
        distances = (q ** 2).sum(axis=1)[:, None] + squares[None, :] - 2.0 * q @ frames.T
        best = distances.argmin(axis=1)
        stored = ((q - frames[nearest[lo:lo + batch]]) ** 2).sum(axis=1)
        optimum = ((q - frames[best]) ** 2).sum(axis=1)
        excess = (stored - optimum) / ((q ** 2).sum(axis=1) + squares[nearest[lo:lo + batch]] + 1e-30)
        worst = max(worst, float(excess.max()))
        if (excess > RELATIVE_TOLERANCE).any():
            i = int(np.flatnonzero(excess > RELATIVE_TOLERANCE)[0])
            raise refusal.corrupt(f"nearest row {int(rows[lo + i])} is frame {int(nearest[lo + i])} at squared "
                                  f"distance {stored[i]:.9g}, but frame {int(best[i])} is at {optimum[i]:.9g} "
                                  "(float64 brute force)")
    return worst


def verify_cache(path, *, features_path="features.bin", sample=1000, seed=None):
    """Re-check the cache at ``path``: every structural and freshness check of ``open_cache``, every row
    (each chunk's checksum, finite queries, nearest frames in range), and for ``sample`` random rows (drawn
    with ``seed``) that the queries regenerate bit-identically and the neighbour is exact against a float64
    brute force.

    Returns a ``VerifyReport``; raises ``CorruptCache``, ``StaleCache`` or ``MissingFile`` naming the
    first problem.
    """
    handle, attributes, refusal, _ = open_validated(path, features_path=features_path)
    note_missing_checksums(attributes, refusal)
    with handle:
        features = formats.load_features(features_path).features
        scanned = _scan_rows(handle, attributes, refusal)
        rng = np.random.default_rng(seed)
        count = min(int(sample), attributes["nqueries"])
        rows = np.sort(rng.choice(attributes["nqueries"], size=count, replace=False)) if count else np.zeros(0, int)
        queries = handle["queries"][rows] if count else np.zeros((0, attributes["nfeatures"]), np.float32)
        nearest = handle["nearest"][rows].astype(np.int64) if count else np.zeros(0, np.int64)
    _check_regenerated(rows, queries, features, attributes, refusal)
    worst = _check_neighbours(rows, queries, nearest, features, refusal)
    return VerifyReport(str(path), attributes["nqueries"], scanned, count, count, worst,
                        has_checksums(attributes))
