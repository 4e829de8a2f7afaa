"""Every search backend against a float64 brute force, on random and adversarial data."""
import numpy as np
import pytest

from motion_matching.errors import MotionMatchingError
from motion_matching.neighbours import search
from motion_matching.neighbours.cells import compiled, fallback
from motion_matching.neighbours.queries import generate_queries

from conftest import NEEDS_TORCH, TORCH_ABSENT, random_features

if TORCH_ABSENT:  # the torch-free run of the suite checks every other backend
    torch = None
else:
    import torch

CPU_BACKENDS = ["cells", "cells-numpy", "balltree", "faiss-flat"] + ([] if TORCH_ABSENT else ["torch"])
CUDA = not TORCH_ABSENT and torch.cuda.is_available()
needs_compiled = pytest.mark.skipif(not compiled.available(),
                                    reason="the C extension _cellsearch was not built (no C compiler at install)")


def true_distances(features, queries):
    """Squared distances (m, F) float64 of every query to every frame, by direct differences."""
    features, queries = np.asarray(features, np.float64), np.asarray(queries, np.float64)
    rows = [((query - features) ** 2).sum(axis=1) for query in queries]
    return np.array(rows).reshape(len(queries), len(features))


def assert_exact(backend, features, queries, sources=None, **options):
    """The backend's frames are at the true minimum float64 distance (ties: any tied frame)."""
    indices = search.make_searcher(features, backend=backend, **options).nearest(queries, sources)
    assert_nearest(features, queries, indices)


def assert_nearest(features, queries, indices):
    """``indices`` (m,) int64 are at the true minimum float64 distance of each query (ties: any)."""
    assert indices.dtype == np.int64 and indices.shape == (len(queries),)
    distances = true_distances(features, queries)
    found = distances[np.arange(len(queries)), indices]
    wrong = np.flatnonzero(found > distances.min(axis=1) * (1 + 1e-12))
    assert len(wrong) == 0, f"{len(wrong)} of {len(queries)} not nearest, e.g. queries {wrong[:5]}"


def noisy_queries(features, count=400, seed=7):
    """The training query stream's first ``count`` queries and sources for ``features``."""
    return generate_queries(features, seed=seed, start=0, stop=count)


def duplicated_frames(seed=0):
    """1,500 frames drawn with repetition from 300 distinct ones: many exact ties."""
    distinct = random_features(300, seed=seed)
    return distinct[np.random.default_rng(seed).integers(0, 300, 1500)]


def grid_case(nfeatures=5, seed=0):
    """Integer frames and half-integer queries: many frames at exactly equal distances."""
    rng = np.random.default_rng(seed)
    features = rng.integers(0, 3, (600, nfeatures)).astype(np.float32)
    queries = (rng.integers(0, 6, (300, nfeatures)) / 2.0).astype(np.float32)
    return features, queries


@pytest.mark.parametrize("backend", CPU_BACKENDS)
def test_random_clustered_with_sources(backend):
    features = random_features(2000)
    assert_exact(backend, features, *noisy_queries(features))


@pytest.mark.parametrize("backend", CPU_BACKENDS)
def test_random_clustered_without_sources(backend):
    features = random_features(2000, seed=3)
    assert_exact(backend, features, noisy_queries(features)[0])


@pytest.mark.parametrize("backend", CPU_BACKENDS)
def test_duplicate_frames(backend):
    features = duplicated_frames()
    queries, sources = noisy_queries(features)
    assert_exact(backend, features, np.concatenate([queries, features[:100]]),
                 np.concatenate([sources, np.arange(100)]))


@pytest.mark.parametrize("backend", CPU_BACKENDS)
def test_exact_ties(backend):
    assert_exact(backend, *grid_case())


@pytest.mark.parametrize("backend", CPU_BACKENDS)
def test_queries_far_outside(backend):
    features = random_features(2000, seed=4)
    queries, sources = noisy_queries(features, count=200)
    assert_exact(backend, features, queries * 300.0 + 5000.0, sources)


@pytest.mark.parametrize("backend", CPU_BACKENDS)
def test_data_far_from_the_origin(backend):
    features = random_features(1500, seed=12) * 0.01 + 3000.0  # float32 spacing 2.4e-4 there
    assert_exact(backend, features, *noisy_queries(features, count=300))


@pytest.mark.parametrize("backend", CPU_BACKENDS)
@pytest.mark.parametrize("nframes", [1, 2, 45])
def test_tiny_databases(backend, nframes):
    features = random_features(nframes, seed=5)
    assert_exact(backend, features, *noisy_queries(features, count=50))


@pytest.mark.parametrize("backend", CPU_BACKENDS)
@pytest.mark.parametrize("nfeatures", [3, 64])
def test_other_dimensions(backend, nfeatures):
    features = random_features(1500, nfeatures=nfeatures, seed=6)
    assert_exact(backend, features, *noisy_queries(features, count=300))


@pytest.mark.parametrize("backend", CPU_BACKENDS)
def test_any_frame_as_source_and_two_threads(backend, monkeypatch):
    monkeypatch.setattr(fallback, "QUERY_BLOCK", 128)  # several blocks, searched two at a time
    monkeypatch.setattr(compiled, "BLOCK", 64)
    features = random_features(2000, seed=8)
    queries, _ = noisy_queries(features, count=700)
    sources = np.random.default_rng(0).integers(0, len(features), len(queries))
    assert_exact(backend, features, queries, sources, threads=2)


