"""Exactness helpers shared by the search backends: float32 error bounds and float64 re-ranking.

Fast backends rank frames by float32 sums such as ``|x|^2 - 2 q.x`` on mean-centred data, each within
a stated error bound (``CentredFrames.tolerance`` for whole-vector sums) of the true squared distance.
A best frame that beats every other frame by more than the bounds is the exact nearest frame; the
other queries are settled in float64: ``settle`` re-ranks a few float32 candidates by direct
differences, and ``CentredFrames.nearest_float64`` searches every frame.
"""
import numpy as np

# float32 unit roundoff; the bound is 2 * (n + 4) of them: the worst case of an n-term dot product (n u)
# plus centring, norms and the final additions, doubled for safety; typical errors are far smaller
UNIT_ROUNDOFF = float(np.finfo(np.float32).eps) / 2  # 2^-24; the cells C loop's ROUNDOFF, pinned by a test
CHUNK_ELEMENTS = 1 << 22  # float64 elements per distance chunk: 32 MiB


class CentredFrames:
    """Frames ``(F, n)`` centred on their float64 mean, in float32 for ranking and float64 for checking.

    Attributes: ``mean`` (n,) float64, ``frames`` (F, n) float32 centred, ``exact`` (F, n) float64
    (the original values), ``norms`` (F,) float32 squared norms of the centred rows, ``radius`` float
    (the largest centred norm), ``centred64`` (F, n) and ``squared64`` (F,) the centred frames and
    their squared norms in float64.
    """

    def __init__(self, features):
        exact = np.ascontiguousarray(features, dtype=np.float64)
        if exact.ndim != 2 or exact.shape[0] == 0:
            raise ValueError(f"features must be a non-empty (F, n) array, got shape {exact.shape}")
        if not np.isfinite(exact).all():
            raise ValueError("features contain NaN or infinite values")
        self.exact = exact
        self.mean = exact.mean(axis=0)
        self.frames = np.ascontiguousarray(exact - self.mean, dtype=np.float32)
        norms = np.einsum("ij,ij->i", self.frames.astype(np.float64), self.frames.astype(np.float64))
        self.norms = norms.astype(np.float32)
        self.radius = float(np.sqrt(norms.max()))
        self.centred64 = exact - self.mean
        self.squared64 = np.einsum("ij,ij->i", self.centred64, self.centred64)

    def centre(self, queries):
        """Centred queries (m, n) float32 and their norms (m,) float64."""
        centred = np.ascontiguousarray(np.asarray(queries, dtype=np.float64) - self.mean, dtype=np.float32)
        return centred, np.sqrt(np.einsum("ij,ij->i", centred, centred, dtype=np.float64))

    def tolerance(self, query_norms):
        """Per-query tolerance (m,) float64 on ranking values: two error bounds of ``|x|^2 - 2 q.x``."""
        units = 2.0 * (self.frames.shape[1] + 4)
        return 2.0 * units * UNIT_ROUNDOFF * (query_norms + self.radius) ** 2 + 1e-30

    def distances(self, queries, rows):
        """Squared distances (m, len(rows)) float64 of original queries to frames ``rows``, direct differences."""
        queries = np.asarray(queries, dtype=np.float64)
        frames = self.exact[rows]
        difference = queries[:, None, :] - frames[None, :, :]
        return np.einsum("ijk,ijk->ij", difference, difference)

    def nearest_float64(self, queries):
        """Exact nearest frame (m,) int64 of each query (m, n), over all frames, in float64.

        Squared distances by GEMM on mean-centred float64 frames (error far below float32 rounding),
        then direct differences among the frames within that error of the best, when there are several.
        """
        centred = np.asarray(queries, dtype=np.float64) - self.mean
        result = np.empty(len(centred), np.int64)
        step = max(1, CHUNK_ELEMENTS // len(self.centred64))
        for start in range(0, len(centred), step):
            block = centred[start:start + step]
            values = block @ self.centred64.T
            values *= -2.0
            values += self.squared64  # (k, F): |x|^2 - 2 q.x
            best = values.argmin(axis=1)
            norms = np.sqrt(np.einsum("ij,ij->i", block, block))
            tolerance = 8.0 * (block.shape[1] + 4) * 2.0 ** -53 * (norms + self.radius) ** 2
            near = values <= (values[np.arange(len(block)), best] + tolerance)[:, None]
            for row in np.flatnonzero(near.sum(axis=1) > 1):  # near-ties: direct differences
                rows = np.flatnonzero(near[row])
                best[row] = rows[self.distances(block[row:row + 1] + self.mean, rows)[0].argmin()]
            result[start:start + step] = best
        return result


def settle(frames, queries, candidates, approximate, query_norms):
    """Exact nearest frames (m,) int64 from float32 candidates, re-ranked by float64 direct differences.

    ``candidates`` (m, k) int64 are the k best frames of each query by ``approximate`` (m, k) squared
    distances (ascending; -1 marks a missing candidate), each within half of ``frames.tolerance``
    of the truth. Every other frame is then at least ``approximate[:, -1]`` minus that error away, so
    the best candidate is exact when its float64 distance is below that; other queries (rare: many
    near-ties) are searched in full in float64.
    """
    queries = np.asarray(queries, dtype=np.float64)
    present = candidates >= 0
    rows = np.where(present, candidates, 0)
    offsets = queries[:, None, :] - frames.exact[rows]
    distances = np.where(present, np.einsum("ijk,ijk->ij", offsets, offsets), np.inf)
    choice = distances.argmin(axis=1)
    result = rows[np.arange(len(rows)), choice]
    floor = np.where(present[:, -1], approximate[:, -1] - frames.tolerance(query_norms) / 2, np.inf)
    unsure = np.flatnonzero(distances[np.arange(len(rows)), choice] > floor)
    if len(unsure):
        result[unsure] = frames.nearest_float64(queries[unsure])
    return result
