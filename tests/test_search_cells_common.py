"""The pieces both cells searches share (cells/common.py), the C loop's constants, and both searches
giving the float64 brute force's answers on the same data."""
import numpy as np
import pytest
from test_search import noisy_queries, true_distances

from motion_matching.neighbours.cells import common, compiled, fallback
from motion_matching.neighbours.exact import UNIT_ROUNDOFF

from conftest import random_features

needs_compiled = pytest.mark.skipif(not compiled.available(),
                                    reason="the C extension _cellsearch was not built (no C compiler at install)")


def test_cell_count_grows_as_the_root_of_the_frames_and_keeps_enough_frames_per_cell():
    assert common.cell_count(1) == 1 and common.cell_count(7) == 1
    assert common.cell_count(45) == 45 // common.MIN_FRAMES_PER_CELL
    assert common.cell_count(50_000) == 1006
    for nframes in (10, 100, 1000, 10_000, 800_000):
        assert 1 <= common.cell_count(nframes) <= max(1, nframes // common.MIN_FRAMES_PER_CELL)


def test_kmeans_gives_non_empty_cells_of_nearest_centroids():
    frames = random_features(3000, seed=31)
    centroids, assignment = common.kmeans(frames, 70)
    assert centroids.dtype == np.float32 and assignment.dtype == np.int64
    assert 1 < len(centroids) <= 70 and assignment.shape == (3000,)
    assert np.array_equal(np.unique(assignment), np.arange(len(centroids)))  # every cell non-empty
    distances = ((frames[:, None, :].astype(np.float64) - centroids[None].astype(np.float64)) ** 2).sum(axis=2)
    nearest = distances[np.arange(len(frames)), distances.argmin(axis=1)]
    assert np.allclose(distances[np.arange(len(frames)), assignment], nearest, rtol=1e-4, atol=1e-5)


def test_kmeans_caps_the_cells_and_uses_the_mean_for_one():
    frames = random_features(30, seed=32)
    centroids, assignment = common.kmeans(frames, 100)
    assert len(centroids) <= 30 // common.MIN_FRAMES_PER_CELL
    centroids, assignment = common.kmeans(frames[:10], 5)
    assert np.array_equal(assignment, np.zeros(10, np.int64))
    assert np.allclose(centroids[0], frames[:10].astype(np.float64).mean(axis=0), atol=1e-6)


def test_principal_axes_split_each_offset_into_its_part_along_them_and_a_residual():
    rng = np.random.default_rng(33)
    offsets = rng.standard_normal((200, 3)) @ rng.standard_normal((3, 10)) + 1e-3 * rng.standard_normal((200, 10))
    axes, along, residuals = common.principal_axes(offsets, 3)
    assert axes.shape == (3, 10) and along.shape == (200, 3) and residuals.shape == (200,)
    assert np.array_equal(axes, axes.astype(np.float32).astype(np.float64))  # float32 values
    assert np.allclose(axes @ axes.T, np.eye(3), atol=1e-6)
    assert np.allclose(along, offsets @ axes.T)
    assert np.allclose(residuals ** 2 + (along ** 2).sum(axis=1), (offsets ** 2).sum(axis=1), rtol=1e-5)
    assert residuals.max() < 0.02 < np.abs(along).max()  # the data lie near a 3-D subspace


def test_rounded_outwards_contains_the_float64_intervals():
    values = np.random.default_rng(34).standard_normal((2, 50)) * 1e3
    low, high = common.rounded_outwards(values.min(axis=0) - 1e-9, values.max(axis=0) + 1e-9)
    assert low.dtype == high.dtype == np.float32
    assert (low.astype(np.float64) <= values.min(axis=0) - 1e-9).all()
    assert (high.astype(np.float64) >= values.max(axis=0) + 1e-9).all()


def test_checked_queries_and_sources_refuse_bad_shapes_and_indices():
    queries = common.checked_queries(np.zeros((3, 5), np.float64), 5)
    assert queries.dtype == np.float32 and queries.flags.c_contiguous
    with pytest.raises(ValueError, match=r"queries must have shape \(m, 5\), got \(3, 4\)"):
        common.checked_queries(np.zeros((3, 4)), 5)
    assert common.checked_sources(None, 3, 10) is None
    assert common.checked_sources([0, 9, 4], 3, 10).dtype == np.int64
    with pytest.raises(ValueError, match=r"sources must have shape \(3,\)"):
        common.checked_sources([0, 1], 3, 10)
    with pytest.raises(ValueError, match=r"sources must be frame indices in 0\.\.9"):
        common.checked_sources([0, 1, 10], 3, 10)
    assert common.available_cores() >= 1


@needs_compiled
def test_the_c_loops_constants_are_the_python_ones_and_its_slacks_cover_its_float32_errors():
    loop = compiled._cellsearch
    assert loop.ROUNDOFF == UNIT_ROUNDOFF == 2.0 ** -24
    assert loop.ROUND_UP == common.ROUND_UP
    assert (compiled.LANES, compiled.MAX_FEATURES) == (loop.LANES, loop.MAX_FEATURES) == (8, 64)
    n, u = loop.MAX_FEATURES, loop.ROUNDOFF  # the bounds cellsearch.h states, at the most features
    assert loop.RANK_SLACK > 2 * (n + 2) * u
    assert loop.SKETCH_SLACK > (n + 1) * u
    assert loop.RESIDUAL_SLACK > 8 * (n + 1) * u
    assert loop.BOUND_SLACK >= loop.RANK_SLACK


@needs_compiled
def test_the_c_loop_refuses_more_features_than_its_slacks_hold():
    n = compiled.MAX_FEATURES + 1
    with pytest.raises(ValueError, match="invalid sizes"):
        compiled._cellsearch.nearest(n, 72, 1, 1, 0, *([None] * 16))


@needs_compiled
@pytest.mark.parametrize("with_sources", [True, False])
def test_compiled_and_numpy_searches_give_the_brute_force_answers_on_the_same_data(with_sources):
    features = random_features(3000, seed=35)
    queries, sources = noisy_queries(features, count=500, seed=3)
    sources = sources if with_sources else None
    distances = true_distances(features, queries)
    rows = np.arange(len(queries))
    minimum = distances.min(axis=1)
    for searcher in (compiled.CompiledCellSearch(features), fallback.CellSearch(features)):
        found = searcher.nearest(queries, sources)
        assert np.array_equal(distances[rows, found], minimum), type(searcher).__name__
