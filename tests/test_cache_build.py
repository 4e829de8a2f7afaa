"""build_cache: resumable (stop_after and a real SIGKILL), locked, idempotent, and refusing to overwrite."""
import os
import subprocess
import sys
import textwrap

import h5py
import numpy as np
import pytest

from motion_matching import cache
from motion_matching.cache.lock import exclusive_lock
from motion_matching.errors import CacheLocked, CorruptCache, MissingFile, StaleCache
from motion_matching.neighbours import queries
from motion_matching.toolkit import formats

from cache_fixtures import (
    BACKEND,
    CHUNK,
    NQUERIES,
    SEED,
    assert_same_contents,
    build,
    command,
    copy_of,
    digest,
    make_reference,
)
from conftest import random_features


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """(features.bin, cache path) of an uninterrupted reference build."""
    return make_reference(tmp_path_factory.mktemp("reference"))


@pytest.fixture
def features_path(reference, tmp_path):
    """A copy of the reference features.bin in a fresh folder."""
    return copy_of(reference[0], tmp_path, "features.bin")


def test_interrupted_build_leaves_only_a_partial_file_and_resumes_to_the_same_cache(reference, features_path):
    out = features_path.parent / "cache.h5"
    first = build(features_path, out, stop_after=1)
    assert (first.status, first.rows_written) == ("interrupted", CHUNK)
    assert not out.exists() and os.path.exists(f"{out}.partial")
    second = build(features_path, out)
    assert (second.status, second.resumed_from, second.rows_written) == ("built", CHUNK, NQUERIES - CHUNK)
    assert not os.path.exists(f"{out}.partial") and not os.path.exists(f"{out}.lock")
    assert_same_contents(out, reference[1])


def test_ctrl_c_keeps_the_partial_file_releases_the_lock_and_resumes_identically(reference, features_path):
    out = features_path.parent / "cache.h5"

    def interrupt_after_first_chunk(done, total):
        if done == CHUNK:
            raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        build(features_path, out, progress=interrupt_after_first_chunk)
    assert not out.exists() and os.path.exists(f"{out}.partial") and not os.path.exists(f"{out}.lock")
    assert build(features_path, out).resumed_from == CHUNK
    assert_same_contents(out, reference[1])


def test_progress_reports_each_chunk_starting_from_the_resumed_row(features_path):
    out = features_path.parent / "cache.h5"
    build(features_path, out, stop_after=1)
    calls = []
    build(features_path, out, progress=lambda done, total: calls.append((done, total)))
    assert calls == [(CHUNK, NQUERIES), (2 * CHUNK, NQUERIES), (NQUERIES, NQUERIES)]


def test_partial_build_with_other_arguments_starts_over_and_says_so(features_path, caplog):
    out = features_path.parent / "cache.h5"
    build(features_path, out, stop_after=1)
    caplog.set_level("INFO", logger="motion_matching")
    result = build(features_path, out, seed=SEED + 1)
    assert result.resumed_from == 0
    assert f"{out}.partial: starting over: it was started with other arguments (seed differ)" in caplog.text
    features = formats.load_features(features_path).features
    with cache.open_cache(out, features_path=features_path) as reader:
        assert np.array_equal(reader.read(0, NQUERIES)[0],
                              queries.generate_queries(features, seed=SEED + 1, start=0, stop=NQUERIES)[0])


def test_unreadable_partial_file_starts_over(reference, features_path, caplog):
    out = features_path.parent / "cache.h5"
    with open(f"{out}.partial", "wb") as stream:
        stream.write(b"garbage from a crashed disk")
    build(features_path, out)
    assert (f"{out}.partial: starting over: it cannot be read (is a text file, not a projector cache (HDF5))\n"
            in caplog.text)
    assert_same_contents(out, reference[1])


