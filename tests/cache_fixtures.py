"""Helpers of the cache tests: one small reference cache, copies to tamper with, and file comparisons."""
import hashlib
import shutil

import h5py
import numpy as np

from motion_matching import cache

from conftest import write_small_toolkit_files

NQUERIES, SEED, CHUNK, BACKEND = 20_000, 7, 8192, "faiss-flat"


def build(features_path, out, **options):
    """``build_cache`` with the small test arguments, overridable; returns its ``BuildResult``."""
    arguments = dict(out=out, nqueries=NQUERIES, seed=SEED, chunk_rows=CHUNK, backend=BACKEND)
    arguments.update(options)
    return cache.build_cache(features_path, **arguments)


def make_reference(folder):
    """(features.bin, cache.h5) of an uninterrupted build in ``folder``."""
    features_path, _ = write_small_toolkit_files(folder)
    out = folder / "reference.h5"
    build(features_path, out)
    return features_path, out


def copy_of(reference, folder, name="cache.h5"):
    """A copy of the reference cache in ``folder``; returns its path."""
    return shutil.copyfile(reference, folder / name)


def digest(path):
    """SHA-256 (str) of the bytes of ``path``."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def contents(path):
    """(attributes without ``created``, queries, nearest) of a cache file, for comparing two builds."""
    with h5py.File(path, "r") as handle:
        attributes = {name: np.asarray(value).tolist() for name, value in handle.attrs.items() if name != "created"}
        return attributes, handle["queries"][:], handle["nearest"][:]


def assert_same_contents(path, reference):
    """Assert two caches hold identical rows and attributes (creation times aside)."""
    got, expected = contents(path), contents(reference)
    assert got[0] == expected[0]
    assert np.array_equal(got[1], expected[1]) and np.array_equal(got[2], expected[2])


def rebuild_command(path, features_path, nqueries=NQUERIES, seed=SEED):
    """The ``command`` field of refusals about ``path`` (paths here need no quoting)."""
    return (f"mm-projector build-cache --features {features_path} --out {path} --queries {nqueries} "
            f"--seed {seed} --force")


def command(path, features_path, nqueries=NQUERIES, seed=SEED):
    """The rebuild command that refusal messages about ``path`` end with."""
    return "run: " + rebuild_command(path, features_path, nqueries, seed)
