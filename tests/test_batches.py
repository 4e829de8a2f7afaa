"""The two batch sources: the online one follows the query stream, the offline one reads a cache in order."""
import collections
import threading

import h5py
import numpy as np
import pytest
import torch

from motion_matching import cache
from motion_matching.errors import CorruptCache
from motion_matching.neighbours import queries
from motion_matching.neighbours.search import make_searcher
from motion_matching.projector.batches import OfflineBatches, OnlineBatches

from conftest import random_features


class MemoryReader:
    """A cache reader over arrays: row r's query is filled with r, so batches show which rows they hold."""

    def __init__(self, nqueries, *, chunk_rows, nframes=50, seed=7, nearest=None):
        self.nqueries, self.chunk_rows, self.nframes, self.seed, self.nfeatures = nqueries, chunk_rows, nframes, seed, 3
        self.queries = np.repeat(np.arange(nqueries, dtype=np.float32)[:, None], 3, axis=1)
        self.nearest = np.arange(nqueries, dtype=np.int64) % nframes if nearest is None else nearest
        self.reads, self.threads = [], []

    def read(self, start, stop):
        self.reads.append((start, stop))
        self.threads.append(threading.current_thread().name)
        return self.queries[start:stop].copy(), self.nearest[start:stop].copy()


def rows_of(source, nbatches):
    """Row numbers (nbatches * batch,) int64 the next batches hold, checking queries and nearest agree."""
    rows = []
    for _ in range(nbatches):
        batch = source.next()
        row = batch.queries[:, 0].to(torch.int64)
        assert torch.equal(batch.nearest, row % source.nframes)
        rows.append(row.numpy())
    return np.concatenate(rows)


def test_online_batches_are_slices_of_the_query_stream():
    features = random_features(600, seed=3)
    source = OnlineBatches(features, seed=11, batch_size=40)
    source.seek(101)  # batch 101 starts at query 4,040 and crosses the stream's 4,096-query blocks
    tree = make_searcher(features, backend="balltree")
    for step in range(101, 104):
        batch = source.next()
        expected, _ = queries.generate_queries(features, seed=11, start=step * 40, stop=(step + 1) * 40)
        assert np.array_equal(batch.queries.numpy(), expected)
        assert np.array_equal(batch.nearest.numpy(), tree.nearest(expected))


def test_offline_first_pass_reads_the_file_in_order_in_large_blocks():
    reader = MemoryReader(1050, chunk_rows=100)  # the last chunk is short
    source = OfflineBatches(reader, batch_size=64, path="c.h5", block_rows=300)
    assert np.array_equal(rows_of(source, 16), np.arange(1024))
    assert reader.reads[:4] == [(0, 300), (300, 600), (600, 900), (900, 1050)]
    assert all(name.startswith("cache-read") for name in reader.threads[1:])  # read ahead in the background
    source.close()


def test_offline_later_passes_read_every_row_once_in_a_new_chunk_order():
    reader = MemoryReader(1050, chunk_rows=100)
    source = OfflineBatches(reader, batch_size=50, path="c.h5", block_rows=300)
    passes = rows_of(source, 63).reshape(3, 1050)
    for rows in passes:
        assert np.array_equal(np.sort(rows), np.arange(1050))
    chunks = [rows[np.r_[0:1000:100]] // 100 for rows in passes[1:]]  # first row of each slot
    assert not np.array_equal(chunks[0], np.arange(10)) and not np.array_equal(chunks[0], chunks[1])
    for rows in passes:
        starts = np.flatnonzero(rows % 100 == 0)
        assert all(np.array_equal(rows[s:s + 50], np.arange(rows[s], rows[s] + 50)) for s in starts)


@pytest.mark.parametrize("preload", [False, True])
def test_offline_seek_gives_the_batches_an_unbroken_run_gives(preload):
    whole = rows_of(OfflineBatches(MemoryReader(1050, chunk_rows=100), batch_size=48, path="c", block_rows=200), 60)
    source = OfflineBatches(MemoryReader(1050, chunk_rows=100), batch_size=48, path="c", block_rows=200,
                            preload=preload)
    source.seek(37)
    assert np.array_equal(rows_of(source, 23), whole[37 * 48:])


@pytest.mark.parametrize("preload", [False, True])
def test_offline_raises_the_readers_refusal_of_a_frame_outside_the_features(tmp_path, small_files, preload):
    features_path, _ = small_files
    path = tmp_path / "c.h5"
    cache.build_cache(features_path, out=path, nqueries=600, seed=5, chunk_rows=100)
    with h5py.File(path, "r+") as handle:
        handle["nearest"][321] = 2000
    with cache.open_cache(path, features_path=features_path) as reader:
        if preload:
            with pytest.raises(CorruptCache) as raised:
                OfflineBatches(reader, batch_size=32, path=path, preload=True)
        else:
            source = OfflineBatches(reader, batch_size=32, path=path, block_rows=200)
            for _ in range(6):  # rows 0..191 come from the first, valid block
                source.next()
            with pytest.raises(CorruptCache) as raised:  # rows 200..399 were read ahead in a thread
                source.next()
            source.close()
    problem = "nearest row 321 is frame 2000, outside 0..1999"
    command = f"mm-projector build-cache --features {features_path} --out {path} --queries 600 --seed 5 --force"
    assert (raised.value.problem, raised.value.command) == (problem, command)
    assert str(raised.value) == f"{path}: {problem}; run: {command}"


def test_cache_neighbours_equal_the_balltree_ones_except_at_ties(tmp_path, small_files):
    features_path, _ = small_files
    cache.build_cache(features_path, out=tmp_path / "c.h5", nqueries=3000, seed=5, chunk_rows=1024)
    X = random_features(2000)
    with cache.open_cache(tmp_path / "c.h5", features_path=features_path) as reader:
        Xhat, nearest = reader.read(0, 3000)
    assert np.array_equal(Xhat, queries.generate_queries(X, seed=5, start=0, stop=3000)[0])
    tree = make_searcher(X, backend="balltree").nearest(Xhat)
    differ = np.flatnonzero(tree != nearest)
    distance = lambda index: np.linalg.norm(Xhat[differ].astype(np.float64) - X[index[differ]], axis=1)  # noqa: E731
    assert np.allclose(distance(nearest), distance(tree), rtol=1e-6, atol=1e-6)
    assert len(differ) <= 3  # ties are rare in continuous data


def test_batches_across_block_boundaries_are_joined_into_one_reused_buffer_holding_the_right_rows():
    source = OfflineBatches(MemoryReader(1050, chunk_rows=100), batch_size=70, path="c", block_rows=100)
    pointers = collections.Counter()
    for step in range(30):  # 2,100 rows: two passes, most batches spanning two blocks
        batch = source.next()
        row = batch.queries[:, 0].to(torch.int64)
        assert torch.equal(batch.nearest, row % 50)
        if step < 15:
            assert torch.equal(row, torch.arange(step * 70, step * 70 + 70))
        pointers[batch.queries.data_ptr()] += 1
    assert pointers.most_common(1)[0][1] >= 15  # the joined batches share one buffer; others view their block
    source.close()
