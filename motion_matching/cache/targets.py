"""Where a cache may be written: build-cache replaces only what may be a cache, and the rebuild lines that
errors suggest never name a file that cannot be one (following them must not destroy a features.bin).
"""
import os

import h5py

from motion_matching.errors import OverwriteRefused
from motion_matching.toolkit.overwrite import same_file
from motion_matching.toolkit.sniff import file_kind

DEFAULT_OUT = "projector_cache.h5"  # build-cache's default --out
CACHE_SUFFIXES = (".h5", ".hdf5")  # unrecognised bytes under such a name may be a damaged cache


def not_a_cache(path):
    """Why the existing file at ``path`` cannot be a cache, not even a damaged one (str, "is a features.bin
    (...), not a cache"), or None when it may be one: no file, HDF5, or an empty file, unrecognised bytes or
    text under a cache's name (``.h5``, ``.hdf5``)."""
    path = os.fspath(path)
    if not os.path.isfile(path) or h5py.is_hdf5(path):
        return None
    kind = file_kind(path)
    if kind in (None, "an empty file", "a text file") and path.lower().endswith(CACHE_SUFFIXES):
        return None
    return f"is {kind}, not a cache" if kind else "is neither HDF5 nor named like a cache (*.h5)"


def suggested_out(out):
    """``(path, may_force)`` for a build-cache line suggested about ``out``: ``out`` itself (a --force may
    replace it) when it may hold a cache, else the default name beside it, or a numbered one if that cannot
    be a cache either (never to be forced: build-cache itself says what to do about what is there)."""
    out = os.fspath(out)
    if not_a_cache(out) is None:
        return out, True
    folder = os.path.dirname(out)
    for number in range(1, 1000):
        candidate = os.path.join(folder, DEFAULT_OUT if number == 1 else f"projector_cache_{number}.h5")
        if not_a_cache(candidate) is None:
            return candidate, False
    return os.path.join(folder, DEFAULT_OUT), False  # unforced, build-cache refuses it: nothing is lost


def check_out(out, *, features_path):
    """Raise ``OverwriteRefused`` if ``out`` is the features file itself or an existing file that cannot be a
    cache (``not_a_cache``: a toolkit file, a checkpoint, a user's text): build-cache never replaces those,
    even with --force."""
    problem = "is the --features file, not a cache" if same_file(out, features_path) else not_a_cache(out)
    if problem is None:
        return
    raise OverwriteRefused(out, f"{problem}; build-cache never replaces it (choose another --out)")
