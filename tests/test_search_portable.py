"""The plain-C path of the compiled cells search (what compilers without GCC vector extensions build,
MSVC among them) gives exact answers too: built here with ``-DCELLSEARCH_PORTABLE``."""
import importlib.machinery
import importlib.util
import os
import shutil
import subprocess
import sysconfig

import numpy as np
import pytest
from test_search import assert_nearest, duplicated_frames, grid_case, noisy_queries

from motion_matching.neighbours.cells import compiled

from conftest import random_features

SOURCE_FOLDER = os.path.dirname(compiled.__file__)
COMPILER = shutil.which(os.environ.get("CC", "cc"))


@pytest.fixture(scope="module")
def portable(tmp_path_factory):
    """The _cellsearch module built from the same sources with -DCELLSEARCH_PORTABLE."""
    if COMPILER is None:
        pytest.skip("no C compiler (cc) on this machine to build the portable path")
    target = str(tmp_path_factory.mktemp("portable") / ("_cellsearch" + sysconfig.get_config_var("EXT_SUFFIX")))
    sources = [os.path.join(SOURCE_FOLDER, name) for name in ("_cellsearch.c", "cellsearch.c")]
    command = [COMPILER, "-O2", "-shared", "-fPIC", "-DCELLSEARCH_PORTABLE",
               "-I" + sysconfig.get_paths()["include"], *sources, "-o", target, "-lm"]
    subprocess.run(command, check=True, capture_output=True)
    loader = importlib.machinery.ExtensionFileLoader("_cellsearch", target)
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader("_cellsearch", loader))
    loader.exec_module(module)
    return module


def search_with(module, monkeypatch, features, queries, sources=None, **options):
    """Nearest frames by CompiledCellSearch running on ``module``."""
    monkeypatch.setattr(compiled, "_cellsearch", module)
    return compiled.CompiledCellSearch(features, **options).nearest(queries, sources)


def test_portable_path_on_the_training_stream(portable, monkeypatch):
    features = random_features(3000, seed=21)
    queries, sources = noisy_queries(features, count=400)
    assert_nearest(features, queries, search_with(portable, monkeypatch, features, queries, sources))


def test_portable_path_with_ties_duplicates_and_other_dimensions(portable, monkeypatch):
    features, queries = grid_case()
    assert_nearest(features, queries, search_with(portable, monkeypatch, features, queries))
    features = duplicated_frames(seed=2)
    queries, sources = noisy_queries(features, count=200)
    assert_nearest(features, queries, search_with(portable, monkeypatch, features, queries, sources, ncells=30))
    features = random_features(800, nfeatures=64, seed=22)
    queries, sources = noisy_queries(features, count=100)
    assert_nearest(features, queries, search_with(portable, monkeypatch, features, queries, sources))


def test_portable_and_vector_paths_agree(portable, monkeypatch):
    if not compiled.available():
        pytest.skip("the C extension _cellsearch was not built (no C compiler at install)")
    features = random_features(2000, seed=23)
    queries, sources = noisy_queries(features, count=300)
    vector = compiled.CompiledCellSearch(features).nearest(queries, sources)
    distances = ((queries[:, None, :].astype(np.float64) - features[None].astype(np.float64)) ** 2).sum(axis=2)
    plain = search_with(portable, monkeypatch, features, queries, sources)
    rows = np.arange(len(queries))
    assert np.array_equal(distances[rows, vector], distances[rows, plain])
