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
        self.units = 2.0 * (index.frames.frames.shape[1] + 6) * ROUNDOFF[dtype]
        # float32 query offsets come from queries already centred on the frames' mean: their error adds
        # about 2 u (|q - mean| + |q - c|) to |q - x|, so 3 u (|q-c| + r_c)(|q - mean| + |q-c| + r_c) here
        self.centring_units = 3.0 * ROUNDOFF[dtype] if dtype == np.float32 else 0.0
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
        full = len(self.positions) == len(self.bounds.upper)
        lower = self.bounds.lower if full else self.bounds.lower[self.positions]  # (k, C)
        upper = self.bounds.upper[self.positions] + self.bounds.slack[self.positions]
        needed = lower <= upper[:, None]
        needed[np.arange(len(nearest)), nearest] = False
        members, cells = np.nonzero(needed)
        del needed
        by_cell = np.argsort(cells.astype(np.int16 if len(self.index.radii) < 2 ** 15 else np.int32),
                             kind="stable")  # a radix sort
        members, cells = members[by_cell], cells[by_cell]
        bounds = np.searchsorted(cells, np.arange(len(self.index.radii) + 1))
        for cell in np.flatnonzero(np.diff(bounds)):
            group = members[bounds[cell]:bounds[cell + 1]]
            where_in_block = self.positions[group]
            group = group[lower[group, cell] <= self.bounds.upper[where_in_block] + self.bounds.slack[where_in_block]]
            if len(group):
                self._visit(cell, group)
        return self

    def _visit(self, cell, group):
        """Rank the frames of ``cell`` for the queries ``group`` (g,) of this pass; update their state."""
        index, where_in_block = self.index, self.positions[group]
        start, stop = index.starts[cell], index.starts[cell + 1]
        scaled, norms = index.rows[self.dtype]
        if self.dtype == np.float32:
            offsets = self.bounds.centred[where_in_block] - index.centroids[cell]
        else:
            offsets = self.bounds.exact[where_in_block] - index.centres[cell]
        offset_norms = np.einsum("ij,ij->i", offsets, offsets).astype(np.float64)
        values = offsets @ scaled[start:stop].T  # (g, rows): -2 (q-c).(x-c)
        values += norms[start:stop]
        every = np.arange(len(group))
        where = values.argmin(axis=1)
        smallest = values[every, where] + offset_norms
        reach = np.sqrt(offset_norms) + index.radii64[cell]
        centring = self.centring_units * (self.bounds.centred_norms[where_in_block] + reach)
        error = reach * (self.units * reach + centring)
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
        found = np.sqrt(self.best[group] + self.best_error[group]) * (1.0 + 1e-6)  # rounded up in float32
        self.bounds.upper[where_in_block] = np.minimum(self.bounds.upper[where_in_block], found)
