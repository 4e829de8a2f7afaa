"""``cells``: the fast exact default search, k-means cells with radius bounds and grouped GEMMs.

Frames are clustered into cells (faiss k-means) and stored cell by cell, relative to their cell's
centre ``c``; each cell keeps its radius ``r_c`` (largest frame distance to ``c``). For a block of queries:

1. one GEMM gives every query-centre distance ``d_qc``; ``d_qc - r_c`` bounds from below the distance
   to any frame of cell ``c``, and the query's source frame (when given) bounds the answer from above;
2. queries are grouped by their nearest centre and each group is ranked against its cell's frames with
   one float32 GEMM (``|q-c|^2 + |x-c|^2 - 2 (q-c).(x-c)``), which tightens each query's upper bound;
3. every other cell whose lower bound does not exceed a query's upper bound is visited the same way,
   cell by cell, with the queries that still need it;
4. a query whose best frame is not ahead of every other frame by more than the float32 error bounds is
   searched again in float64, and if still tied, by direct differences (``search_exact``); so the
   result is exact.
"""
import concurrent.futures
import os

import numpy as np

from motion_matching.neighbours.cells.axes import AxisBounds
from motion_matching.neighbours.cells.passes import CellPass
from motion_matching.neighbours.exact import UNIT_ROUNDOFF, CentredFrames

QUERY_BLOCK = 32768
BOUND_ELEMENTS = 1 << 25  # a block has at most this many (cell, query) bounds: 128 MiB of float32
KMEANS_ITERATIONS = 12
KMEANS_SAMPLE_PER_CELL = 64  # k-means trains on at most this many frames per cell
KMEANS_SEED = 1234
MIN_FRAMES_PER_CELL = 20  # k-means needs enough frames per cell to place centroids well