def test_partial_file_whose_last_chunk_was_tampered_starts_over(reference, features_path, caplog):
    import h5py
    out = features_path.parent / "cache.h5"
    build(features_path, out, stop_after=2)
    with h5py.File(f"{out}.partial", "r+") as handle:
        handle["queries"][CHUNK + 5, 0] += 1.0
    result = build(features_path, out)
    assert result.resumed_from == 0 and "does not hold the expected queries" in caplog.text
    assert_same_contents(out, reference[1])


def test_up_to_date_cache_is_left_alone(reference, features_path):
    out = copy_of(reference[1], features_path.parent)
    before = (digest(out), os.stat(out).st_mtime_ns)
    result = build(features_path, out, backend="balltree")
    assert result.status == "up-to-date"
    assert (digest(out), os.stat(out).st_mtime_ns) == before


def test_stale_cache_is_refused_unchanged_without_force_and_rebuilt_with_it(reference, features_path):
    out = copy_of(reference[1], features_path.parent)
    before = digest(out)
    zeros = np.zeros(27, np.float32)
    formats.save_features(features_path, formats.Features(random_features(1500, seed=5), zeros, zeros + 1))
    with pytest.raises(StaleCache) as refusal:
        build(features_path, out)
    assert str(refusal.value).startswith(f"{out}: stale: built from features with SHA-256 ")
    assert str(refusal.value).endswith("; not replaced without --force; " + command(out, features_path))
    assert digest(out) == before
    assert build(features_path, out, force=True).status == "built"
    with cache.open_cache(out, features_path=features_path) as reader:
        assert reader.nframes == 1500


def test_another_seed_is_refused_unchanged_suggesting_the_caches_seed(reference, features_path):
    out = copy_of(reference[1], features_path.parent)
    before = digest(out)
    with pytest.raises(StaleCache) as refusal:
        build(features_path, out, seed=8)
    assert refusal.value.problem == "holds 20,000 queries of seed 7, not of seed 8; not replaced without --force"
    assert refusal.value.option == "--seed 7 to use it"
    assert refusal.value.command.endswith("--queries 20000 --seed 8 --force")
    assert digest(out) == before


