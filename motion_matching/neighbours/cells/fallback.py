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
   searched again in float64, and if still tied, by direct differences (``exact.CentredFrames``); so
   the result is exact.

The cells and their axes come from ``common.py`` (as for the compiled search), the axis bound from
``axes.py`` and steps 1 to 3 from ``passes.py``, which read the index through the attributes that
``CellSearch`` documents.
"""
import concurrent.futures

import numpy as np

from motion_matching.neighbours.cells.axes import AxisBounds
from motion_matching.neighbours.cells.common import (
    ROUND_UP,
    available_cores,
    cell_count,
    checked_queries,
    checked_sources,
    kmeans,
)
from motion_matching.neighbours.cells.passes import CellPass, QueryBounds
from motion_matching.neighbours.exact import CentredFrames

QUERY_BLOCK = 32768
BOUND_ELEMENTS = 1 << 25  # a block has at most this many (cell, query) bounds: 128 MiB of float32


class CellSearch:
    """Exact nearest-frame search over k-means cells (the default backend ``cells``).

    ``threads`` (default: the cores available) blocks of ``QUERY_BLOCK`` queries (fewer when there
    are more than ``BOUND_ELEMENTS / QUERY_BLOCK`` cells) are searched at once,
    each with single-threaded BLAS, in worker threads (the GEMMs and numpy's array loops release the GIL;
    forked processes measured no faster and are unsafe beside the cache builder's query thread).

    The index, read by ``passes.QueryBounds`` and ``passes.CellPass`` (and by nothing else outside):
    ``frames`` (``exact.CentredFrames``), ``nfeatures`` n; per cell (C cells): ``starts`` (C + 1,) int64
    (its rows are ``starts[c]:starts[c + 1]``), ``centroids64`` (C, n) float64 centres less the mean,
    ``centroid_squares`` (C,) their squared norms, ``augmented_centroids`` (n + 2, C) float32
    ``[-2 c, |c|^2, 1]``, ``radii`` (C,) float32 and ``radii64`` (C,) float64 radii, ``outer`` (C,)
    bounds on ``|x - mean|`` over its frames, ``axis_bounds`` (``axes.AxisBounds``); per row (F rows,
    cell by cell): ``order`` (F,) int64 its frame, ``rows32`` (F, n + 1) float32 its ranking row.
    """

    def __init__(self, features, *, threads=None, ncells=None):
        self.frames = CentredFrames(features)
        self.nfeatures = self.frames.frames.shape[1]
        self.threads = max(1, int(threads or available_cores()))
        centroids, assignment = kmeans(self.frames.frames, ncells or cell_count(len(self.frames.frames)))
        self.order = np.argsort(assignment, kind="stable").astype(np.int64)
        self.starts = np.concatenate([[0], np.cumsum(np.bincount(assignment))]).astype(np.int64)
        cell_of_row = np.repeat(np.arange(len(self.starts) - 1), np.diff(self.starts))
        self.centroids = centroids  # (C, n) float32, minus the mean
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
        self.radii = (self.radii64 * ROUND_UP).astype(np.float32)  # rounded up in float32
        # bounds |x - mean| over each cell's frames
        self.outer = (np.sqrt(self.centroid_squares) + self.radii64) * ROUND_UP
        self.rows32 = np.empty((len(offsets), offsets.shape[1] + 1), np.float32)
        self.rows32[:, :-1] = -2.0 * offsets
        self.rows32[:, -1] = 2.0 * np.einsum("ij,ij->i", self.centroids64[cell_of_row], offsets) + lengths ** 2

    def nearest(self, queries, sources=None):
        """Indices (m,) int64 of the nearest frame of each query (m, n) float32.

        ``sources`` (m,) int64, the frame each query was made from, gives a first upper bound.
        """
        from threadpoolctl import threadpool_limits
        queries = checked_queries(queries, self.nfeatures)
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
        bounds = QueryBounds(self, queries, sources)
        result = CellPass(self, bounds).run()
        ambiguous = np.flatnonzero(result.ambiguous())  # a few percent: near-ties in float32
        if len(ambiguous):
            result.ranked[ambiguous] = self.frames.nearest_float64(queries[ambiguous])
        return result.ranked


def _run_workers(searcher, jobs, workers):
    """Results of ``searcher._search_block`` for every job, in order, ``workers`` threads at a time."""
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        return list(pool.map(lambda job: searcher._search_block(*job), jobs))
