"""Every reader, on every truncation and on hundreds of seeded random byte flips of a small valid file,
either reads a valid file or raises the project's one-line error: never another exception, a hang, or an
allocation the file's size does not warrant (fuzz_helpers.py). The cache's reader runs in a child process
(fuzz_cache_child.py), so that a crash inside the HDF5 library fails one test instead of the whole run.
"""
import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from motion_matching.data.bvh import text as bvh_text
from motion_matching.errors import MotionMatchingError
from motion_matching.toolkit import formats

from fuzz_helpers import flipped, outcome, truncations
from test_bvh import VALID as VALID_BVH

FLIPS = st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(1, 255)), min_size=1, max_size=4)
FUZZ = settings(max_examples=300, derandomize=True, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow])


def small_database():
    """4 + 3 frames of 3 bones (a chain) in two ranges, 2 contacts."""
    rng = np.random.default_rng(0)
    rotations = rng.standard_normal((7, 3, 4)).astype(np.float32)
    return formats.Database(rng.standard_normal((7, 3, 3)).astype(np.float32),
                            rng.standard_normal((7, 3, 3)).astype(np.float32), rotations,
                            rng.standard_normal((7, 3, 3)).astype(np.float32), np.array([-1, 0, 1], np.int32),
                            np.array([0, 4], np.int32), np.array([4, 7], np.int32),
                            rng.integers(0, 2, (7, 2)).astype(np.uint8))


def small_network():
    """3 -> 4 -> 2 in the runtime's layout."""
    rng = np.random.default_rng(1)

    def f32(*shape):
        return rng.standard_normal(shape).astype(np.float32)
    return formats.Network(f32(3), f32(3) + 2, f32(2), f32(2) + 2, [(f32(3, 4), f32(4)), (f32(4, 2), f32(2))])


def write_valid(folder, kind):
    """Write a small valid file of ``kind`` into ``folder``; returns (its bytes, the reader)."""
    path = folder / f"valid.{kind}"
    rng = np.random.default_rng(2)
    if kind == "database":
        formats.save_database(path, small_database())
        return path.read_bytes(), formats.load_database
    if kind == "features":
        values = rng.standard_normal((5, 4)).astype(np.float32)
        formats.save_features(path, formats.Features(values, values.mean(0), values.std(0) + 1))
        return path.read_bytes(), formats.load_features
    if kind == "latent":
        formats.save_latent(path, rng.standard_normal((5, 3)).astype(np.float32))
        return path.read_bytes(), formats.load_latent
    if kind == "network":
        formats.save_network(path, small_network())
        return path.read_bytes(), formats.load_network
    path.write_text(VALID_BVH)
    return path.read_bytes(), bvh_text.read_bvh


KINDS = ("database", "features", "latent", "network", "bvh")


@pytest.fixture(scope="module")
def originals(tmp_path_factory):
    """{kind: (valid bytes, reader, scratch path)} for every toolkit-file kind and BVH."""
    folder = tmp_path_factory.mktemp("fuzz")
    return {kind: (*write_valid(folder, kind), folder / f"damaged.{kind}") for kind in KINDS}


@pytest.mark.parametrize("kind", KINDS)
def test_the_original_reads_and_every_truncation_is_refused(originals, kind):
    data, read, scratch = originals[kind]
    assert outcome(read, scratch, data) == "valid"
    results = {outcome(read, scratch, prefix) for prefix in truncations(data)}
    # a BVH cut after a frame line's last digit is another valid file (or a number cut short)
    assert "valid" not in results or kind == "bvh"


def _fuzz_test(kind):
    @FUZZ
    @given(flips=FLIPS)
    def check(originals, flips):
        data, read, scratch = originals[kind]
        outcome(read, scratch, flipped(data, flips))
    check.__name__ = f"test_random_byte_flips_of_{kind}_read_valid_or_raise_one_line"
    return check


for _kind in KINDS:
    globals()[f"test_random_byte_flips_of_{_kind}_read_valid_or_raise_one_line"] = _fuzz_test(_kind)


EXPECTED = {"database": "a database.bin", "features": "a features.bin", "latent": "a latent.bin",
            "network": "a network .bin", "bvh": "a BVH text file"}


@pytest.mark.parametrize("kind", KINDS)
def test_an_empty_file_is_called_empty_by_every_reader(originals, kind):
    _, read, scratch = originals[kind]
    scratch.write_bytes(b"")
    with pytest.raises(MotionMatchingError) as refusal:
        read(scratch)
    assert str(refusal.value) == f"{scratch}: is an empty file, not {EXPECTED[kind]}"


@pytest.mark.parametrize("kind", KINDS)
def test_another_kind_of_file_is_named_by_every_reader(originals, kind):
    """Each reader given each other kind's valid file says what that file is (BVH: a text file, parsed)."""
    _, read, scratch = originals[kind]
    for other in KINDS:
        if other in (kind, "bvh"):
            continue
        scratch.write_bytes(originals[other][0])
        with pytest.raises(MotionMatchingError) as refusal:
            read(scratch)
        assert str(refusal.value).startswith(f"{scratch}: is {EXPECTED[other]} ("), (other, str(refusal.value))
        assert str(refusal.value).endswith(f", not {EXPECTED[kind]}"), (other, str(refusal.value))


def test_header_counts_far_beyond_the_file_are_refused_before_allocating(originals, tmp_path):
    """Counts near 2**32 in every header (products that would wrap around in int64) never allocate."""
    for kind in ("database", "features", "latent", "network"):
        data, read, scratch = originals[kind]
        for offset in range(0, len(data) - 3, 4):
            huge = data[:offset] + b"\xff\xff\xff\xff" + data[offset + 4:]
            outcome(read, scratch, huge)
    data, read, scratch = originals["database"]
    both = b"\xff" * 8 + data[8:]  # frames and bones both 2**32 - 1: their product times 3 exceeds 2**63
    assert outcome(read, scratch, both) == "TruncatedFile"


def test_every_cache_truncation_and_random_damage_reads_valid_or_raises_one_line(tmp_path):
    child = [sys.executable, "-c", "import fuzz_cache_child; fuzz_cache_child.main()", str(tmp_path), "200"]
    finished = subprocess.run(child, capture_output=True, text=True, timeout=600,
                              cwd=str(pathlib.Path(__file__).parent))
    assert finished.returncode == 0, finished.stderr[-3000:]
    counts = json.loads(finished.stdout.splitlines()[-1])
    assert "valid" not in counts["truncations"] and sum(counts["truncations"].values()) == counts["size"]
    assert sum(counts["flips"].values()) == 200
    assert counts["flips"].get("CorruptCache", 0) > 0 and counts["flips"].get("valid", 0) > 0
