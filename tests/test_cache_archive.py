"""A cache written by the first release still opens, verifies and holds the query stream bit for bit."""
import pathlib

import h5py
import numpy as np

from motion_matching import cache
from motion_matching.neighbours import queries
from motion_matching.toolkit import formats

ARCHIVE = pathlib.Path(__file__).parent / "data" / "cache_v1"
DOCUMENTED_ATTRIBUTES = {"format", "format_version", "features_sha256", "nframes", "nfeatures", "nqueries", "seed",
                         "query_recipe", "query_block", "noise_scale", "backend", "chunk_rows", "completed", "created"}


def test_version_1_archive_reads_the_same_query_stream_and_exact_neighbours():
    features = formats.load_features(ARCHIVE / "features.bin").features
    with cache.open_cache(ARCHIVE / "cache.h5", features_path=ARCHIVE / "features.bin") as reader:
        assert (reader.nqueries, reader.nframes, reader.seed, reader.chunk_rows) == (300, 100, 1234, 128)
        stored, nearest = reader.read(0, 300)
    assert np.array_equal(stored, queries.generate_queries(features, seed=1234, start=0, stop=300)[0])
    distances = ((stored.astype(np.float64)[:, None] - features.astype(np.float64)[None]) ** 2).sum(axis=2)
    assert np.array_equal(distances[np.arange(300), nearest], distances.min(axis=1))
    report = cache.verify_cache(ARCHIVE / "cache.h5", features_path=ARCHIVE / "features.bin", sample=300)
    assert report.neighbours_checked == 300


def test_version_1_archive_has_exactly_the_documented_attributes():
    with h5py.File(ARCHIVE / "cache.h5", "r") as handle:
        names = set(handle.attrs)
        assert {name for name in names if not name.startswith("version_")} == DOCUMENTED_ATTRIBUTES
        libraries = ("numpy", "faiss", "h5py", "hdf5", "torch", "sklearn", "motion_matching")
        assert {name for name in names if name.startswith("version_")} == {f"version_{name}" for name in libraries}
        assert handle["queries"].chunks == (128, 27) and handle["nearest"].chunks == (128,)
