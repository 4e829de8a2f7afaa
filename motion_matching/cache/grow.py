"""Growing a cache: query i depends only on the seed and i, so a cache of N queries is the first N rows
of any larger cache of the same features, seed and stream, and a smaller request is its prefix."""
import logging

import h5py
import numpy as np

LOG = logging.getLogger(__name__)
COPY_ROWS = 1 << 20  # rows copied per read, bounding memory (112 MiB of 27-feature rows)
# attributes that must agree for a cache to be a prefix of the wanted one (nqueries and chunking may differ)
SAME_STREAM_KEYS = ("format_version", "features_sha256", "nframes", "nfeatures", "seed", "query_recipe",
                    "query_block", "backend")


def same_stream(attributes, wanted):
    """True if the cache of ``attributes`` holds a prefix of the query stream (and neighbours) ``wanted`` asks for."""
    return all(attributes[key] == wanted[key] for key in SAME_STREAM_KEYS) and \
        np.array_equal(attributes["noise_scale"], wanted["noise_scale"])


def copy_prefix(source_path, handle, wanted):
    """Copy the rows of the complete cache at ``source_path`` that fill whole chunks of ``handle`` (a new
    partial file of ``wanted`` attributes), then advance its ``completed`` count; returns the rows copied."""
    rows = wanted["chunk_rows"]
    with h5py.File(source_path, "r") as source:
        held = min(int(source.attrs["nqueries"]), wanted["nqueries"])
        copied = held // rows * rows
        for first in range(0, copied, COPY_ROWS):
            last = min(first + COPY_ROWS, copied)
            handle["queries"][first:last] = source["queries"][first:last]
            handle["nearest"][first:last] = source["nearest"][first:last]
    handle.flush()
    handle.attrs["completed"] = np.int64(copied)
    handle.flush()
    LOG.info("%s: growing it to %s queries: its first %s rows kept, the rest searched", source_path,
             f"{wanted['nqueries']:,}", f"{copied:,}")
    return copied
