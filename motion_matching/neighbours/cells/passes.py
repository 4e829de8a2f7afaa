"""The float32 pass of the ``cells`` numpy search over one block of queries (see fallback.py).

``QueryBounds`` holds a block's per-query bounds (lower bounds per cell, upper bounds on the answer);
``CellPass`` then visits the cells those bounds cannot rule out.

Each visit ranks one cell's frames for a group of queries with one GEMM and keeps, per query, the best
squared distance, its error bound and the lowest possible squared distance of any other frame seen
(``low``). The best frame is certainly the nearest when ``low`` exceeds the best value plus its error
bound; the other queries are ``ambiguous`` and are settled in float64 by the caller.
"""
import numpy as np

from motion_matching.neighbours.cells.common import ROUND_UP
from motion_matching.neighbours.exact import UNIT_ROUNDOFF


class CellPass:
    """Search every query of a block (``QueryBounds``) over ``index``; ``run()`` returns self.

    ``index`` is a ``fallback.CellSearch``, read through the attributes its docstring lists (``nfeatures``,
    ``starts``, ``order``, ``rows32``, ``radii``, ``radii64``, ``outer``, ``centroids64``,
    ``centroid_squares``, ``axis_bounds``). After ``run()``: ``ranked`` (m,) int64 best frames,
    ``ambiguous()`` (m,) bool where not certain.
    """

    def __init__(self, index, bounds):
        self.index, self.bounds = index, bounds
        count = len(bounds.upper)
        self.best = np.full(count, np.inf)
        self.best_error = np.zeros(count)
        self.low = np.full(count, np.inf)
        self.ranked = np.zeros(count, np.int64)
        # error bound of a computed |q - x|^2, with A = |q - mean|, r = r_c, C = |c - mean| and
        # B = C + r >= |x - mean|: the (n + 1)-term float32 GEMM and the roundings of the stored rows
        # and of the sums, (n + 3) r (2 A + 2 C + r), plus the centring of q in float32, 2 A (A + B);
        # |q - c|^2 is computed in float64; the sum times u, doubled
        units = 2.0 * UNIT_ROUNDOFF
        nfeatures, radii = index.nfeatures, index.radii64
        self.error_slope = units * (2 * (nfeatures + 3) * radii + 2 * index.outer)  # (C,) times A
        self.error_base = units * (nfeatures + 3) * radii * (2 * np.sqrt(index.centroid_squares) + radii)
        self.query_error = units * 2 * bounds.centred_norms ** 2  # (m,)
        self.query_square = bounds.centred_norms ** 2

    def ambiguous(self):
        """(m,) bool: queries where another frame may be as near as the best one."""
        return self.low <= self.best + self.best_error

    def run(self):
        """Visit each query's nearest cell (if chosen), then every cell its bounds cannot rule out; returns
        self."""
        nearest = self.bounds.nearest_cell
        if nearest is not None:
            grouping = np.argsort(nearest, kind="stable")
            counts = np.bincount(nearest, minlength=len(self.index.radii))
            ends = np.cumsum(counts)
            for cell in np.flatnonzero(counts):
                self._visit(cell, grouping[ends[cell] - counts[cell]:ends[cell]], prune=False)
        for cell in range(len(self.index.radii)):  # thresholds shrink as cells are visited
            group = np.flatnonzero(self.bounds.lower[cell] <= self.bounds.reach)
            if len(group):
                self._visit(cell, group, prune=True)
        return self

    def _visit(self, cell, group, *, prune):
        """Rank the frames of ``cell`` for the queries ``group`` (g,) int64; update their state.

        With ``prune``, first drop the queries that the cell's principal-axis bound rules out.
        """
        index, bounds = self.index, self.bounds
        start, stop = index.starts[cell], index.starts[cell + 1]
        operand = np.take(bounds.augmented, group, axis=0)  # (g, n + 1): [q - mean, 1]
        # |q - c|^2 in float64
        completion = self.query_square[group] + index.centroid_squares[cell] - 2.0 * (
            operand[:, :-1].astype(np.float64) @ index.centroids64[cell])
        if prune:
            keep = index.axis_bounds.keep(cell, operand[:, :-1], bounds.centred_norms[group], completion,
                                          bounds.reach[group])
            if not keep.all():
                group, operand, completion = group[keep], operand[keep], completion[keep]
                if not len(group):
                    return
        values = operand @ index.rows32[start:stop].T  # |q - x|^2 - |q - c|^2
        every = np.arange(len(group))
        where = values.argmin(axis=1)
        smallest = values[every, where] + completion  # (g,) float64 squared distances
        error = self.error_slope[cell] * bounds.centred_norms[group] + (self.error_base[cell] + self.query_error[group])
        best = self.best[group]
        improved = smallest < best
        low = np.minimum(self.low[group], np.where(improved, best - self.best_error[group], smallest - error))
        if improved.any():
            values[every, where] = np.inf  # the runner-up of the cell, for the improved queries only
            runner_up = (values.min(axis=1)[improved] if improved.mean() > 0.5 else values[improved].min(axis=1))
            low[improved] = np.minimum(low[improved], runner_up + completion[improved] - error[improved])
            changed = group[improved]
            self.best[changed] = smallest[improved]
            self.best_error[changed] = error[improved]
            self.ranked[changed] = index.order[start + where[improved]]
            bounds.tighten(changed, np.sqrt(smallest[improved] + error[improved]) * ROUND_UP)
        self.low[group] = low


class QueryBounds:
    """Per-block bounds and query forms for ``CellPass``, from the index (``fallback.CellSearch``) and
    ``queries`` (m, n) float32 with their ``sources`` (m,) int64 or None.

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
            own = np.sqrt(np.einsum("ij,ij->i", offsets, offsets)) * ROUND_UP
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
