"""build-cache, cache-info and verify-cache through click: exit codes and the exact lines users see."""
import re

import h5py
import numpy as np
import pytest
from click.testing import CliRunner

from motion_matching import cache
from motion_matching.cache.lock import exclusive_lock
from motion_matching.cli import cache as cli_cache
from motion_matching.cli import main
from motion_matching.cli.cache import build_cache_command
from motion_matching.toolkit import formats

from cache_fixtures import BACKEND, CHUNK, NQUERIES, SEED, build, command, copy_of, digest, make_reference
from conftest import random_features


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    return make_reference(tmp_path_factory.mktemp("reference"))


@pytest.fixture
def good(reference, tmp_path):
    """(features.bin, a fresh copy of the good cache)."""
    return copy_of(reference[0], tmp_path, "features.bin"), copy_of(reference[1], tmp_path)


def run(*arguments):
    return CliRunner().invoke(main, [str(argument) for argument in arguments])


def build_arguments(features_path, out, *extra):
    return ["build-cache", "--features", features_path, "--out", out, "--queries", NQUERIES, "--seed", SEED,
            "--backend", BACKEND, "--chunk-rows", CHUNK, *extra]


def test_build_prints_one_line_and_draws_progress_on_stderr(tmp_path, reference):
    features_path = copy_of(reference[0], tmp_path, "features.bin")
    out = tmp_path / "cache.h5"
    result = run(*build_arguments(features_path, out))
    assert result.exit_code == 0, result.output
    assert re.fullmatch(f"wrote {out}: 20,000 queries; 20,000 searched in [0-9.]+ s \\([0-9,]+ queries/s\\), "
                        "[0-9.]+ s in all\n",
                        result.stdout)
    assert re.fullmatch(r"build-cache:   0%.*\n"
                        r"build-cache: 100%\|#+\| 20000/20000 \[\d\d:\d\d<00:00, +[\d.]+ queries/s\]\n", result.stderr)
    again = run(*build_arguments(features_path, out))
    assert (again.exit_code, again.stdout) == (0, f"{out} is up to date (20,000 queries); nothing to do\n")


def test_quiet_build_resumes_an_interrupted_one_without_a_bar(tmp_path, reference):
    features_path = copy_of(reference[0], tmp_path, "features.bin")
    out = tmp_path / "cache.h5"
    build(features_path, out, stop_after=1)
    result = run(*build_arguments(features_path, out, "--quiet"))
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"wrote {out}: 20,000 queries, resumed at row 8,192; 11,808 searched in ")
    assert result.stderr == ""


def test_stale_cache_is_refused_unchanged_and_force_rebuilds_it(good):
    features_path, out = good
    zeros = np.zeros(27, np.float32)
    formats.save_features(features_path, formats.Features(random_features(1000, seed=3), zeros, zeros + 1))
    before = digest(out)
    result = run(*build_arguments(features_path, out))
    assert result.exit_code == 1
    assert result.output.startswith(f"Error: {out}: stale: built from features with SHA-256 ")
    assert result.output.endswith(f"; not replaced without --force; {command(out, features_path)}\n")
    assert digest(out) == before
    forced = run(*build_arguments(features_path, out, "--force", "--quiet"))
    assert forced.exit_code == 0 and forced.stdout.startswith(f"wrote {out}: ")
    assert run("cache-info", out, "--features", features_path).stdout.endswith("fresh: yes\n")


def test_locked_cache_is_refused(good):
    features_path, _ = good
    out = features_path.parent / "new.h5"
    with exclusive_lock(out):
        result = run(*build_arguments(features_path, out))
    assert result.exit_code == 1
    assert result.output.startswith(f"Error: {out}: another build-cache is writing this cache (lock {out}.lock ")


def test_cache_info_prints_the_metadata_and_freshness(good, tmp_path):
    features_path, out = good
    lines = run("cache-info", out).stdout.splitlines()
    assert lines[:4] == [f"cache: {out}", "format: motion-matching-projector-cache version 2",
                         "queries: 20,000 (seed 7, chunks of 8,192 rows)", "frames: 2,000 x 27 features"]
    assert f"features_sha256: {cache.features_sha256(features_path)}" in lines
    assert "backend: faiss-flat" in lines and lines[-1] == "fresh: not checked (pass --features)"
    assert run("cache-info", out, "--features", features_path).stdout.endswith("\nfresh: yes\n")
    zeros = np.zeros(27, np.float32)
    formats.save_features(tmp_path / "other.bin", formats.Features(random_features(2000, seed=4), zeros, zeros + 1))
    stale = run("cache-info", out, "--features", tmp_path / "other.bin")
    assert stale.exit_code == 0 and "\nfresh: no (stale: built from features with SHA-256 " in stale.stdout


def test_verify_cache_passes_a_good_cache(good):
    features_path, out = good
    result = run("verify-cache", out, "--features", features_path, "--sample", 300, "--seed", 0)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"{out}: OK: 20,000 rows pass their checksums, are finite and in range; "
                                    "300 sampled queries regenerate bit-identically; 300 sampled neighbours match "
                                    "a float64 brute force")


def bump_version(path):
    with h5py.File(path, "r+") as handle:
        handle.attrs["format_version"] = 3