def cell_count(nframes):
    """Default number of cells for ``nframes`` frames: about ``4.5 sqrt(F)``, at most ``F / 40``."""
    return int(max(1, min(nframes // MIN_FRAMES_PER_CELL, round(4.5 * np.sqrt(nframes)))))


class CellSearch:
    """Exact nearest-frame search over k-means cells (the default backend ``cells``).

    ``threads`` (default: the cores available) blocks of ``QUERY_BLOCK`` queries (fewer when there
    are more than ``BOUND_ELEMENTS / QUERY_BLOCK`` cells) are searched at once,
    each with single-threaded BLAS, in worker threads (the GEMMs and numpy's array loops release the GIL;
    forked processes measured no faster and are unsafe beside the cache builder's query thread).
    """

    def __init__(self, features, *, threads=None, ncells=None):
        self.frames = CentredFrames(features)
        self.threads = max(1, int(threads or available_cores()))
        centroids, assignment = _kmeans(self.frames.frames, ncells or cell_count(len(self.frames.frames)))
        self.order = np.argsort(assignment, kind="stable").astype(np.int64)
        counts = np.bincount(assignment, minlength=len(centroids))
        self.starts = np.concatenate([[0], np.cumsum(counts[counts > 0])]).astype(np.int64)
        cell_of_row = np.repeat(np.arange(len(self.starts) - 1), np.diff(self.starts))
        self.centroids = np.ascontiguousarray(centroids[counts > 0])  # (C, n) float32, minus the mean
        self.centroids64 = self.centroids.astype(np.float64)
        self.centroid_squares = np.einsum("ij,ij->i", self.centroids64, self.centroids64)  # |c - mean|^2
        self.augmented_centroids = np.concatenate(  # (n + 2, C): -2 c, |c|^2, 1
            [-2.0 * self.centroids64.T, self.centroid_squares[None], np.ones((1, len(self.centroids)))]
        ).astype(np.float32)
        offsets = self.frames.exact[self.order] - (self.centroids64 + self.frames.mean)[cell_of_row]
        self._store_rows(offsets, cell_of_row)
        self.axis_bounds = AxisBounds(offsets, self.starts, self.centroids)

    def _store_rows(self, offsets, cell_of_row):
        """Radii and float32 rows from the frames' offsets (F, n) float64 from their cell's centre.

        The rows are ``[-2 (x - c), 2 (c - mean).(x - c) + |x - c|^2]``, so that ``[q - mean, 1] @ rows.T``
        plus ``|q - c|^2`` (computed in float64) is ``|q - x|^2`` with small float32 terms only.
        """
        lengths = np.sqrt(np.einsum("ij,ij->i", offsets, offsets))
        self.radii64 = np.maximum.reduceat(lengths, self.starts[:-1])
        self.radii = (self.radii64 * (1.0 + 1e-6)).astype(np.float32)  # rounded up in float32
        # bounds |x - mean| over each cell's frames
        self.outer = (np.sqrt(self.centroid_squares) + self.radii64) * (1.0 + 1e-6)
        self.rows32 = np.empty((len(offsets), offsets.shape[1] + 1), np.float32)
        self.rows32[:, :-1] = -2.0 * offsets
        self.rows32[:, -1] = 2.0 * np.einsum("ij,ij->i", self.centroids64[cell_of_row], offsets) + lengths ** 2

    def nearest(self, queries, sources=None):
        """Indices (m,) int64 of the nearest frame of each query (m, n) float32.

        ``sources`` (m,) int64, the frame each query was made from, gives a first upper bound.
        """
        from threadpoolctl import threadpool_limits
        queries = np.ascontiguousarray(queries, dtype=np.float32)
        nfeatures = self.frames.frames.shape[1]
        if queries.ndim != 2 or queries.shape[1] != nfeatures:
            raise ValueError(f"queries must have shape (m, {nfeatures}), got {queries.shape}")
        sources = checked_sources(sources, len(queries), len(self.order))
        step = min(QUERY_BLOCK, max(1024, BOUND_ELEMENTS // len(self.radii)))
        blocks = [slice(start, start + step) for start in range(0, len(queries), step)]
        jobs = [(queries[block], None if sources is None else sources[block]) for block in blocks]
        with threadpool_limits(limits=1, user_api="blas"):  # workers over blocks beat threaded BLAS
            if self.threads == 1 or len(jobs) < 2:
                parts = [self._search_block(*job) for job in jobs]
            else:
                parts = _run_workers(self, jobs, min(self.threads, len(jobs)))
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)

    def _search_block(self, queries, sources):
        """Exact nearest frames (m,) int64 of one block of queries (m, n) float32."""
        bounds = _Bounds(self, queries, sources)
        result = CellPass(self, bounds).run()
        ambiguous = np.flatnonzero(result.ambiguous())  # a few percent: near-ties in float32
        if len(ambiguous):
            result.ranked[ambiguous] = self.frames.nearest_float64(queries[ambiguous])
        return result.ranked


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
    """CPU cores this process may run on (int)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def _run_workers(searcher, jobs, workers):
    """Results of ``searcher._search_block`` for every job, in order, ``workers`` threads at a time."""
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        return list(pool.map(lambda job: searcher._search_block(*job), jobs))


def _kmeans(frames, ncells):
    """Centroids (C, n) float32 and each frame's cell (F,) int64, C <= ncells (faiss k-means)."""
    ncells = max(1, min(int(ncells), len(frames) // MIN_FRAMES_PER_CELL))
    if ncells == 1:
        return frames.mean(axis=0, keepdims=True).astype(np.float32), np.zeros(len(frames), np.int64)
    import faiss
    kmeans = faiss.Kmeans(frames.shape[1], ncells, niter=KMEANS_ITERATIONS, seed=KMEANS_SEED,
                          verbose=False, max_points_per_centroid=KMEANS_SAMPLE_PER_CELL,
                          min_points_per_centroid=MIN_FRAMES_PER_CELL)
    kmeans.train(frames)
    _, assignment = kmeans.index.search(frames, 1)
    return np.ascontiguousarray(kmeans.centroids, dtype=np.float32), assignment[:, 0].astype(np.int64)


class _Bounds:
    """Per-block bounds and query forms.

    ``lower`` (C, m) float32: each query's distance to each cell's centre minus the cell's radius, a
    lower bound on its distance to the cell's frames up to the float32 error handled by ``reach``
    (+inf at the query's ``nearest_cell`` (m,) int64, visited first, when there are no sources, else
    ``nearest_cell`` is None); ``upper`` (m,) float32
    bounds on the distance to the nearest frame, tightened by the passes through ``tighten``, and
    ``reach`` (m,) float32 the matching threshold on ``lower``. Queries as ``exact`` (m, n) float64,
    ``augmented`` (m, n + 1) float32 ``[q - mean, 1]`` and ``centred_norms`` (m,) float64 ``|q - mean|``.
    """

    def __init__(self, index, queries, sources):
        self.index, self.queries = index, queries
        self.exact = queries.astype(np.float64)
        centred, self.centred_norms = index.frames.centre(queries)
        augmented = np.empty((len(queries), centred.shape[1] + 2), np.float32)
        augmented[:, :-2], augmented[:, -2], augmented[:, -1] = centred, 1.0, self.centred_norms ** 2
        self.augmented = np.ascontiguousarray(augmented[:, :-1])
        squared = index.augmented_centroids.T @ augmented.T  # (C, m): |q|^2 + |c|^2 - 2 q.c
        # without sources, the nearest centre's cell is visited first to get upper bounds; with them,
        # the source frame's distance is bound enough and every cell is visited in turn (measured faster)
        self.nearest_cell = _argmin_columns(squared) if sources is None else None
        np.maximum(squared, 0.0, out=squared)
        lower = np.sqrt(squared, out=squared)
        lower -= index.radii[:, None]
        if self.nearest_cell is not None:
            lower[self.nearest_cell, np.arange(len(queries))] = np.inf
        self.lower = lower
        squared_error = index.frames.tolerance(self.centred_norms)  # of ``squared`` above
        self.root_error, self.half_error = np.sqrt(squared_error), squared_error / 2.0
        self.rounding = 4.0 * UNIT_ROUNDOFF * (self.centred_norms + index.frames.radius)
        self.upper = np.full(len(queries), np.inf, np.float32)
        self.reach = np.full(len(queries), np.inf, np.float32)
        if sources is not None:  # the exact float64 distance to the source frame
            offsets = self.exact - index.frames.exact[sources]
            own = np.sqrt(np.einsum("ij,ij->i", offsets, offsets)) * (1.0 + 1e-6)
            self.tighten(np.arange(len(queries)), own)

    def tighten(self, where, distances):
        """Lower ``upper`` of queries ``where`` (k,) to ``distances`` (k,) float64 where smaller.

        ``reach`` follows: with ``D^2`` within ``e`` of the true squared distance to a centre, a cell
        can be skipped when ``(upper + r + s)^2 - e >= (upper + r)^2``, so ``s = e / (2 upper)`` (or
        ``sqrt(e)``) will do, plus a few roundoffs.
        """
        upper = np.minimum(self.upper[where], distances)
        self.upper[where] = upper
        with np.errstate(divide="ignore"):
            slack = np.minimum(self.root_error[where], self.half_error[where] / upper)
        self.reach[where] = upper + slack + self.rounding[where]


def _argmin_columns(matrix):
    """Row index (m,) int64 of the smallest entry of each column of ``matrix`` (C, m), any if tied.

    ``argmin(axis=0)`` would copy the transposed matrix; a column minimum and one comparison do not.
    """
    rows, columns = np.nonzero(matrix == matrix.min(axis=0))
    result = np.zeros(matrix.shape[1], np.int64)
    result[columns] = rows
    return result
