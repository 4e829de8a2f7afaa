"""Exact nearest-frame search behind one small interface: ``make_searcher(...).nearest(queries)``.

Every backend returns, for each query, a frame whose squared distance equals the true minimum computed
in float64 (ties may pick any of the tied frames). Backends:

- ``cells`` (default): k-means cells with ball, principal-axis and per-frame sketch bounds in a compiled
  loop (``cells/compiled.py``, the C extension ``_cellsearch``); where the extension was not
  built, or the frames are not float32 values, the same idea in numpy (``cells-numpy``); both build
  their cells with ``cells/common.py``;
- ``cells-numpy``: k-means cells with radius bounds, queries grouped by cell, float32 GEMM, exact
  float64 settling of near-ties (``cells/fallback.py``);
- ``balltree``: scikit-learn's BallTree in float64, the toolkit's reference;
- ``faiss-flat``: faiss ``IndexFlatL2`` brute force (8 candidates), made exact by float64 settling of near-ties;
- ``torch``: brute force with torch on ``device`` (``"cpu"`` or ``"cuda"``), TF32 disabled, same settling.

faiss reports squared L2 distances; we only use its indices.
"""
import contextlib

import numpy as np

from motion_matching.errors import InvalidOption, MotionMatchingError
from motion_matching.neighbours.cells import compiled
from motion_matching.neighbours.cells.common import checked_queries
from motion_matching.neighbours.cells.fallback import CellSearch
from motion_matching.neighbours.exact import CentredFrames, settle

CANDIDATES = 8  # float32 candidates re-ranked in float64 by the brute-force backends
FAISS_MIN_QUERIES = 8192  # below ~4,700 queries per call faiss leaves its BLAS path and runs 5x slower
TORCH_BLOCK_ELEMENTS = 1 << 26  # queries x frames per torch distance block (256 MiB of float32)


class BallTreeSearch:
    """scikit-learn's BallTree (float64, direct differences): the toolkit's reference search."""

    def __init__(self, features, *, threads=None):
        from sklearn.neighbors import BallTree
        self.nfeatures = np.shape(features)[1]
        self.tree = BallTree(np.asarray(features, dtype=np.float32))

    def nearest(self, queries, sources=None):
        """Indices (m,) int64 of the nearest frame of each query (m, n)."""
        queries = checked_queries(queries, self.nfeatures)
        if len(queries) == 0:
            return np.zeros(0, np.int64)
        return self.tree.query(queries, k=1, return_distance=False)[:, 0].astype(np.int64)


class FaissFlatSearch:
    """faiss ``IndexFlatL2`` over centred frames, fed at least ``FAISS_MIN_QUERIES`` queries per call.

    faiss gives the ``CANDIDATES`` best frames in float32; they are re-ranked in float64 and a query
    whose last candidate is within the float32 error bound of the best is searched in full in float64,
    so the result is exact.
    """

    def __init__(self, features, *, threads=None):
        import faiss
        self.faiss, self.threads = faiss, threads
        self.frames = CentredFrames(features)
        self.index = faiss.IndexFlatL2(self.frames.frames.shape[1])
        self.index.add(self.frames.frames)

    def nearest(self, queries, sources=None):
        """Indices (m,) int64 of the nearest frame of each query (m, n)."""
        queries = checked_queries(queries, self.frames.frames.shape[1])
        if self.threads:
            self.faiss.omp_set_num_threads(int(self.threads))
        parts = [self._block(queries[start:start + FAISS_MIN_QUERIES * 8])
                 for start in range(0, len(queries), FAISS_MIN_QUERIES * 8)]
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)

    def _block(self, queries):
        centred, norms = self.frames.centre(queries)
        padded = centred
        if len(centred) < FAISS_MIN_QUERIES:  # pad with copies: faiss's BLAS path is 5x faster
            padded = np.resize(centred, (FAISS_MIN_QUERIES, centred.shape[1]))
        distances, indices = self.index.search(padded, min(CANDIDATES, len(self.frames.exact)))
        return settle(self.frames, queries, indices[:len(centred)], distances[:len(centred)], norms)


