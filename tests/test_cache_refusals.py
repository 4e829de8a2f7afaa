"""Every damaged, foreign, partial, stale or tampered cache is refused with one line naming the problem."""
import os

import h5py
import numpy as np
import pytest

from motion_matching import cache
from motion_matching.cache.lock import exclusive_lock, lock_holder
from motion_matching.errors import CorruptCache, MissingFile, StaleCache
from motion_matching.toolkit import formats

from cache_fixtures import CHUNK, NQUERIES, build, command, copy_of, make_reference, rebuild_command
from conftest import random_features

DEFAULTS = {"nqueries": cache.DEFAULT_NQUERIES, "seed": cache.DEFAULT_SEED}


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    return make_reference(tmp_path_factory.mktemp("reference"))


@pytest.fixture
def good(reference, tmp_path):
    """(features.bin, a fresh copy of the good cache) to tamper with."""
    return reference[0], copy_of(reference[1], tmp_path)


def edit(path, change):
    with h5py.File(path, "r+") as handle:
        change(handle)


def refusal(error_type, path, features_path, problem, **rebuild):
    """Assert ``open_cache`` and ``verify_cache`` both raise ``error_type`` with these fields and this line."""
    expected = f"{path}: {problem}; {command(path, features_path, **rebuild)}"
    for check in (cache.open_cache, cache.verify_cache):
        with pytest.raises(error_type) as raised:
            check(path, features_path=features_path)
        assert (raised.value.path, raised.value.problem) == (str(path), problem)
        assert raised.value.command == rebuild_command(path, features_path, **rebuild)
        assert str(raised.value) == expected
    return expected


