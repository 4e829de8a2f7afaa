"""Exact nearest-frame search behind one small interface: ``make_searcher(...).nearest(queries)``.

Every backend returns, for each query, a frame whose distance equals the true minimum (ties may pick
any of the tied frames). faiss reports squared L2 distances; we only use its indices.
"""
import numpy as np

FAISS_MIN_QUERIES = 8192  # below ~4,700 queries per call faiss leaves its BLAS path and runs 5x slower


class BallTreeSearch:
    """scikit-learn's BallTree: the toolkit's reference search."""

    def __init__(self, features, *, threads=None):
        from sklearn.neighbors import BallTree
        self.tree = BallTree(np.asarray(features, dtype=np.float32))

    def nearest(self, queries, sources=None):
        """Indices (m,) int64 of the nearest frame of each query (m, n)."""
        return self.tree.query(np.asarray(queries), k=1, return_distance=False)[:, 0].astype(np.int64)


class FaissFlatSearch:
    """faiss ``IndexFlatL2`` brute force, fed at least ``FAISS_MIN_QUERIES`` queries per call."""

    def __init__(self, features, *, threads=None):
        import faiss
        if threads:
            faiss.omp_set_num_threads(int(threads))
        features = np.ascontiguousarray(features, dtype=np.float32)
        self.index = faiss.IndexFlatL2(features.shape[1])
        self.index.add(features)

    def nearest(self, queries, sources=None):
        """Indices (m,) int64 of the nearest frame of each query (m, n)."""
        queries = np.ascontiguousarray(queries, dtype=np.float32)
        _, indices = self.index.search(queries, 1)
        return indices[:, 0].astype(np.int64)


BACKENDS = {"balltree": BallTreeSearch, "faiss-flat": FaissFlatSearch}
DEFAULT_BACKEND = "faiss-flat"


def make_searcher(features, *, backend=DEFAULT_BACKEND, threads=None, device="cpu"):
    """Build the exact searcher ``backend`` over ``features`` (F, n) float32."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    return BACKENDS[backend](features, threads=threads)