@contextlib.contextmanager
def torch_threads(threads):
    """Run the body with torch using ``threads`` intra-op threads (unchanged if None), then restore."""
    import torch
    previous = torch.get_num_threads()
    if threads:
        torch.set_num_threads(int(threads))
    try:
        yield
    finally:
        torch.set_num_threads(previous)


class TorchBruteSearch:
    """Brute force with torch in float32 on ``device`` (TF32 off), best candidates settled in float64."""

    def __init__(self, features, *, threads=None, device="cpu"):
        import torch
        if str(device).startswith("cuda") and not torch.cuda.is_available():
            raise MotionMatchingError(f"device={device}", "CUDA is not available to torch on this machine; "
                                      "use device='cpu'")
        self.torch, self.threads, self.device = torch, threads, torch.device(device)
        self.frames = CentredFrames(features)
        self.rows = torch.from_numpy(self.frames.frames).to(self.device)
        self.norms = torch.from_numpy(self.frames.norms).to(self.device)

    def nearest(self, queries, sources=None):
        """Indices (m,) int64 of the nearest frame of each query (m, n)."""
        torch = self.torch
        queries = checked_queries(queries, self.rows.shape[1])
        centred, norms = self.frames.centre(queries)
        step = max(1, TORCH_BLOCK_ELEMENTS // len(self.rows))
        count = min(CANDIDATES, len(self.rows))
        values = np.zeros((len(queries), count))
        candidates = np.zeros((len(queries), count), np.int64)
        matmul_tf32 = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = False
        try:
            with torch_threads(self.threads), torch.no_grad():
                for start in range(0, len(queries), step):
                    block = torch.from_numpy(centred[start:start + step]).to(self.device)
                    ranking = torch.addmm(self.norms, block, self.rows.T, alpha=-2.0)  # |x|^2 - 2 q.x
                    best = torch.topk(ranking, count, dim=1, largest=False, sorted=True)
                    values[start:start + step] = best.values.cpu().numpy()
                    candidates[start:start + step] = best.indices.cpu().numpy()
        finally:
            torch.backends.cuda.matmul.allow_tf32 = matmul_tf32
        return settle(self.frames, queries, candidates, values + norms[:, None] ** 2, norms)


def cell_search(features, *, threads=None):
    """The ``cells`` backend: the compiled search where it is built and takes ``features``, else numpy."""
    if compiled.accepts(features):  # built, float32 values, at most compiled.MAX_FEATURES features
        return compiled.CompiledCellSearch(features, threads=threads)
    return CellSearch(features, threads=threads)


BACKENDS = {"cells": cell_search, "cells-numpy": CellSearch, "balltree": BallTreeSearch,
            "faiss-flat": FaissFlatSearch, "torch": TorchBruteSearch}
DEFAULT_BACKEND = "cells"


def check_backend(backend, *, device="cpu"):
    """Raise ``InvalidOption`` for an unknown backend or a device ``backend`` does not run on."""
    if backend not in BACKENDS:
        raise InvalidOption("--backend", f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    if str(device) != "cpu" and backend not in (DEFAULT_BACKEND, "torch"):
        raise InvalidOption("--device", f"backend {backend!r} runs on the CPU only; pass --device cpu, or "
                                        f"--backend torch for {device}")


def make_searcher(features, *, backend=DEFAULT_BACKEND, threads=None, device="cpu"):
    """Build the exact searcher ``backend`` over ``features`` (F, n) float32.

    Returns an object whose ``nearest(queries (m, n) float32, sources=None)`` gives (m,) int64 frame
    indices; ``sources`` (m,) int64, the frame each query was made from, only speeds up ``cells``.
    ``device="cuda"`` selects the torch brute force on the GPU (with the default or ``torch`` backend).
    An unknown backend, or a device the backend does not run on, raises ``InvalidOption``.
    """
    check_backend(backend, device=device)
    if str(device) != "cpu":
        return TorchBruteSearch(features, threads=threads, device=device)
    if backend == "torch":
        return TorchBruteSearch(features, threads=threads, device=device)
    return BACKENDS[backend](features, threads=threads)
