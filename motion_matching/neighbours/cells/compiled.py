"""``cells`` with a compiled inner loop (the C extension ``_cellsearch``): the default exact search.

The index is built here with numpy and ``common.py`` (k-means, principal axes): frames grouped into
cells; each cell's rows sorted by their distance to its centre; its radius; its principal axes with the
intervals of its rows along them and its residual radius; and for each row a sketch (its coordinates
along the cell's first seven axes and the length of the rest). One float32 GEMM per block of queries
gives every query-centre dot product; the C loop (see the header of ``cellsearch.c``) then prunes cells
by the ball and principal-axis bounds and rows by the triangle inequality and their sketches, and
compares the rest exactly. Blocks of queries run on ``threads`` Python threads (the loop releases the
GIL).

It needs the frames to be float32 values (features.bin holds float32) with at most ``MAX_FEATURES`` (64,
from cellsearch.h) features; ``accepts`` says whether they are. Queries are rounded to float32, as by
every backend.
"""
import concurrent.futures

import numpy as np

from motion_matching.neighbours.cells.common import (
    available_cores,
    cell_count,
    checked_queries,
    checked_sources,
    kmeans,
    principal_axes,
    rounded_outwards,
)

try:
    from motion_matching.neighbours.cells import _cellsearch  # cellsearch.c with its Python binding _cellsearch.c
except ImportError:  # not built (no C compiler at install time): fallback.CellSearch is used
    _cellsearch = None

# from cellsearch.h: axes per cell and sketch length (features are padded to a multiple), and the most
# features the C loop's float32 slacks hold for; 0 without the extension (then nothing is accepted)
LANES = _cellsearch.LANES if _cellsearch is not None else 0
MAX_FEATURES = _cellsearch.MAX_FEATURES if _cellsearch is not None else 0
BLOCK = 512  # queries per call into C: a (512, C) dot-product block stays in cache
AXIS_MARGIN = 1e-5  # float32 rounding leaves the axes orthonormal to about 1e-6: residuals widened by 1e-5 r_c


def available():
    """True when the compiled loop was built and imports."""
    return _cellsearch is not None


def accepts(features):
    """True when the loop is built and ``features`` (F, n) hold float32 values, whatever their dtype,
    with n <= ``MAX_FEATURES``."""
    frames = np.asarray(features)
    if frames.ndim != 2 or frames.shape[1] > MAX_FEATURES:
        return False
    return frames.dtype == np.float32 or bool(np.array_equal(frames.astype(np.float32), frames))