def mark_partial(path):
    with h5py.File(path, "r+") as handle:
        handle.attrs["completed"] = CHUNK


BAD_FILES = {
    "not HDF5": (lambda p: p.write_bytes(b"\0" * 100), "not an HDF5 file", {"nqueries": 16_000_000, "seed": 1234}),
    "truncated": (lambda p: p.write_bytes(p.read_bytes()[:5000]),
                  "truncated HDF5 file (it ends before the data its header announces)",
                  {"nqueries": 16_000_000, "seed": 1234}),
    "partial": (mark_partial, "incomplete: 8192 of 20000 rows written (an interrupted build)", {}),
    "bumped version": (bump_version, "format_version 3 is not supported (this package reads versions 1, 2)",
                       {"nqueries": 16_000_000, "seed": 1234}),
}


@pytest.mark.parametrize("command_name", ["cache-info", "verify-cache"])
@pytest.mark.parametrize("name", BAD_FILES)
def test_bad_file_is_one_error_line_and_exit_1(good, command_name, name):
    features_path, out = good
    damage, problem, rebuild = BAD_FILES[name]
    damage(out)
    result = run(command_name, out, "--features", features_path)
    assert result.exit_code == 1
    assert result.output == f"Error: {out}: {problem}; {command(out, features_path, **rebuild)}\n"


def test_refusal_line_quotes_paths_with_spaces_so_the_command_pastes_into_a_shell(reference, tmp_path):
    folder = tmp_path / "my caches"
    folder.mkdir()
    features_path, out = copy_of(reference[0], folder, "features.bin"), folder / "cache.h5"
    out.write_bytes(b"not a cache")
    result = run(*build_arguments(features_path, out))
    assert result.exit_code == 1
    assert result.output == (f"Error: {out}: is a text file, not a projector cache (HDF5); not replaced without "
                             "--force; run: mm-projector "
                             f"build-cache --features '{features_path}' --out '{out}' --queries {NQUERIES} "
                             f"--seed {SEED} --force\n")


def test_every_cache_command_has_help_with_an_example():
    for name in ("build-cache", "cache-info", "verify-cache"):
        result = run(name, "--help")
        assert result.exit_code == 0 and "Example: mm-projector " + name in result.output


def test_build_cache_command_is_exported_for_train_projector():
    assert main.commands["build-cache"] is build_cache_command


def test_docs_describe_every_cache_command_and_option():
    import pathlib
    text = (pathlib.Path(__file__).parent.parent / "docs" / "cache.md").read_text(encoding="utf-8")
    for name in ("build-cache", "cache-info", "verify-cache"):
        assert f"mm-projector {name}" in text
        for parameter in main.commands[name].params:
            for option in parameter.opts:
                if option.startswith("--") and option != "--help":
                    assert f"`{option}`" in text, f"docs/cache.md does not mention {name} {option}"


def test_quiet_build_leaves_the_log_levels_as_it_found_them(tmp_path, reference):
    import logging
    features_path = copy_of(reference[0], tmp_path, "features.bin")
    before = logging.getLogger("motion_matching").level, logging.getLogger("faiss").level
    assert run(*build_arguments(features_path, tmp_path / "c.h5", "--quiet")).exit_code == 0
    assert (logging.getLogger("motion_matching").level, logging.getLogger("faiss").level) == before


def test_ctrl_c_says_what_was_kept_and_how_to_resume_and_exits_130(tmp_path, reference, monkeypatch):
    features_path = copy_of(reference[0], tmp_path, "features.bin")
    out = tmp_path / "cache.h5"
    real_bar = cli_cache.ProgressBar

    class InterruptedBar(real_bar):
        def __call__(self, done, total, note=""):
            if done >= CHUNK:
                raise KeyboardInterrupt  # as Ctrl-C does, after the first chunk is written
            super().__call__(done, total, note)
    monkeypatch.setattr(cli_cache, "ProgressBar", InterruptedBar)
    result = run(*build_arguments(features_path, out))
    assert result.exit_code == 130
    assert result.stderr.endswith(f"interrupted: {out}.partial keeps 8,192 of 20,000 queries; run the same command "
                                  "again to resume from there\n")
    assert "Aborted" not in result.output and not out.exists()
    monkeypatch.setattr(cli_cache, "ProgressBar", real_bar)
    resumed = run(*build_arguments(features_path, out, "--quiet"))
    assert resumed.stdout.startswith(f"wrote {out}: 20,000 queries, resumed at row 8,192; ")


def test_more_queries_grow_the_cache_and_fewer_use_its_prefix(good):
    features_path, out = good
    fewer = run("build-cache", "--features", features_path, "--out", out, "--queries", 1_600, "--seed", SEED,
                "--backend", BACKEND, "--chunk-rows", CHUNK)
    assert fewer.exit_code == 0
    assert fewer.stdout == (f"{out} holds 20,000 queries, more than the 1,600 asked for: its first 1,600 are those; "
                            "nothing to do\n")
    more = run("build-cache", "--features", features_path, "--out", out, "--queries", 30_000, "--seed", SEED,
               "--backend", BACKEND, "--chunk-rows", CHUNK, "--quiet")
    assert more.exit_code == 0, more.output
    assert more.stdout.startswith(f"wrote {out}: 30,000 queries, resumed at row 16,384; 13,616 searched in ")