def test_more_queries_of_the_same_stream_grow_the_cache_to_what_a_fresh_build_gives(reference, features_path):
    small = features_path.parent / "small.h5"
    build(features_path, small, nqueries=NQUERIES // 2 + 100)  # not a whole number of chunks
    grown = build(features_path, small)
    assert (grown.status, grown.resumed_from) == ("built", NQUERIES // 2 // CHUNK * CHUNK)
    assert grown.rows_written == NQUERIES - grown.resumed_from
    assert_same_contents(small, reference[1])


def test_fewer_queries_use_the_prefix_of_the_cache(reference, features_path):
    out = copy_of(reference[1], features_path.parent)
    before = (digest(out), os.stat(out).st_mtime_ns)
    result = build(features_path, out, nqueries=1_600)
    assert (result.status, result.nqueries) == ("up-to-date", NQUERIES)
    assert (digest(out), os.stat(out).st_mtime_ns) == before


def test_growing_needs_the_caches_backend(reference, features_path):
    out = copy_of(reference[1], features_path.parent)
    with pytest.raises(StaleCache, match="searched by the faiss-flat backend; not replaced without --force; pass "
                                         "--backend faiss-flat to grow it to 20,001 or run: "):
        build(features_path, out, nqueries=NQUERIES + 1, backend="balltree")


def test_damaged_cache_is_refused_unchanged_without_force(features_path):
    out = features_path.parent / "cache.h5"
    out.write_bytes(b"not a cache")
    with pytest.raises(CorruptCache) as refusal:
        build(features_path, out)
    assert str(refusal.value) == (f"{out}: is a text file, not a projector cache (HDF5); not replaced without --force; "
                                  + command(out, features_path))
    assert out.read_bytes() == b"not a cache"
    assert build(features_path, out, force=True).status == "built"


def test_a_held_lock_refuses_a_second_build(features_path):
    out = features_path.parent / "cache.h5"
    with exclusive_lock(out):
        with pytest.raises(CacheLocked, match=f"^{out}: another build-cache is writing this cache "
                                              f"\\(lock {out}.lock is held by process {os.getpid()}\\)"):
            build(features_path, out)
    assert not out.exists() and not os.path.exists(f"{out}.partial")


CHILD = textwrap.dedent("""
    import sys
    from motion_matching import cache

    def pause_mid_build(done, total):
        if done == 2 * {chunk}:
            print(done, flush=True)
            sys.stdin.readline()  # the parent kills us here, with the lock held and chunk 3 being generated

    cache.build_cache(sys.argv[1], out=sys.argv[2], nqueries={nqueries}, seed={seed}, chunk_rows={chunk},
                      backend="{backend}", progress=pause_mid_build)
""").format(chunk=CHUNK, nqueries=NQUERIES, seed=SEED, backend=BACKEND)


def test_build_killed_by_sigkill_blocks_others_while_alive_then_resumes_identically(reference, features_path):
    out = features_path.parent / "cache.h5"
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(features_path), str(out)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == str(2 * CHUNK)
        with pytest.raises(CacheLocked, match=f"held by process {child.pid}"):
            build(features_path, out)
    finally:
        child.kill()
        child.wait()
    assert child.returncode == -9 and not out.exists()
    result = build(features_path, out)
    assert (result.status, result.resumed_from) == ("built", 2 * CHUNK)
    assert_same_contents(out, reference[1])


MID_WRITE_CHILD = textwrap.dedent("""
    import sys
    import numpy as np
    from motion_matching.cache import build as cache_build

    commit = cache_build._commit

    def torn_commit(handle, first, queries, nearest):
        if first == {chunk}:  # chunk 2: half its rows land, wrong, then the kill comes before 'completed' moves
            handle["queries"][first:first + len(queries) // 2] = 0.0
            handle["nearest"][first:first + len(queries) // 2] = -1
            handle.flush()
            print(first, flush=True)
            sys.stdin.readline()
        commit(handle, first, queries, nearest)

    cache_build._commit = torn_commit
    cache_build.build_cache(sys.argv[1], out=sys.argv[2], nqueries={nqueries}, seed={seed}, chunk_rows={chunk},
                            backend="{backend}")
""").format(chunk=CHUNK, nqueries=NQUERIES, seed=SEED, backend=BACKEND)


def test_build_killed_mid_write_resumes_from_the_last_completed_chunk(reference, features_path):
    out = features_path.parent / "cache.h5"
    child = subprocess.Popen([sys.executable, "-c", MID_WRITE_CHILD, str(features_path), str(out)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == str(CHUNK)
    finally:
        child.kill()
        child.wait()
    assert child.returncode == -9
    result = build(features_path, out)
    assert (result.status, result.resumed_from) == ("built", CHUNK)
    assert_same_contents(out, reference[1])


def test_output_folder_that_does_not_exist_is_named(features_path):
    out = features_path.parent / "no such folder" / "cache.h5"
    with pytest.raises(MissingFile, match=f"^{out}: its folder {out.parent} does not exist$"):
        build(features_path, out)


def test_a_full_disk_is_refused_before_writing(features_path, monkeypatch):
    import shutil
    import types

    from motion_matching.errors import MotionMatchingError
    out = features_path.parent / "cache.h5"
    monkeypatch.setattr(shutil, "disk_usage", lambda folder: types.SimpleNamespace(free=10**6))
    with pytest.raises(MotionMatchingError, match=f"^{out}.partial: needs 2 MB more but {out.parent} has 1 MB free; "):
        build(features_path, out)
    assert not os.path.exists(f"{out}.partial")


def test_numpy_cell_search_workers_run_beside_the_query_thread_without_forking(features_path, monkeypatch):
    # several blocks per chunk, so the fallback search starts its workers while the builder's query thread
    # runs; forking there warns on Python 3.12+ (an error under the suite's warning filters)
    from motion_matching.neighbours.cells import fallback
    monkeypatch.setattr(fallback, "QUERY_BLOCK", 1024)
    out = features_path.parent / "numpy.h5"
    build(features_path, out, nqueries=8192, chunk_rows=4096, backend="cells-numpy", threads=2)
    with cache.open_cache(out, features_path=features_path) as reader:
        queries, nearest = reader.read(0, 8192)
    expected = build(features_path, features_path.parent / "flat.h5", nqueries=8192, chunk_rows=4096)
    with cache.open_cache(expected.path, features_path=features_path) as reader:
        assert np.array_equal(nearest, reader.read(0, 8192)[1])


def test_an_interrupted_build_of_other_queries_keeps_its_rows_and_says_so(reference, features_path, caplog):
    out = features_path.parent / "cache.h5"
    build(features_path, out, nqueries=2 * NQUERIES, stop_after=2)  # 2 chunks of a 40,000-query build
    caplog.set_level("INFO", logger="motion_matching")
    result = build(features_path, out)  # the query stream depends on the seed only: those rows are ours
    assert (result.status, result.resumed_from, result.rows_written) == ("built", 2 * CHUNK, NQUERIES - 2 * CHUNK)
    assert (f"{out}.partial: its interrupted build of other arguments searched 16,384 rows of the same query "
            "stream: the first 16,384 of them kept for this build of 20,000") in caplog.text
    assert "starting over" not in caplog.text and not os.path.exists(f"{out}.partial.new")
    assert_same_contents(out, reference[1])


def test_a_smaller_request_over_an_interrupted_build_keeps_the_rows_it_needs(reference, features_path):
    out = features_path.parent / "cache.h5"
    build(features_path, out, stop_after=1)
    result = build(features_path, out, nqueries=5_000)
    assert (result.status, result.resumed_from, result.rows_written) == ("built", 5_000, 0)
    with h5py.File(out, "r") as small, h5py.File(reference[1], "r") as whole:
        assert small.attrs["nqueries"] == 5_000 and small.attrs["completed"] == 5_000
        assert np.array_equal(small["queries"][:], whole["queries"][:5_000])
        assert np.array_equal(small["nearest"][:], whole["nearest"][:5_000])


def test_kept_rows_that_fill_no_chunk_of_the_new_build_start_over_and_say_so(reference, features_path, caplog):
    out = features_path.parent / "cache.h5"
    build(features_path, out, chunk_rows=CHUNK // 2, stop_after=1)
    caplog.set_level("INFO", logger="motion_matching")
    assert build(features_path, out).resumed_from == 0
    assert f"{out}.partial: starting over: it was started with other arguments (chunk_rows differ)" in caplog.text
    assert_same_contents(out, reference[1])


def test_force_resumes_its_own_interrupted_build_and_leaves_its_finished_cache_alone(reference, features_path):
    out = features_path.parent / "cache.h5"
    build(features_path, out, stop_after=1)
    forced = build(features_path, out, force=True)  # the same arguments: its own build, not another one
    assert (forced.status, forced.resumed_from, forced.rows_written) == ("built", CHUNK, NQUERIES - CHUNK)
    assert_same_contents(out, reference[1])
    before = (digest(out), os.stat(out).st_mtime_ns)
    assert build(features_path, out, force=True).status == "up-to-date"
    assert (digest(out), os.stat(out).st_mtime_ns) == before


def test_setup_says_what_it_does_before_the_first_chunk(features_path, caplog):
    caplog.set_level("INFO", logger="motion_matching")
    said = []
    build(features_path, features_path.parent / "cache.h5",
          progress=lambda done, total: said.append([record.getMessage() for record in caplog.records
                                                    if record.name != "motion_matching.threads"]))  # the load's
    assert said[0] == [f"reading {features_path}", f"building the {BACKEND} search over 2,000 frames"]
