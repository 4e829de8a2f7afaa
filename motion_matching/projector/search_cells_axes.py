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

AXES = 4
FLOAT32_ROUNDOFF = 2.0 ** -24


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
            axes = np.linalg.svd(block, full_matrices=True)[2][:count].astype(np.float32)
            along = block @ axes.T.astype(np.float64)  # (rows, k)
            rest = block - along @ axes.astype(np.float64)
            self.axes[cell] = axes
            self.low[cell], self.high[cell] = along.min(axis=0), along.max(axis=0)
            self.residual[cell] = np.sqrt(np.einsum("ij,ij->i", rest, rest).max())
        self.residual *= 1.0 + 1e-6
        self.centroid_along = np.einsum("ckn,cn->ck", self.axes.astype(np.float64), centroids.astype(np.float64))
        self.centroid_norms = np.sqrt(np.einsum("ij,ij->i", centroids, centroids, dtype=np.float64))
        self.nfeatures = nfeatures

    def keep(self, cell, centred, centred_norms, squared, reach):
        """(g,) bool: queries of a visit whose nearest frame may lie in ``cell``.

        ``centred`` (g, n) float32 queries minus the mean, ``centred_norms`` (g,) their norms,
        ``squared`` (g,) float64 their computed ``|q - c|^2``, ``reach`` (g,) the distance thresholds.
        """
        size = centred_norms + self.centroid_norms[cell]
        # |p_j| error: the float32 n-term dot product and the rounding of q - mean, generously
        spread = (self.nfeatures + 4) * FLOAT32_ROUNDOFF * size
        along = (centred @ self.axes[cell].T).astype(np.float64) - self.centroid_along[cell]  # (g, k)
        below = self.low[cell] - spread[:, None] - along
        above = along - self.high[cell] - spread[:, None]
        outside = np.maximum(np.maximum(below, above), 0.0)
        inside = np.einsum("ij,ij->i", outside, outside)
        widest = np.abs(along) + spread[:, None]
        # |t|^2 error: the float32 cross term and norms (as the float32 pass's error bound), doubled
        shrink = 4.0 * (self.nfeatures + 4) * FLOAT32_ROUNDOFF * size ** 2
        across = np.sqrt(np.maximum(squared - shrink - np.einsum("ij,ij->i", widest, widest), 0.0))
        across = np.maximum(across - self.residual[cell], 0.0)
        return inside + across ** 2 <= reach.astype(np.float64) ** 2
