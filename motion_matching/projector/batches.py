"""The two sources of training batches: noisy queries and the index of each one's exact nearest frame.

Both cut the same deterministic query stream (``queries.generate_queries``) into consecutive batches:
batch ``s`` holds queries ``s * batch_size .. (s + 1) * batch_size - 1``. ``OnlineBatches`` searches each
batch with a BallTree, as the toolkit does; ``OfflineBatches`` reads queries and neighbours from a cache
built with the same seed, so both give the same batches until the cache runs out. After that the
offline source goes on with the cache's chunks in a seeded random order (a new order per pass).

A batch is valid until the next call to ``next()``: batches that must be copied (to a GPU, or joined
across a block boundary) are written into tensors made once and reused.
"""
import concurrent.futures
import math
import typing

import numpy as np
import torch

from motion_matching.neighbours import queries as query_stream
from motion_matching.neighbours.search import make_searcher

DEFAULT_BLOCK_ROWS = 1 << 17  # rows read from the cache at a time: 14 MiB of queries for 27 features


class Batch(typing.NamedTuple):
    """``queries`` (batch, nfeatures) float32 and ``nearest`` (batch,) int64 frame indices, on the device."""

    queries: torch.Tensor
    nearest: torch.Tensor


class _BatchBuffers:
    """Tensors of one batch on ``device``, made once and refilled; on CUDA through pinned host memory."""

    def __init__(self, batch_size, nfeatures, device):
        self.queries = torch.empty((batch_size, nfeatures), dtype=torch.float32, device=device)
        self.nearest = torch.empty((batch_size,), dtype=torch.int64, device=device)
        self._host, self._copied = None, None
        if device.type == "cuda":
            self._host = (torch.empty_like(self.queries, device="cpu").pin_memory(),
                          torch.empty_like(self.nearest, device="cpu").pin_memory())

    def from_numpy(self, queries, nearest):
        """A ``Batch`` holding copies of numpy ``queries`` (B, n) float32 and ``nearest`` (B,) int64."""
        if self._host is None:
            self.queries.copy_(torch.from_numpy(queries))
            self.nearest.copy_(torch.from_numpy(nearest))
            return Batch(self.queries, self.nearest)
        if self._copied is not None:  # the previous batch's copy must leave the pinned memory first
            self._copied.synchronize()
        self._host[0].numpy()[...] = queries
        self._host[1].numpy()[...] = nearest
        self.queries.copy_(self._host[0], non_blocking=True)
        self.nearest.copy_(self._host[1], non_blocking=True)
        self._copied = torch.cuda.Event()
        self._copied.record()
        return Batch(self.queries, self.nearest)

    def joined(self, pieces):
        """A ``Batch`` joining ``[(queries, nearest)]`` tensor pieces (already on the device)."""
        torch.cat([piece[0] for piece in pieces], out=self.queries)
        torch.cat([piece[1] for piece in pieces], out=self.nearest)
        return Batch(self.queries, self.nearest)


class OnlineBatches:
    """The toolkit's reference path: draw each batch of queries, then search it with a BallTree."""

    def __init__(self, features, *, seed, batch_size, device="cpu", searcher=None):
        self.features = np.ascontiguousarray(features, dtype=np.float32)
        self.scale = query_stream.noise_scale(self.features)
        self.searcher = searcher if searcher is not None else make_searcher(self.features, backend="balltree")
        self.seed, self.batch_size, self.device = seed, batch_size, torch.device(device)
        self.position = 0
        self._start, self._queries = 0, self.features[:0]
        self._buffers = None if self.device.type == "cpu" else _BatchBuffers(batch_size, self.features.shape[1],
                                                                              self.device)

    def seek(self, step):
        """Make the next batch batch number ``step`` (used when resuming)."""
        self.position = step * self.batch_size

    def _slice(self, start, stop):
        # the stream is generated a few thousand queries at a time; query i depends only on (seed, i)
        if start < self._start or stop > self._start + len(self._queries):
            count = max(stop - start, query_stream.QUERY_BLOCK)
            self._queries, _ = query_stream.generate_queries(
                self.features, seed=self.seed, start=start, stop=start + count, scale=self.scale)
            self._start = start
        return self._queries[start - self._start:stop - self._start]

    def next(self):
        """The next ``Batch``; the nearest frames come from one BallTree query of the batch."""
        Xhat = self._slice(self.position, self.position + self.batch_size)
        nearest = np.asarray(self.searcher.nearest(Xhat), dtype=np.int64)
        self.position += self.batch_size
        if self._buffers is None:  # CPU: the tensors share the arrays' memory, nothing is copied
            return Batch(torch.from_numpy(Xhat), torch.from_numpy(nearest))
        return self._buffers.from_numpy(Xhat, nearest)


class _Block(typing.NamedTuple):
    start: int           # position of the first row in the endless stream of passes
    stop: int
    queries: torch.Tensor
    nearest: torch.Tensor


