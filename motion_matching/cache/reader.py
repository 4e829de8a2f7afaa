"""Reading a cache: ``open_cache`` validates it against features.bin and returns a ``CacheReader``."""
import os

import numpy as np

from motion_matching.cache.format import check_rows, note_missing_checksums, open_validated, read_rows

CHECK_ROWS = 1 << 20


class CacheReader:
    """A validated, open cache. Attributes: ``nqueries``, ``nframes``, ``nfeatures``, ``seed``, ``chunk_rows``,
    ``features_sha256``, ``backend`` and ``attributes`` (every root attribute). Use as a context manager.

    ``read`` keeps the last partly read chunk in memory, so sequential reads of any size read each chunk
    of the file once. Any thread may call ``read``, but only one call at a time.
    """

    def __init__(self, path, handle, attributes, refusal):
        self.path, self._handle, self.attributes, self._refusal = os.fspath(path), handle, attributes, refusal
        for name in ("nqueries", "nframes", "nfeatures", "seed", "chunk_rows", "features_sha256", "backend"):
            setattr(self, name, attributes[name])
        self._block = (-1, None, None)

    def read(self, start, stop):
        """Rows ``start .. stop-1``: ``(queries (k, nfeatures) float32, nearest (k,) int64)``, k = stop - start.

        Whole chunks inside the range are read straight into the result; the partial chunks at its
        ends come through the one chunk kept in memory. Raises ``CorruptCache`` if rows fail their
        checksum or cannot be read, hold NaN/Inf, or name a frame out of range.
        """
        if not 0 <= start <= stop <= self.nqueries:
            raise ValueError(f"rows {start}..{stop} are outside 0..{self.nqueries}")
        queries = np.empty((stop - start, self.nfeatures), np.float32)
        nearest = np.empty(stop - start, np.int64)
        head = min(-(-start // self.chunk_rows) * self.chunk_rows, stop)
        tail = stop if stop == self.nqueries else max(head, stop // self.chunk_rows * self.chunk_rows)
        self._copy_buffered(start, head, queries, nearest, offset=start)
        if tail > head:
            self._read_direct(head, tail, queries[head - start:tail - start], nearest[head - start:tail - start])
        self._copy_buffered(tail, stop, queries, nearest, offset=start)
        return queries, nearest

    def _copy_buffered(self, row, stop, queries, nearest, *, offset):
        while row < stop:
            first, block_queries, block_nearest = self._load(row // self.chunk_rows)
            lo, hi = row - first, min(stop - first, len(block_nearest))
            queries[row - offset:row - offset + hi - lo] = block_queries[lo:hi]
            nearest[row - offset:row - offset + hi - lo] = block_nearest[lo:hi]
            row += hi - lo

    def _read_direct(self, first, last, queries, nearest):
        read_rows(self._handle, "queries", first, last, queries, self._refusal)
        read_rows(self._handle, "nearest", first, last, nearest, self._refusal)
        for lo in range(0, last - first, CHECK_ROWS):  # bounded temporaries for whole-cache reads
            check_rows(queries[lo:lo + CHECK_ROWS], nearest[lo:lo + CHECK_ROWS], first=first + lo,
                       nframes=self.nframes, refusal=self._refusal)

    def _load(self, block):
        if self._block[0] != block * self.chunk_rows:
            first = block * self.chunk_rows
            last = min(first + self.chunk_rows, self.nqueries)
            queries = np.empty((last - first, self.nfeatures), np.float32)
            nearest = np.empty(last - first, np.int64)
            self._read_direct(first, last, queries, nearest)
            self._block = (first, queries, nearest)
        return self._block

    def close(self):
        """Close the HDF5 file."""
        self._handle.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def open_cache(path, *, features_path="features.bin"):
    """Open the cache at ``path`` for reading after checking it is complete, intact and built from
    ``features_path``; returns a ``CacheReader`` (a context manager).

    Raises ``MissingFile``, ``CorruptCache`` or ``StaleCache``; each message ends with the rebuild command.
    """
    handle, attributes, refusal, _ = open_validated(path, features_path=features_path)
    note_missing_checksums(attributes, refusal)
    return CacheReader(path, handle, attributes, refusal)

