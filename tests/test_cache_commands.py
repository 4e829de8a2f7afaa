"""Refusals are data (path, problem, command), and every suggested command quotes its paths for the shell."""
import pickle
import shlex

import h5py
import pytest

from motion_matching import cache
from motion_matching.cache.commands import build_cache_command, command_line
from motion_matching.errors import CorruptCache, MismatchedFiles, MissingFile, StaleCache
from motion_matching.projector.train import train_projector

from cache_fixtures import CHUNK, NQUERIES, SEED, build, copy_of, make_reference
from conftest import write_small_toolkit_files
from train_helpers import small_config

AWKWARD = "with space's \"quotes\" $HOME"  # a folder name a shell would split, unquote or expand


def rebuild_words(out, features_path, nqueries=NQUERIES, seed=SEED):
    return ["mm-projector", "build-cache", "--features", str(features_path), "--out", str(out),
            "--queries", str(nqueries), "--seed", str(seed), "--force"]


@pytest.fixture(scope="module")
def awkward(tmp_path_factory):
    """(features.bin, a good cache) in a folder whose name needs quoting."""
    folder = tmp_path_factory.mktemp("commands") / AWKWARD
    folder.mkdir()
    return make_reference(folder)


def test_error_fields_compose_the_one_line_message():
    assert str(CorruptCache("c.h5", "not an HDF5 file")) == "c.h5: not an HDF5 file"
    error = StaleCache("c.h5", "stale", command="mm-projector build-cache --force")
    assert (error.path, error.problem, error.command, error.option) == ("c.h5", "stale",
                                                                        "mm-projector build-cache --force", None)
    assert str(error) == "c.h5: stale; run: mm-projector build-cache --force"
    both = MismatchedFiles("c.h5", "seed 9", option="--seed 9", command="mm-projector build-cache")
    assert str(both) == "c.h5: seed 9; pass --seed 9 or run: mm-projector build-cache"
    assert str(MismatchedFiles("c.h5", "seed 9", option="--seed 9")) == "c.h5: seed 9; pass --seed 9"
    copy = pickle.loads(pickle.dumps(both))  # e.g. across a process pool
    assert (type(copy), str(copy), copy.option, copy.command) == (MismatchedFiles, str(both), "--seed 9",
                                                                   "mm-projector build-cache")


def test_command_line_quotes_each_word_so_the_shell_gives_it_back(tmp_path):
    path = tmp_path / AWKWARD / "cache.h5"
    line = command_line("mm-projector", "cache-info", path, "--queries", 5)
    assert shlex.split(line) == ["mm-projector", "cache-info", str(path), "--queries", "5"]
    assert command_line("--seed", 99) == "--seed 99"  # plain words stay plain
    assert build_cache_command("a.h5", features_path="f.bin", nqueries=3, seed=4) == \
        "mm-projector build-cache --features f.bin --out a.h5 --queries 3 --seed 4 --force"


def test_refusal_of_a_damaged_cache_carries_its_problem_and_a_quoted_command(awkward, tmp_path):
    features_path, reference = awkward
    path = copy_of(reference, reference.parent, "damaged.h5")
    with h5py.File(path, "r+") as handle:
        handle.attrs["completed"] = CHUNK
    with pytest.raises(CorruptCache) as raised:
        cache.open_cache(path, features_path=features_path)
    error = raised.value
    assert (error.path, error.problem) == (str(path), f"incomplete: {CHUNK} of {NQUERIES} rows written "
                                                      "(an interrupted build)")
    assert shlex.split(error.command) == rebuild_words(path, features_path)
    assert str(error) == f"{path}: {error.problem}; run: {error.command}"


def test_missing_cache_suggests_the_default_build_with_quoted_paths(awkward):
    features_path, reference = awkward
    path = reference.parent / "never built.h5"
    with pytest.raises(MissingFile) as raised:
        cache.open_cache(path, features_path=features_path)
    assert raised.value.problem == "no such file"
    assert shlex.split(raised.value.command) == rebuild_words(path, features_path, cache.DEFAULT_NQUERIES,
                                                              cache.DEFAULT_SEED)


def test_build_refusal_keeps_the_problem_and_says_force_once(awkward):
    features_path, reference = awkward
    out = reference.parent / "foreign.h5"
    out.write_bytes(b"not a cache")
    with pytest.raises(CorruptCache) as raised:
        build(features_path, out)
    assert raised.value.problem == "is a text file, not a projector cache (HDF5); not replaced without --force"
    assert shlex.split(raised.value.command) == rebuild_words(out, features_path)
    with pytest.raises(StaleCache) as raised:
        build(features_path, reference, seed=SEED + 1)
    assert raised.value.problem == (f"holds {NQUERIES:,} queries of seed {SEED}, not of seed {SEED + 1}; not "
                                    "replaced without --force")
    assert shlex.split(raised.value.command) == rebuild_words(reference, features_path, NQUERIES, SEED + 1)


def test_training_refusal_of_another_seed_suggests_a_quoted_option_and_command(tmp_path):
    folder = tmp_path / AWKWARD
    folder.mkdir()
    features_path, latent_path = write_small_toolkit_files(folder)
    cache_path = folder / "cache 99.h5"
    cache.build_cache(features_path, out=cache_path, nqueries=256, seed=99, chunk_rows=128)
    config = small_config()
    with pytest.raises(MismatchedFiles) as raised:
        train_projector(config, features_path=features_path, latent_path=latent_path, out_dir=folder / "out",
                        offline_cache=cache_path, held_out_queries=0)
    error = raised.value
    assert (error.problem, error.option) == (f"holds the query stream of seed 99, not {config.seed}", "--seed 99")
    # the cache's own query count: a short run never suggests shrinking a cache
    assert shlex.split(error.command) == rebuild_words(cache_path, features_path, 256, config.seed)
    assert str(error) == f"{cache_path}: {error.problem}; pass --seed 99 or run: {error.command}"
