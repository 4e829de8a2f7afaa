"""The exact-neighbour cache: noisy queries and their nearest frames, stored in a fingerprinted HDF5 file.

Layout and rules: docs/cache.md. ``open_cache`` validates a cache against features.bin and returns a
``CacheReader`` for training; ``build_cache``, ``cache_info`` and ``verify_cache`` make and check caches.
"""
import os

import numpy as np

from .cache_build import build_cache
from .cache_format import (DEFAULT_CHUNK_ROWS, DEFAULT_NQUERIES, DEFAULT_SEED, FORMAT, FORMAT_VERSION,  # noqa: F401
                           check_rows, features_sha256, open_validated)
from .cache_verify import cache_info, verify_cache


class CacheReader:
    """A validated, open cache. Attributes: ``nqueries``, ``nframes``, ``nfeatures``, ``seed``, ``chunk_rows``,
    ``features_sha256``, ``backend`` and ``attributes`` (every root attribute). Use as a context manager.

    ``read`` serves rows from one decoded storage chunk held in memory, so sequential reads of any size
    touch each chunk of the file once.
    """

    def __init__(self, path, handle, attributes, refusal):
        self.path, self._handle, self.attributes, self._refusal = os.fspath(path), handle, attributes, refusal
        for name in ("nqueries", "nframes", "nfeatures", "seed", "chunk_rows", "features_sha256", "backend"):
            setattr(self, name, attributes[name])
        self._block = (-1, None, None)

    def read(self, start, stop):
        """Rows ``start .. stop-1``: ``(queries (k, nfeatures) float32, nearest (k,) int64)``, k = stop - start.

        Raises ``CorruptCache`` if a chunk cannot be read, holds NaN/Inf, or names a frame out of range.
        """
        if not 0 <= start <= stop <= self.nqueries:
            raise ValueError(f"rows {start}..{stop} are outside 0..{self.nqueries}")
        queries = np.empty((stop - start, self.nfeatures), np.float32)
        nearest = np.empty(stop - start, np.int64)
        row = start
        while row < stop:
            first, block_queries, block_nearest = self._load(row // self.chunk_rows)
            lo, hi = row - first, min(stop - first, len(block_nearest))
            queries[row - start:row - start + hi - lo] = block_queries[lo:hi]
            nearest[row - start:row - start + hi - lo] = block_nearest[lo:hi]
            row += hi - lo
        return queries, nearest

    def _load(self, block):
        if self._block[0] != block * self.chunk_rows:
            first = block * self.chunk_rows
            last = min(first + self.chunk_rows, self.nqueries)
            try:
                queries = self._handle["queries"][first:last]
                nearest = self._handle["nearest"][first:last].astype(np.int64)
            except (OSError, ValueError, KeyError) as error:
                raise self._refusal.corrupt(f"rows {first}..{last - 1} cannot be read ({error})") from None
            check_rows(queries, nearest, first=first, nframes=self.nframes, refusal=self._refusal)
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
    return CacheReader(path, handle, attributes, refusal)


__all__ = ["CacheReader", "open_cache", "features_sha256", "build_cache", "cache_info", "verify_cache"]
