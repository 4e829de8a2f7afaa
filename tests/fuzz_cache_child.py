"""Child process of the cache fuzz test: every truncation and seeded random byte flips of a small cache.

    python -c "import fuzz_cache_child; fuzz_cache_child.main()" FOLDER FLIPS

Builds a 20-query cache of 10 frames x 3 features in FOLDER, reads every damaged copy the way training,
cache-info and verify-cache do, and prints one JSON line: the file size and the count of each outcome
("valid" or an error class name) for truncations and for flips. Any other exception, hang or oversized
allocation ends it with a traceback (fuzz_helpers.outcome); a crash inside HDF5 ends it by a signal.
"""
import collections
import json
import logging
import pathlib
import sys

import numpy as np

from motion_matching import cache
from motion_matching.toolkit import formats

from fuzz_helpers import flipped, outcome, truncations


def read_like_every_command(path, features_path):
    """Open, read every row, cache-info and verify-cache the cache at ``path``."""
    with cache.open_cache(path, features_path=features_path) as reader:
        reader.read(0, reader.nqueries)
    cache.cache_info(path, features_path=features_path)
    cache.verify_cache(path, features_path=features_path, sample=5, seed=0)


def main():
    folder, nflips = pathlib.Path(sys.argv[1]), int(sys.argv[2])
    logging.disable(logging.WARNING)
    rng = np.random.default_rng(0)
    values = rng.standard_normal((10, 3)).astype(np.float32)
    zeros = np.zeros(3, np.float32)
    features_path = folder / "features.bin"
    formats.save_features(features_path, formats.Features(values, zeros, zeros + 1))
    cache.build_cache(features_path, out=folder / "valid.h5", nqueries=20, seed=1, chunk_rows=8, backend="balltree")
    data = (folder / "valid.h5").read_bytes()
    scratch = folder / "damaged.h5"

    def read(path):
        read_like_every_command(path, features_path)
    assert outcome(read, scratch, data, per_byte=64) == "valid"
    counts = {"size": len(data), "truncations": collections.Counter(), "flips": collections.Counter()}
    for prefix in truncations(data):
        counts["truncations"][outcome(read, scratch, prefix, per_byte=64)] += 1
    for _ in range(nflips):
        flips = [(int(rng.integers(len(data))), int(rng.integers(1, 256))) for _ in range(int(rng.integers(1, 4)))]
        counts["flips"][outcome(read, scratch, flipped(data, flips), per_byte=64)] += 1
    print(json.dumps(counts))