class OfflineBatches:
    """Batches read from an open cache reader, a large block of rows at a time.

    ``reader`` has ``nqueries``, ``nframes``, ``chunk_rows``, ``seed`` and ``read(start, stop) ->
    (queries (k, n) float32, nearest (k,) int64)``. Only the current block and the next one (read
    ahead by a background thread) are held in memory unless ``preload``, which reads the whole cache
    once. Blocks live on ``device``. Call ``close()`` when done.

    The rows are not checked again here: ``CacheReader.read`` refuses a non-finite query or a frame out
    of range with ``CorruptCache``, and ``next`` raises that error as it is.
    """

    def __init__(self, reader, *, batch_size, path, device="cpu", block_rows=DEFAULT_BLOCK_ROWS, preload=False):
        self.reader, self.path, self.batch_size = reader, str(path), batch_size
        self.device = torch.device(device)
        self.nqueries, self.nframes, self.seed = int(reader.nqueries), int(reader.nframes), int(reader.seed)
        self.chunk_rows = int(reader.chunk_rows)
        self.nchunks = math.ceil(self.nqueries / self.chunk_rows)
        self.block_chunks = max(1, block_rows // self.chunk_rows)
        self.position = 0
        self._block = _Block(0, 0, None, None)
        self._orders, self._memory, self._ahead = {}, None, None
        if preload:
            self._memory = self._read_rows(0, self.nqueries)
        self._pool = None if preload else concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="cache-read")
        self._buffers = None  # made at the first batch that spans two blocks

    def seek(self, step):
        """Make the next batch batch number ``step`` (used when resuming)."""
        self.position = step * self.batch_size

    def chunk_order(self, epoch):
        """Chunk indices (nchunks,) int64 in the order pass ``epoch`` reads them: file order first."""
        if epoch == 0:
            return np.arange(self.nchunks)
        return np.random.default_rng([self.seed, epoch]).permutation(self.nchunks)

    def _layout(self, epoch):
        # (order, first row of each slot within the pass); the last chunk may be short and land anywhere
        if epoch not in self._orders:
            order = self.chunk_order(epoch)
            lengths = np.minimum(self.chunk_rows, self.nqueries - order * self.chunk_rows)
            self._orders = {epoch: (order, np.concatenate([[0], np.cumsum(lengths)]))}
        return self._orders[epoch]

    def _read_rows(self, start, stop):
        # numpy (queries (k, n) float32, nearest (k,) int64); runs in the read-ahead thread too
        if self._memory is not None:
            return self._memory[0][start:stop], self._memory[1][start:stop]
        queries, nearest = self.reader.read(start, stop)
        return np.ascontiguousarray(queries, dtype=np.float32), np.asarray(nearest, dtype=np.int64)

    def _read_block(self, position):
        """``(start, queries, nearest)`` numpy of the block holding stream position ``position``."""
        epoch, offset = divmod(position, self.nqueries)
        order, starts = self._layout(epoch)
        first = int(np.searchsorted(starts, offset, side="right")) - 1
        runs = []  # merge chunks that follow each other in the file into one read
        for chunk in order[first:first + self.block_chunks].tolist():
            if runs and runs[-1][1] == chunk:
                runs[-1][1] = chunk + 1
            else:
                runs.append([chunk, chunk + 1])
        parts = [self._read_rows(a * self.chunk_rows, min(b * self.chunk_rows, self.nqueries)) for a, b in runs]
        queries = parts[0][0] if len(parts) == 1 else np.concatenate([part[0] for part in parts])
        nearest = parts[0][1] if len(parts) == 1 else np.concatenate([part[1] for part in parts])
        return epoch * self.nqueries + int(starts[first]), queries, nearest

    def _load_block(self, position):
        ahead, self._ahead = self._ahead, None
        if ahead is not None and ahead[0] == position:
            start, queries, nearest = ahead[1].result()
        else:
            if ahead is not None:
                ahead[1].result()  # one reader call at a time
            start, queries, nearest = self._read_block(position)
        self._block = _Block(start, start + len(nearest), torch.from_numpy(queries).to(self.device),
                             torch.from_numpy(nearest).to(self.device))
        if self._pool is not None:  # read the next block while this one trains
            self._ahead = (self._block.stop, self._pool.submit(self._read_block, self._block.stop))

    def close(self):
        """Wait for the read-ahead (if any) and stop its thread; call before closing the reader."""
        if self._ahead is not None and not self._ahead[1].cancel():
            concurrent.futures.wait([self._ahead[1]])
        self._ahead = None
        if self._pool is not None:
            self._pool.shutdown(wait=True)

    def next(self):
        """The next ``Batch``: views of the current block, joined across a block boundary when needed."""
        position, stop = self.position, self.position + self.batch_size
        block = self._block
        if block.start <= position and stop <= block.stop:
            self.position = stop
            return Batch(block.queries[position - block.start:stop - block.start],
                         block.nearest[position - block.start:stop - block.start])
        pieces = []
        while self.position < stop:
            if not self._block.start <= self.position < self._block.stop:
                self._load_block(self.position)
            block = self._block
            take = min(stop, block.stop) - self.position
            begin = self.position - block.start
            pieces.append((block.queries[begin:begin + take], block.nearest[begin:begin + take]))
            self.position += take
        if self._buffers is None:
            self._buffers = _BatchBuffers(self.batch_size, pieces[0][0].shape[1], self.device)
        return self._buffers.joined(pieces)
