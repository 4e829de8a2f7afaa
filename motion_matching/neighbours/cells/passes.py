"""The float32 pass of the ``cells`` search over one block of queries (see search_cells.py).

Each visit ranks one cell's frames for a group of queries with one GEMM and keeps, per query, the best
squared distance, its error bound and the lowest possible squared distance of any other frame seen
(``low``). The best frame is certainly the nearest when ``low`` exceeds the best value plus its error
bound; the other queries are ``ambiguous`` and are settled in float64 by the caller.
"""
import numpy as np

FLOAT32_ROUNDOFF = 2.0 ** -24


class CellPass:
    """Search every query of a block (``search_cells._Bounds``); ``run()`` returns self.

    After ``run()``: ``ranked`` (m,) int64 best frames, ``ambiguous()`` (m,) bool where not certain.
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
        units = 2.0 * FLOAT32_ROUNDOFF
        nfeatures, radii = index.frames.frames.shape[1], index.radii64
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
            bounds.tighten(changed, np.sqrt(smallest[improved] + error[improved]) * (1.0 + 1e-6))
        self.low[group] = low
