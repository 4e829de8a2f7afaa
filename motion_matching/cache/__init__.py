"""The exact-neighbour cache: noisy queries and their nearest frames, stored in a fingerprinted HDF5 file.

Layout and rules: docs/cache.md. ``format`` holds the layout, its attributes and the refusals; ``build``
writes a cache (resumable, under ``lock``; ``partial`` holds its ``<out>.partial`` file); ``reader``
opens one for training; ``verify`` checks one; ``commands`` builds the shell-quoted commands that
refusals suggest.
This package re-exports the entry points, so ``cache.build_cache`` and ``cache.open_cache`` read as before.
"""
from motion_matching.cache.build import build_cache
from motion_matching.cache.format import (
                                          DEFAULT_CHUNK_ROWS,
                                          DEFAULT_NQUERIES,
                                          DEFAULT_SEED,
                                          FORMAT,
                                          FORMAT_VERSION,
                                          features_sha256,
)
from motion_matching.cache.reader import CacheReader, open_cache
from motion_matching.cache.verify import cache_info, verify_cache

__all__ = ["CacheReader", "open_cache", "features_sha256", "build_cache", "cache_info", "verify_cache",
           "DEFAULT_CHUNK_ROWS", "DEFAULT_NQUERIES", "DEFAULT_SEED", "FORMAT", "FORMAT_VERSION"]