@pytest.mark.parametrize("backend", CPU_BACKENDS)
def test_empty_and_single_query(backend):
    features = random_features(500, seed=9)
    searcher = search.make_searcher(features, backend=backend)
    assert searcher.nearest(np.zeros((0, 27), np.float32)).shape == (0,)
    assert_exact(backend, features, features[7:8] + 0.01)


@pytest.mark.parametrize("ncells", [1, 7, 70])
def test_cells_with_other_cell_counts(ncells):
    features = random_features(3000, seed=10)
    queries, sources = noisy_queries(features, count=300)
    assert_nearest(features, queries, fallback.CellSearch(features, ncells=ncells).nearest(queries, sources))


@needs_compiled
@pytest.mark.parametrize("ncells", [1, 7, 70, 375])
def test_compiled_cells_with_other_cell_counts(ncells):
    features = random_features(3000, seed=10)
    queries, sources = noisy_queries(features, count=300)
    searcher = compiled.CompiledCellSearch(features, ncells=ncells)
    assert_nearest(features, queries, searcher.nearest(queries, sources))
    assert_nearest(features, queries, searcher.nearest(queries))


@needs_compiled
def test_compiled_cells_on_the_training_stream_of_a_larger_database():
    features = random_features(20000, seed=13)
    queries, sources = noisy_queries(features, count=1500)
    searcher = search.make_searcher(features)
    assert isinstance(searcher, compiled.CompiledCellSearch)
    assert_nearest(features, queries, searcher.nearest(queries, sources))


@needs_compiled
def test_compiled_cells_with_queries_near_frames_and_between_cells():
    features = random_features(4000, seed=14)
    rng = np.random.default_rng(1)
    pairs = rng.integers(0, len(features), (400, 2))
    midpoints = ((features[pairs[:, 0]].astype(np.float64) + features[pairs[:, 1]]) / 2).astype(np.float32)
    nudged = features[:400] + np.float32(1e-6) * rng.standard_normal((400, 27)).astype(np.float32)
    queries = np.concatenate([midpoints, nudged, features[400:800]])
    assert_exact("cells", features, queries)


def test_cells_falls_back_to_numpy_above_64_features():
    features = random_features(600, nfeatures=65, seed=17)
    assert not compiled.accepts(features)
    searcher = search.make_searcher(features)
    assert isinstance(searcher, fallback.CellSearch)
    queries, sources = noisy_queries(features, count=50)
    assert_nearest(features, queries, searcher.nearest(queries, sources))


def test_cells_falls_back_to_numpy_for_values_that_are_not_float32():
    features = random_features(1000, seed=15).astype(np.float64) + 1e-9
    assert not compiled.accepts(features)
    searcher = search.make_searcher(features)
    assert isinstance(searcher, fallback.CellSearch)
    queries = noisy_queries(features.astype(np.float32), count=100)[0]
    assert_nearest(features, queries, searcher.nearest(queries))


@needs_compiled
def test_compiled_cells_refuses_bad_input():
    features = random_features(500, seed=16)
    searcher = compiled.CompiledCellSearch(features)
    with pytest.raises(ValueError, match="NaN or infinite"):
        searcher.nearest(np.full((2, 27), np.nan, np.float32))
    with pytest.raises(ValueError, match="sources must be frame indices"):
        searcher.nearest(features[:2], np.array([0, 500]))
    with pytest.raises(ValueError, match="needs float32 features, at most 64"):
        compiled.CompiledCellSearch(features.astype(np.float64) + 1e-9)


def test_default_backend_is_cells():
    assert search.DEFAULT_BACKEND == "cells" and set(CPU_BACKENDS) <= set(search.BACKENDS)


def test_unknown_backend_and_bad_shapes_are_refused():
    features = random_features(100)
    with pytest.raises(ValueError, match="unknown backend 'kdtree'"):
        search.make_searcher(features, backend="kdtree")
    with pytest.raises(ValueError, match=r"queries must have shape \(m, 27\)"):
        search.make_searcher(features).nearest(np.zeros((3, 5), np.float32))
    with pytest.raises(ValueError, match=r"sources must be frame indices in 0\.\.99"):
        search.make_searcher(features).nearest(features[:2], np.array([0, 100]))
    with pytest.raises(ValueError, match="runs on the CPU only"):
        search.make_searcher(features, backend="balltree", device="cuda")


@pytest.mark.skipif(TORCH_ABSENT, reason=NEEDS_TORCH)
@pytest.mark.skipif(CUDA, reason="this machine has CUDA; the refusal needs none")
def test_cuda_refused_without_a_gpu():
    with pytest.raises(MotionMatchingError, match="CUDA is not available"):
        search.make_searcher(random_features(100), device="cuda")


@pytest.mark.skipif(not CUDA, reason="no CUDA device (or no torch): the GPU brute force needs one")
def test_cuda_brute_force_is_exact():
    features = random_features(2000)
    queries, _ = noisy_queries(features)
    assert_exact("torch", features, queries, device="cuda")
    assert_exact("torch", *grid_case(), device="cuda")