class CompiledCellSearch:
    """Exact nearest-frame search over k-means cells with a compiled loop.

    Arrays handed to C are C-contiguous, with features padded by zeros to ``width`` (a multiple of
    ``LANES``), which changes no distance; centres and axes are float32 values, and every bound is
    computed in float64 from them and then rounded outwards to float32.
    """

    def __init__(self, features, *, threads=None, ncells=None):
        if _cellsearch is None:
            raise RuntimeError("the compiled cells search (_cellsearch) is not built; use fallback.CellSearch")
        frames = np.asarray(features)
        if frames.ndim != 2 or frames.shape[0] == 0:
            raise ValueError(f"features must be a non-empty (F, n) array, got shape {frames.shape}")
        if not accepts(frames):
            raise ValueError(f"the compiled cells search needs float32 features, at most {MAX_FEATURES} of them")
        frames32 = np.ascontiguousarray(frames, dtype=np.float32)
        if not np.isfinite(frames32).all():
            raise ValueError("features contain NaN or infinite values")
        exact = frames32.astype(np.float64)
        self.nfeatures = exact.shape[1]
        self.width = -(-self.nfeatures // LANES) * LANES
        self.threads = max(1, int(threads or available_cores()))
        centroids, assignment = kmeans(frames32, ncells or cell_count(len(exact)))
        offsets = exact - centroids.astype(np.float64)[assignment]
        lengths = np.sqrt(np.einsum("ij,ij->i", offsets, offsets))
        self.order = np.lexsort((lengths, assignment)).astype(np.int64)  # by cell, then by length
        self.position = np.empty_like(self.order)
        self.position[self.order] = np.arange(len(self.order))
        self.starts = np.concatenate([[0], np.cumsum(np.bincount(assignment))]).astype(np.int64)
        self.cell_of_position = np.repeat(np.arange(len(self.starts) - 1), np.diff(self.starts))
        self.rows = self._padded(frames32[self.order])
        self.lengths = np.ascontiguousarray(lengths[self.order])
        self.radii = np.maximum.reduceat(self.lengths, self.starts[:-1])
        self._centres(centroids, exact.mean(axis=0).astype(np.float32))
        self._axis_bounds(offsets[self.order], min(LANES, self.nfeatures))

    def _padded(self, array):
        """``array`` (k, n) as float32 (k, width), padded with zeros."""
        padded = np.zeros((len(array), self.width), np.float32)
        padded[:, :array.shape[1]] = array
        return padded

    def _centres(self, centroids, mean):
        """The centres (C, width) float32; less the mean and transposed for the GEMM, with their squares."""
        self.centroids = self._padded(centroids)
        self.mean = self._padded(mean[None])[0]
        centred = np.zeros((-(-len(centroids) // LANES) * LANES, self.width), np.float32)
        centred[:len(centroids)] = self.centroids - self.mean
        squares = np.einsum("ij,ij->i", centred.astype(np.float64), centred.astype(np.float64))
        self.centre_squares = squares.astype(np.float32)
        self.centred_centres_t = np.ascontiguousarray(centred.T)  # (width, C rounded up to LANES)

    def _axis_bounds(self, offsets, count):
        """Per cell: ``count`` principal axes rounded to float32 (zero axes up to ``LANES``), the intervals
        of its rows along them and its residual radius, rounded outwards; per row: its sketch."""
        ncells = len(self.centroids)
        self.axes = np.zeros((ncells, self.width, LANES), np.float32)
        sketches = np.zeros((len(self.rows), LANES), np.float32)
        low, high, residual = np.zeros((ncells, LANES)), np.zeros((ncells, LANES)), np.zeros(ncells)
        for cell in range(ncells):
            start, stop = self.starts[cell], self.starts[cell + 1]
            block = offsets[start:stop]
            axes, along, residuals = principal_axes(block, count)
            self.axes[cell, :self.nfeatures, :count] = axes.T
            low[cell, :count], high[cell, :count] = along.min(axis=0), along.max(axis=0)
            residual[cell] = residuals.max() + AXIS_MARGIN * self.radii[cell]
            sketch = np.zeros((len(block), LANES))
            sketch[:, :min(count, LANES - 1)] = along[:, :LANES - 1]
            rest = block - sketch[:, :min(count, LANES - 1)] @ axes[:LANES - 1]  # directly: no cancellation
            sketch[:, -1] = np.sqrt(np.einsum("ij,ij->i", rest, rest))
            sketches[start:stop] = sketch
        self.sketch_columns = np.zeros((LANES, len(self.rows) + LANES), np.float32)  # by lane, padded
        self.sketch_columns[:, :len(self.rows)] = sketches.T
        self.low, self.high = rounded_outwards(low, high)
        self.residual = np.nextafter(residual.astype(np.float32), np.float32(np.inf))

    def nearest(self, queries, sources=None):
        """Indices (m,) int64 of the nearest frame of each query (m, n).

        ``sources`` (m,) int64, the frame each query was made from, gives a first upper bound.
        """
        from threadpoolctl import threadpool_limits
        queries = checked_queries(queries, self.nfeatures)
        sources = checked_sources(sources, len(queries), len(self.order))
        if sources is None:
            start_rows, order = np.full(len(queries), -1, np.int64), np.arange(len(queries))
        else:
            start_rows = self.position[sources]
            # queries from one cell visit similar cells: searched together, they find them in cache
            order = np.argsort(self.cell_of_position[start_rows], kind="stable")
        found = np.empty(len(queries), np.int64)
        blocks = [order[start:start + BLOCK] for start in range(0, len(queries), BLOCK)]

        def search(block):
            found[block] = self._search_block(queries[block], start_rows[block])

        with threadpool_limits(limits=1, user_api="blas"):  # threads over blocks beat threaded BLAS
            if self.threads == 1 or len(blocks) < 2:
                for block in blocks:
                    search(block)
            else:
                with concurrent.futures.ThreadPoolExecutor(min(self.threads, len(blocks))) as pool:
                    list(pool.map(search, blocks))
        return self.order[found]

    def _search_block(self, queries, start_rows):
        """Row positions (k,) int64 of the nearest frames of ``queries`` (k, n)."""
        padded = self._padded(queries)
        if not np.isfinite(padded).all():
            raise ValueError("queries contain NaN or infinite values")
        n = self.nfeatures
        dots = (padded[:, :n] - self.mean[:n]) @ self.centred_centres_t[:n]  # (k, C'): (q - mean).(c - mean)
        result = np.empty(len(queries), np.int64)
        _cellsearch.nearest(self.nfeatures, self.width, len(self.centroids), len(self.rows), len(queries),
                            self.mean, dots, self.centre_squares, self.centroids, self.radii, self.axes,
                            self.low, self.high, self.residual, self.starts, self.rows,
                            self.lengths, self.sketch_columns, padded, np.ascontiguousarray(start_rows), result)
        return result
