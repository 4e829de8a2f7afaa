"""One pass of the ``cells`` search over a set of queries, in float32 or float64 (see search_cells.py).

Each visit ranks one cell's frames for a group of queries with one GEMM and keeps, per query, the best
value, its error bound and the lowest possible value of any other frame seen (``low``). The best frame
is certainly the nearest when ``low`` exceeds the best value plus its error bound.
"""
import numpy as np

ROUNDOFF = {np.float32: 2.0 ** -24, np.float64: 2.0 ** -53}


class CellPass:
    """Search the queries ``positions`` (k,) of a block (``_Bounds``) in ``dtype``; ``run()`` returns self.

    After ``run()``: ``ranked`` (k,) int64 best frames, ``ambiguous()`` (k,) bool where not certain.
    """

    def __init__(self, index, bounds, positions, dtype):
        self.index, self.bounds, self.positions, self.dtype = index, bounds, positions, dtype
        # error of |q-c|^2 + |x-c|^2 - 2 (q-c).(x-c) in units of (|q-c| + r_c)^2: n-term dot product,
        # norms, additions and the rounding of both offsets, doubled for safety
        self.nfeatures = index.frames.frames.shape[1]
        self.units = 2.0 * (self.nfeatures + 6) * ROUNDOFF[np.float64]  # the float64 pass
        self.units32 = 2.0 * ROUNDOFF[np.float32]
        self.best = np.full(len(positions), np.inf)
        self.best_error = np.zeros(len(positions))
        self.low = np.full(len(positions), np.inf)
        self.ranked = np.zeros(len(positions), np.int64)

    def ambiguous(self):
        """(k,) bool: queries where another frame may be as near as the best one."""
        return self.low <= self.best + self.best_error

    def run(self):
        """Visit each query's nearest cell, then every cell its bounds cannot rule out; returns self."""
        nearest = self.bounds.nearest_cell[self.positions]
        grouping = np.argsort(nearest, kind="stable")
        counts = np.bincount(nearest, minlength=len(self.index.radii))
        ends = np.cumsum(counts)
        for cell in np.flatnonzero(counts):
            self._visit(cell, grouping[ends[cell] - counts[cell]:ends[cell]])
        if len(self.positions) == len(self.bounds.upper):
            for cell in range(len(self.index.radii)):
                group = np.flatnonzero(self.bounds.lower[cell] <= self.bounds.reach)
                if len(group):
                    self._visit(cell, group)
            return self
        lower = self.bounds.lower[:, self.positions]  # (C, k)
        for cell in range(len(self.index.radii)):
            group = np.flatnonzero(lower[cell] <= self.bounds.reach[self.positions])
            if len(group):
                self._visit(cell, group)
        return self

    def _visit(self, cell, group):
        """Rank the frames of ``cell`` for the queries ``group`` (g,) of this pass; update their state."""
        index, bounds, where_in_block = self.index, self.bounds, self.positions[group]
        start, stop = index.starts[cell], index.starts[cell + 1]
        if self.dtype == np.float32:
            values, offset_norms, error = self._values32(cell, where_in_block, start, stop)
        else:
            values, offset_norms, error = self._values64(cell, where_in_block, start, stop)
        every = np.arange(len(group))
        where = values.argmin(axis=1)
        smallest = values[every, where] + offset_norms
        best = self.best[group]
        improved = smallest < best
        low = np.minimum(self.low[group], np.where(improved, best - self.best_error[group], smallest - error))
        if improved.any():
            values[every, where] = np.inf  # the runner-up of the cell, for the improved queries only
            runner_up = (values.min(axis=1)[improved] if improved.mean() > 0.5 else values[improved].min(axis=1))
            low[improved] = np.minimum(low[improved], runner_up + offset_norms[improved] - error[improved])
            self.best[group[improved]] = smallest[improved]
            self.best_error[group[improved]] = error[improved]
            self.ranked[group[improved]] = index.order[start + where[improved]]
        self.low[group] = low
        bounds.tighten(where_in_block, np.sqrt(self.best[group] + self.best_error[group]) * (1.0 + 1e-6))

    def _values32(self, cell, where_in_block, start, stop):
        """float32 ranking (g, rows) of a cell's frames, the (g,) float64 term completing them to squared
        distances, and the (g,) float64 error bound of the sums."""
        bounds, index = self.bounds, self.index
        operand = np.take(bounds.augmented, where_in_block, axis=0)  # (g, n + 1): [q - mean, 1]
        values = operand @ index.rows32[start:stop].T  # |x - mean|^2 - 2 (q - mean).(x - c)
        cross = operand[:, :-1] @ index.scaled_centroids[cell]  # -2 (q - mean).c
        norm = bounds.centred_norms[where_in_block]
        # |q - x|^2 error bound: the (n + 1)-term GEMM (2 |q| r_c + |x|^2), the cross term (2 |q| |c|),
        # the roundings of stored values and sums, and the centring of q; all norms relative to the
        # mean, |x| <= |c| + r_c = reach; then doubled for safety
        reach = index.reach[cell]
        error = self.units32 * ((self.nfeatures + 5) * reach * (reach + 4 * norm) + 2 * norm ** 2)
        return values, cross + norm ** 2, error

    def _values64(self, cell, where_in_block, start, stop):
        """Like ``_values32`` in float64 on offsets from the cell's centre (exact inputs)."""
        index = self.index
        scaled, norms = index.rows64
        offsets = self.bounds.exact[where_in_block] - index.centres[cell]
        offset_norms = np.einsum("ij,ij->i", offsets, offsets)
        values = offsets @ scaled[start:stop].T  # (g, rows): -2 (q-c).(x-c)
        values += norms[start:stop]
        reach = np.sqrt(offset_norms) + index.radii64[cell]
        return values, offset_norms, self.units * reach ** 2