def truncate(path):
    path.write_bytes(path.read_bytes()[:path.stat().st_size // 2])


def set_attribute(name, value):
    return lambda handle: handle.attrs.__setitem__(name, value)


FILE_PROBLEMS = {  # name: (damage, error, problem, rebuild command from the file's attributes?)
    "not HDF5": (lambda p: p.write_bytes(bytes(range(1, 256)) * 2), CorruptCache, "not an HDF5 file", False),
    "text": (lambda p: p.write_bytes(b"queries,nearest\n1,2\n"), CorruptCache,
             "is a text file, not a projector cache (HDF5)", False),
    "empty": (lambda p: p.write_bytes(b""), CorruptCache, "is an empty file, not a projector cache (HDF5)", False),
    "truncated": (truncate, CorruptCache, "truncated HDF5 file (it ends before the data its header announces)", False),
    "foreign HDF5": (lambda p: h5py.File(p, "w").close(), CorruptCache,
                     "not a projector cache (HDF5 attribute 'format' is None, expected "
                     "'motion-matching-projector-cache')", False),
    "bumped version": (lambda p: edit(p, set_attribute("format_version", 3)), CorruptCache,
                       "format_version 3 is not supported (this package reads versions 1, 2)", False),
    "partial": (lambda p: edit(p, set_attribute("completed", CHUNK)), CorruptCache,
                f"incomplete: {CHUNK} of {NQUERIES} rows written (an interrupted build)", True),
    "missing attribute": (lambda p: edit(p, lambda h: h.attrs.__delitem__("seed")), CorruptCache,
                          "attribute 'seed' is missing", False),
    "missing dataset": (lambda p: edit(p, lambda h: h.__delitem__("nearest")), CorruptCache,
                        "dataset 'nearest' is missing", True),
    "wrong dtype": (lambda p: edit(p, lambda h: (h.__delitem__("nearest"), h.create_dataset("nearest",
                                                 data=np.zeros(NQUERIES, np.int64)))), CorruptCache,
                    f"dataset 'nearest' is ({NQUERIES},) int64, attributes say ({NQUERIES},) int32", True),
    "flipped hash": (lambda p: edit(p, set_attribute("features_sha256", "0" * 64)), StaleCache,
                     "stale: built from features with SHA-256 0000000000000000..., the given features.bin has ", True),
    "tampered noise scale": (lambda p: edit(p, lambda h: set_attribute("noise_scale", h.attrs["noise_scale"] * 2)(h)),
                             CorruptCache, "attribute 'noise_scale' differs from the one recomputed from features.bin",
                             True),
}


@pytest.mark.parametrize("name", FILE_PROBLEMS)
def test_damaged_file_is_refused_with_its_problem_and_the_rebuild_command(good, name):
    features_path, path = good
    damage, error, problem, from_file = FILE_PROBLEMS[name]
    damage(path)
    if name == "flipped hash":  # the message goes on with the real hash
        problem += cache.features_sha256(features_path)[:16] + "..."
    refusal(error, path, features_path, problem, **({} if from_file else DEFAULTS))


def test_changed_features_make_the_cache_stale(good, tmp_path):
    features_path, path = good
    zeros = np.zeros(27, np.float32)
    other = tmp_path / "other.bin"
    formats.save_features(other, formats.Features(random_features(2000, seed=9), zeros, zeros + 1))
    expected = (f"stale: built from features with SHA-256 {cache.features_sha256(features_path)[:16]}..., the "
                f"given features.bin has {cache.features_sha256(other)[:16]}...")
    refusal(StaleCache, path, other, expected)


def test_missing_cache_and_interrupted_build_are_told_apart(good, tmp_path):
    features_path, _ = good
    path = tmp_path / "never.h5"
    refusal(MissingFile, path, features_path, "no such file", **DEFAULTS)
    build(features_path, path, stop_after=1)
    resume = command(path, features_path).replace(" --force", "")  # its own count and seed, no --force
    for check in (cache.open_cache, cache.verify_cache, cache.cache_info):
        with pytest.raises(MissingFile) as raised:
            check(path, features_path=features_path)
        assert str(raised.value) == (f"{path}: an interrupted build left only never.h5.partial; the same command "
                                     f"resumes it; {resume}")


def test_a_build_in_progress_is_said_so_naming_the_process(good, tmp_path):
    features_path, _ = good
    path = tmp_path / "race.h5"
    build(features_path, path, stop_after=1)
    with exclusive_lock(path):  # as a running build holds it
        for check in (cache.open_cache, cache.verify_cache, cache.cache_info):
            with pytest.raises(MissingFile) as raised:
                check(path, features_path=features_path)
            assert str(raised.value) == (f"{path}: a build is in progress (race.h5.lock is held by process "
                                         f"{os.getpid()}, writing race.h5.partial); wait for it to finish")
    assert lock_holder(path) is None


ROW_PROBLEMS = {  # name: (row, column, value, problem from reading, problem from verify_cache)
    "NaN query": (5, "queries", np.nan, "queries row 5 holds NaN or Inf", "queries row 5 holds NaN or Inf"),
    "Inf query in a later chunk": (CHUNK + 3, "queries", np.inf, f"queries row {CHUNK + 3} holds NaN or Inf",
                                   f"queries row {CHUNK + 3} holds NaN or Inf"),
    "frame out of range": (7, "nearest", 2000, "nearest row 7 is frame 2000, outside 0..1999",
                           "nearest row 7 is frame 2000, outside 0..1999"),
}


@pytest.mark.parametrize("name", ROW_PROBLEMS)
def test_bad_rows_are_refused_when_read_and_when_verified(good, name):
    features_path, path = good
    row, dataset, value, problem, verify_problem = ROW_PROBLEMS[name]
    edit(path, lambda h: h[dataset].__setitem__((row, 0) if dataset == "queries" else row, value))
    for start, stop in ((row - 1, row + 1), (0, 2 * CHUNK)):  # through the chunk buffer, and direct
        with cache.open_cache(path, features_path=features_path) as reader:
            reader.read(2 * CHUNK, NQUERIES)  # rows of other chunks still read
            with pytest.raises(CorruptCache) as raised:
                reader.read(start, stop)
        assert str(raised.value) == f"{path}: {problem}; {command(path, features_path)}"
    with pytest.raises(CorruptCache) as raised:
        cache.verify_cache(path, features_path=features_path, sample=NQUERIES)
    assert str(raised.value) == f"{path}: {verify_problem}; {command(path, features_path)}"


def test_verify_finds_a_query_that_does_not_regenerate(good):
    features_path, path = good
    edit(path, lambda h: h["queries"].__setitem__((11, 3), h["queries"][11, 3] + 1e-3))
    with pytest.raises(CorruptCache, match=f"^{path}: queries row 11 differs from query 11 regenerated from seed 7; "):
        cache.verify_cache(path, features_path=features_path, sample=NQUERIES, seed=0)


def test_verify_finds_a_wrong_neighbour(good):
    features_path, path = good
    with h5py.File(path, "r") as handle:
        wrong = (int(handle["nearest"][9]) + 1000) % 2000
    edit(path, lambda h: h["nearest"].__setitem__(9, wrong))
    with pytest.raises(CorruptCache, match=f"^{path}: nearest row 9 is frame {wrong} at squared distance .* but frame "
                                           ".* \\(float64 brute force\\); run: "):
        cache.verify_cache(path, features_path=features_path, sample=NQUERIES, seed=0)


def test_verify_passes_a_good_cache_and_reports_what_it_checked(good):
    features_path, path = good
    report = cache.verify_cache(path, features_path=features_path, sample=500, seed=1)
    assert (report.nqueries, report.rows_scanned, report.rows_regenerated, report.neighbours_checked) == \
        (NQUERIES, NQUERIES, 500, 500)
    assert 0.0 <= report.worst_excess <= 4e-6
