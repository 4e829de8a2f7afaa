"""Principal-axis lower bounds for the ``cells`` search: a second, tighter filter per visit.

Each cell keeps its ``AXES`` principal axes ``V`` (from its frames' offsets ``s = x - c``), the interval
``[lo_j, hi_j]`` of ``V_j . s`` over its frames, and the largest residual ``rr = |s - V V^T s|``. For a
query with ``t = q - c`` and ``p = V^T t``:

    |q - x|^2 = |V^T (t - s)|^2 + |(I - V V^T)(t - s)|^2
             >= sum_j dist(p_j, [lo_j, hi_j])^2 + max(0, sqrt(|t|^2 - |p|^2) - rr)^2

The sphere bound ``|t| - r_c`` chooses the cells to visit; this bound then drops the queries of a
visit that cannot have their nearest frame in the cell, before the GEMM. float32 errors widen the
intervals and shrink ``|t|^2`` by bounds stated below, so the filter never drops a needed query.
"""
import numpy as np

from motion_matching.neighbours.cells.common import ROUND_UP, principal_axes, rounded_outwards
from motion_matching.neighbours.exact import UNIT_ROUNDOFF

AXES = 4


class AxisBounds:
    """Per-cell axes, intervals and residual radii of the frames ``offsets`` (F, n) float64, stored
    cell by cell (``starts`` (C + 1,) int64), with ``centroids`` (C, n) float32 relative to the mean."""

    def __init__(self, offsets, starts, centroids):
        ncells, nfeatures = len(starts) - 1, offsets.shape[1]
        count = min(AXES, nfeatures)
        self.axes = np.zeros((ncells, count, nfeatures), np.float32)
        self.low = np.zeros((ncells, count))
        self.high = np.zeros((ncells, count))
        self.residual = np.zeros(ncells)
        for cell in range(ncells):
            block = offsets[starts[cell]:starts[cell + 1]]
            axes, along, residuals = principal_axes(block, count)
            self.axes[cell] = axes
            self.low[cell], self.high[cell] = along.min(axis=0), along.max(axis=0)
            self.residual[cell] = residuals.max()
        self.residual = (self.residual * ROUND_UP).astype(np.float32)
        self.centroid_along = np.einsum("ckn,cn->ck", self.axes.astype(np.float64),
                                        centroids.astype(np.float64)).astype(np.float32)
        self.centroid_norms = np.sqrt(np.einsum("ij,ij->i", centroids, centroids, dtype=np.float64))
        self.low, self.high = rounded_outwards(self.low, self.high)
        # margins, in float32 roundoffs: |p_j| (an n-term float32 dot product, the rounding of q - mean
        # and of the stored values, a few float32 operations) and |t|^2 (the float32 pass's bound, x4)
        self.spread_units = np.float32((nfeatures + 8) * UNIT_ROUNDOFF)
        self.shrink_units = np.float32(4 * (nfeatures + 8) * UNIT_ROUNDOFF)

    def keep(self, cell, centred, centred_norms, squared, reach):
        """(g,) bool: queries of a visit whose nearest frame may lie in ``cell``.

        ``centred`` (g, n) float32 queries minus the mean, ``centred_norms`` (g,) their norms,
        ``squared`` (g,) float64 their computed ``|q - c|^2``, ``reach`` (g,) the distance thresholds.
        Computed in float32, within the margins above.
        """
        size = (centred_norms + self.centroid_norms[cell]).astype(np.float32)
        spread = (self.spread_units * size)[:, None]
        along = centred @ self.axes[cell].T  # (g, k)
        along -= self.centroid_along[cell]
        outside = np.maximum(self.low[cell] - along, along - self.high[cell])
        outside -= spread
        np.maximum(outside, 0.0, out=outside)
        inside = np.einsum("ij,ij->i", outside, outside)
        np.abs(along, out=along)
        along += spread
        across = squared.astype(np.float32) - self.shrink_units * size * size - np.einsum("ij,ij->i", along, along)
        np.maximum(across, 0.0, out=across)
        np.sqrt(across, out=across)
        across -= self.residual[cell]
        np.maximum(across, 0.0, out=across)
        inside += across * across
        return inside <= reach * reach * np.float32(1.0 + 1e-5)
