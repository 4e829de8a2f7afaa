"""Growing a cache: query i depends only on the seed and i, so a cache of N queries is the first N rows
of any larger cache of the same features, seed and stream, and a smaller request is its prefix; so too
the rows of an interrupted build of another ``--queries`` are rows of the new build."""
import h5py
import numpy as np

COPY_ROWS = 1 << 20  # rows copied per read, bounding memory (112 MiB of 27-feature rows)
# attributes that must agree for a cache to be a prefix of the wanted one (nqueries and chunking may differ)
SAME_STREAM_KEYS = ("format_version", "features_sha256", "nframes", "nfeatures", "seed", "query_recipe",
                    "query_block", "backend")


def same_stream(attributes, wanted):
    """True if the cache of ``attributes`` holds a prefix of the query stream (and neighbours) ``wanted`` asks for."""
    return all(attributes[key] == wanted[key] for key in SAME_STREAM_KEYS) and \
        np.array_equal(attributes["noise_scale"], wanted["noise_scale"])


def keeps_rows_of(attributes, wanted):
    """True if the rows of the (partial) cache of ``attributes`` are rows of the build ``wanted`` whatever their
    counts and chunking: the same default stream (a toolkit stream's chunk states would not carry over)."""
    streams = {attributes.get("stream", "default"), wanted.get("stream", "default")}
    try:
        return streams == {"default"} and same_stream(attributes, wanted)
    except KeyError:
        return False


def copy_prefix(source_path, handle, wanted, *, held=None):
    """Copy the first ``held`` rows (default: all) of the cache at ``source_path`` that fill whole chunks of
    ``handle`` (a new partial file of ``wanted`` attributes), or all its rows if they are that many, then
    advance its ``completed`` count; returns the rows copied."""
    rows = wanted["chunk_rows"]
    with h5py.File(source_path, "r") as source:
        held = min(int(source.attrs["nqueries"]) if held is None else held, wanted["nqueries"])
        copied = held if held == wanted["nqueries"] else held // rows * rows
        for first in range(0, copied, COPY_ROWS):
            last = min(first + COPY_ROWS, copied)
            handle["queries"][first:last] = source["queries"][first:last]
            handle["nearest"][first:last] = source["nearest"][first:last]
    handle.flush()
    handle.attrs["completed"] = np.int64(copied)
    handle.flush()
    return copied
