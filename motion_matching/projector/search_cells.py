"""``cells``: the fast exact default search, k-means cells with radius bounds and grouped GEMMs.

Frames are clustered into cells (faiss k-means) and stored cell by cell; each cell keeps its centroid
``c`` and radius ``r_c`` (largest frame distance to ``c``). For a block of queries:

1. one GEMM gives every query-centroid distance ``d_qc``; ``d_qc - r_c`` bounds from below the distance
   to any frame of cell ``c``, and the query's source frame (when given) bounds the answer from above;
2. queries are grouped by their nearest centroid, and each group is ranked against its cell's frames
   with one float32 GEMM (``|x|^2 - 2 q.x``), which tightens each query's upper bound;
3. every other cell whose lower bound does not exceed a query's upper bound is visited the same way,
   cell by cell, with the queries that still need it;
4. queries whose best and second-best values are within the float32 error bound are settled in float64
   by direct differences over their candidate cells (``search_exact.settle``), so the result is exact.
"""
import concurrent.futures

import numpy as np

from .search_exact import UNIT_ROUNDOFF, CentredFrames, settle

QUERY_BLOCK = 16384
KMEANS_ITERATIONS = 16
KMEANS_SEED = 1234
MIN_FRAMES_PER_CELL = 40  # faiss k-means wants at least 39 training points per centroid


