"""The reader API training uses: open_cache validates, CacheReader.read serves exact rows."""
import numpy as np
import pytest

from motion_matching import cache
from motion_matching.neighbours import queries

from conftest import write_small_toolkit_files

NQUERIES, SEED, CHUNK = 20_000, 7, 8192


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """(features.bin, cache path) of a 20,000-query cache over 2,000 random frames."""
    folder = tmp_path_factory.mktemp("reader")
    features_path, _ = write_small_toolkit_files(folder)
    out = folder / "cache.h5"
    cache.build_cache(features_path, out=out, nqueries=NQUERIES, seed=SEED, chunk_rows=CHUNK, backend="faiss-flat")
    return features_path, out


def test_reader_attributes_match_the_build(built):
    features_path, out = built
    with cache.open_cache(out, features_path=features_path) as reader:
        assert (reader.nqueries, reader.nframes, reader.nfeatures, reader.seed, reader.chunk_rows) == \
            (NQUERIES, 2000, 27, SEED, CHUNK)
        assert reader.features_sha256 == cache.features_sha256(features_path)


def test_read_returns_the_query_stream_and_its_nearest_frames(built):
    features_path, out = built
    from motion_matching.toolkit import formats
    features = formats.load_features(features_path).features
    expected, _ = queries.generate_queries(features, seed=SEED, start=8000, stop=9500)
    with cache.open_cache(out, features_path=features_path) as reader:
        got_queries, got_nearest = reader.read(8000, 9500)
    assert got_queries.dtype == np.float32 and got_nearest.dtype == np.int64
    assert np.array_equal(got_queries, expected)
    frames, q = features.astype(np.float64), expected.astype(np.float64)
    distances = (q ** 2).sum(1)[:, None] + (frames ** 2).sum(1)[None, :] - 2 * q @ frames.T  # float64 brute force
    assert np.allclose(distances[np.arange(len(q)), got_nearest], distances.min(axis=1), rtol=0, atol=1e-9)


@pytest.mark.parametrize("size", [1, 32, 5000, CHUNK, NQUERIES])
def test_sequential_reads_of_any_size_tile_the_whole_cache(built, size):
    features_path, out = built
    with cache.open_cache(out, features_path=features_path) as reader:
        whole = reader.read(0, NQUERIES)
        parts = [reader.read(start, min(start + size, NQUERIES)) for start in range(0, NQUERIES, size)]
    assert np.array_equal(np.concatenate([p[0] for p in parts]), whole[0])
    assert np.array_equal(np.concatenate([p[1] for p in parts]), whole[1])


def test_read_outside_the_rows_is_a_programming_error(built):
    features_path, out = built
    with cache.open_cache(out, features_path=features_path) as reader:
        with pytest.raises(ValueError, match="outside"):
            reader.read(NQUERIES - 1, NQUERIES + 1)


def test_unaligned_reads_across_chunks_equal_the_stored_rows(built):
    import h5py
    features_path, out = built
    with h5py.File(out, "r") as handle:
        stored = handle["queries"][:], handle["nearest"][:].astype(np.int64)
    ranges = [(100, 19_000), (CHUNK - 1, 2 * CHUNK + 1), (2 * CHUNK, NQUERIES), (5, 5), (0, NQUERIES)]
    with cache.open_cache(out, features_path=features_path) as reader:
        for start, stop in ranges:
            got = reader.read(start, stop)
            assert np.array_equal(got[0], stored[0][start:stop]) and np.array_equal(got[1], stored[1][start:stop])
