"""What both ``cells`` searches share: the k-means cells, the per-cell principal axes and the input checks.

The compiled search (``compiled.py``, C loop ``cellsearch.c``) and its numpy fallback (``fallback.py``)
build their cells with ``kmeans`` (``cell_count`` cells by default) and each cell's axes with
``principal_axes``; both check queries with ``checked_queries`` and sources with ``checked_sources``.
The float32 unit roundoff both use is ``exact.UNIT_ROUNDOFF`` (the C loop derives its own from
``FLT_EPSILON`` and exposes it as ``_cellsearch.ROUNDOFF``), rounded up by ``ROUND_UP``; a test pins
these to the C loop's.
"""

import numpy as np

from motion_matching import threads

KMEANS_ITERATIONS = 16
KMEANS_SAMPLE_PER_CELL = 64  # k-means trains on at most this many frames per cell
KMEANS_SEED = 1234
MIN_FRAMES_PER_CELL = 8
CELLS_PER_ROOT_FRAME = 4.5  # default cells: about 4.5 sqrt(F)
ROUND_UP = 1.0 + 1e-6  # a factor above a float32 rounding (relative 2^-24); cellsearch.h's CELLSEARCH_ROUND_UP


def cell_count(nframes):
    """Default number of cells (int) for ``nframes`` frames: about ``4.5 sqrt(F)``, at most ``F / 8``."""
    return int(max(1, min(nframes // MIN_FRAMES_PER_CELL, round(CELLS_PER_ROOT_FRAME * np.sqrt(nframes)))))


def kmeans(frames, ncells):
    """Centroids (C, n) float32 and each frame's cell (F,) int64 for ``frames`` (F, n) float32, with
    C <= ``ncells`` (and <= F / ``MIN_FRAMES_PER_CELL``) and every cell non-empty (faiss k-means)."""
    ncells = max(1, min(int(ncells), len(frames) // MIN_FRAMES_PER_CELL))
    if ncells == 1:
        centre = frames.mean(axis=0, keepdims=True, dtype=np.float64).astype(np.float32)
        return centre, np.zeros(len(frames), np.int64)
    import faiss
    kmeans = faiss.Kmeans(frames.shape[1], ncells, niter=KMEANS_ITERATIONS, seed=KMEANS_SEED, verbose=False,
                          max_points_per_centroid=KMEANS_SAMPLE_PER_CELL, min_points_per_centroid=1)
    kmeans.train(np.ascontiguousarray(frames, dtype=np.float32))
    _, assignment = kmeans.index.search(np.ascontiguousarray(frames, dtype=np.float32), 1)
    counts = np.bincount(assignment[:, 0], minlength=ncells)
    renumber = np.cumsum(counts > 0) - 1  # drop empty cells
    return (np.ascontiguousarray(kmeans.centroids[counts > 0], dtype=np.float32),
            renumber[assignment[:, 0]].astype(np.int64))


def principal_axes(offsets, count):
    """One cell's first ``count`` principal axes, from its frames' ``offsets`` (k, n) float64 to its centre.

    Returns the axes (count, n) float64 holding float32 values (rounded as they are stored), the
    offsets along them (k, count) float64 and each offset's distance from their span (k,) float64.
    """
    axes = np.linalg.svd(offsets, full_matrices=True)[2][:count].astype(np.float32).astype(np.float64)
    along = offsets @ axes.T
    rest = offsets - along @ axes
    return axes, along, np.sqrt(np.einsum("ij,ij->i", rest, rest))


def rounded_outwards(low, high):
    """The intervals ``[low, high]`` (any shape, float64) as float32 arrays that contain them."""
    return (np.nextafter(low.astype(np.float32), np.float32(-np.inf)),
            np.nextafter(high.astype(np.float32), np.float32(np.inf)))


def checked_queries(queries, nfeatures):
    """``queries`` as a contiguous (m, nfeatures) float32 array, else ValueError naming the expected shape."""
    queries = np.ascontiguousarray(queries, dtype=np.float32)
    if queries.ndim != 2 or queries.shape[1] != nfeatures:
        raise ValueError(f"queries must have shape (m, {nfeatures}), got {queries.shape}")
    return queries


def checked_sources(sources, nqueries, nframes):
    """``sources`` as (nqueries,) int64 frame indices below ``nframes`` (None stays None), else ValueError."""
    if sources is None:
        return None
    sources = np.asarray(sources, dtype=np.int64)
    if sources.shape != (nqueries,):
        raise ValueError(f"sources must have shape ({nqueries},), got {sources.shape}")
    if len(sources) and not 0 <= sources.min() <= sources.max() < nframes:
        raise ValueError(f"sources must be frame indices in 0..{nframes - 1}")
    return sources


def available_cores():
    """CPU cores this process may run on (int): its affinity, fewer under a cgroup CPU quota."""
    return threads.available_cores()