def cell_count(nframes):
    """Default number of cells for ``nframes`` frames: about ``2 sqrt(F)``, at most ``F / 40``."""
    return int(max(1, min(nframes // MIN_FRAMES_PER_CELL, round(2.0 * np.sqrt(nframes)))))


class CellSearch:
    """Exact nearest-frame search over k-means cells (the default backend ``cells``).

    ``threads`` query blocks are searched at once (numpy releases the GIL inside GEMMs).
    """

    def __init__(self, features, *, threads=None, ncells=None):
        self.frames = CentredFrames(features)
        self.threads = max(1, int(threads or 1))
        centroids, assignment = _kmeans(self.frames.frames, ncells or cell_count(len(self.frames.frames)))
        self.order = np.argsort(assignment, kind="stable").astype(np.int64)
        counts = np.bincount(assignment, minlength=len(centroids))
        keep = counts > 0
        self.starts = np.concatenate([[0], np.cumsum(counts[keep])]).astype(np.int64)
        self.centroids = np.ascontiguousarray(centroids[keep])
        self.centroid_norms = np.einsum("ij,ij->i", self.centroids, self.centroids)
        self.scaled = np.ascontiguousarray(-2.0 * self.frames.frames[self.order])  # exact in float32
        self.norms = self.frames.norms[self.order]
        offsets = self.frames.frames[self.order].astype(np.float64) - np.repeat(
            self.centroids.astype(np.float64), counts[keep], axis=0)
        distances = np.sqrt(np.einsum("ij,ij->i", offsets, offsets))
        radii = np.maximum.reduceat(distances, self.starts[:-1]) * (1.0 + 1e-6)  # round up in float32
        self.radii = radii.astype(np.float32)

    def nearest(self, queries, sources=None):
        """Indices (m,) int64 of the nearest frame of each query (m, n) float32.

        ``sources`` (m,) int64, the frame each query was made from, gives a first upper bound.
        """
        queries = np.ascontiguousarray(queries, dtype=np.float32)
        nfeatures = self.frames.frames.shape[1]
        if queries.ndim != 2 or queries.shape[1] != nfeatures:
            raise ValueError(f"queries must have shape (m, {nfeatures}), got {queries.shape}")
        sources = None if sources is None else np.asarray(sources, dtype=np.int64)
        if sources is not None and sources.shape != (len(queries),):
            raise ValueError(f"sources must have shape ({len(queries)},), got {sources.shape}")
        blocks = [slice(start, start + QUERY_BLOCK) for start in range(0, len(queries), QUERY_BLOCK)]
        jobs = [(queries[block], None if sources is None else sources[block]) for block in blocks]
        if self.threads == 1 or len(jobs) < 2:
            parts = [_BlockSearch(self, *job).run() for job in jobs]
        else:
            with concurrent.futures.ThreadPoolExecutor(self.threads) as pool:
                parts = list(pool.map(lambda job: _BlockSearch(self, *job).run(), jobs))
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)


def _kmeans(frames, ncells):
    """Centroids (C, n) float32 and each frame's cell (F,) int64, C <= ncells (faiss k-means)."""
    ncells = max(1, min(int(ncells), len(frames) // MIN_FRAMES_PER_CELL))
    if ncells == 1:
        return frames.mean(axis=0, keepdims=True).astype(np.float32), np.zeros(len(frames), np.int64)
    import faiss
    kmeans = faiss.Kmeans(frames.shape[1], ncells, niter=KMEANS_ITERATIONS, seed=KMEANS_SEED,
                          verbose=False)
    kmeans.train(frames)
    _, assignment = kmeans.index.search(frames, 1)
    return np.ascontiguousarray(kmeans.centroids, dtype=np.float32), assignment[:, 0].astype(np.int64)


class _BlockSearch:
    """The search state of one block of queries: bounds, best values and the visits that update them."""

    def __init__(self, index, queries, sources):
        self.index, self.queries = index, queries
        self.centred, self.qnorm = index.frames.centre(queries)
        self.tolerance = index.frames.tolerance(self.qnorm)
        # distance slack for centring the float32 queries and frames (a few roundoffs of their norms)
        self.slack = (4.0 * UNIT_ROUNDOFF * (self.qnorm + index.frames.radius)).astype(np.float32)
        self.best = np.full(len(queries), np.inf)
        self.second = np.full(len(queries), np.inf)
        self.ranked = np.zeros(len(queries), np.int64)
        self._bound(sources)

    def _bound(self, sources):
        """Lower bounds (m, C) per cell, upper bounds (m,) and nearest cells (m,) of the block."""
        index = self.index
        squared = self.centred @ (-2.0 * index.centroids.T)
        squared += index.centroid_norms
        squared += (self.qnorm ** 2).astype(np.float32)[:, None]
        self.nearest_cell = squared.argmin(axis=1)
        error = self.tolerance.astype(np.float32)[:, None]
        upper = np.sqrt(squared + error) + index.radii
        self.upper = upper.min(axis=1) + self.slack
        squared -= error
        np.maximum(squared, 0.0, out=squared)
        lower = np.sqrt(squared, out=squared)
        lower -= index.radii
        lower -= self.slack[:, None]
        self.lower = lower
        if sources is not None:  # the exact float64 distance to the source frame
            offsets = self.queries - index.frames.exact[sources]
            own = np.sqrt(np.einsum("ij,ij->i", offsets, offsets)) * (1.0 + 1e-6)
            self.upper = np.minimum(self.upper, own.astype(np.float32))

    def run(self):
        """Exact nearest frames (m,) int64 of the block's queries."""
        grouping = np.argsort(self.nearest_cell, kind="stable")
        counts = np.bincount(self.nearest_cell, minlength=len(self.index.radii))
        ends = np.cumsum(counts)
        for cell in np.flatnonzero(counts):
            self._visit(cell, grouping[ends[cell] - counts[cell]:ends[cell]])
        self.lower[np.arange(len(self.lower)), self.nearest_cell] = np.inf
        cells, members = np.nonzero((self.lower <= self.upper[:, None]).T)
        bounds = np.searchsorted(cells, np.arange(len(self.index.radii) + 1))
        for cell in np.unique(cells):
            group = members[bounds[cell]:bounds[cell + 1]]
            group = group[self.lower[group, cell] <= self.upper[group]]
            if len(group):
                self._visit(cell, group)
        self.lower[np.arange(len(self.lower)), self.nearest_cell] = -np.inf
        return settle(self.index.frames, self.queries, self.ranked, self.best, self.second, self.qnorm,
                      self._candidates)

    def _visit(self, cell, group):
        """Rank the frames of ``cell`` for the queries ``group`` (k,) and update their bounds."""
        index = self.index
        start, stop = index.starts[cell], index.starts[cell + 1]
        values = self.centred[group] @ index.scaled[start:stop].T  # (k, rows): -2 q.x
        values += index.norms[start:stop]
        where = values.argmin(axis=1)
        smallest = values[np.arange(len(group)), where].astype(np.float64)
        best = self.best[group]
        improved = smallest < best
        runner_up = np.minimum(self.second[group], smallest)  # when not improved
        if improved.any():
            rows = values[improved]
            rows[np.arange(len(rows)), where[improved]] = np.inf
            runner_up[improved] = np.minimum(best[improved], rows.min(axis=1))
        self.second[group] = runner_up
        self.best[group] = np.minimum(best, smallest)
        self.ranked[group[improved]] = index.order[start + where[improved]]
        reach = np.sqrt(self.best[group] + self.qnorm[group] ** 2 + self.tolerance[group]) + self.slack[group]
        self.upper[group] = np.minimum(self.upper[group], reach.astype(np.float32))

    def _candidates(self, position):
        """Frame rows (k,) int64 that may hold the nearest frame of query ``position`` of the block."""
        cells = np.flatnonzero(self.lower[position] <= self.upper[position])
        index = self.index
        rows = [index.order[index.starts[cell]:index.starts[cell + 1]] for cell in cells]
        return np.concatenate(rows)
