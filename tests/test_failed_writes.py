"""Writes that fail part-way (a file-size limit in a child process, or a full disk) end with one line, leave
the previous good files untouched and no stray temporary file, and an interrupted cache build resumes."""
import errno
import hashlib
import shutil
import subprocess
import sys

import h5py
import pytest
from click.testing import CliRunner

from motion_matching.cache import build as cache_build
from motion_matching.cli import main
from motion_matching.toolkit import formats
from motion_matching.training.checkpoint import load_checkpoint

from cache_fixtures import assert_same_contents
from conftest import write_small_toolkit_files

resource = pytest.importorskip("resource", reason="file-size limits (RLIMIT_FSIZE) are POSIX only")
signal = pytest.importorskip("signal")
TRAIN = ["--database", "", "--iterations", "3", "--hidden", "64", "--hidden-layers", "1", "--held-out", "0",
         "--quiet", "--out", "run"]


def run_limited(folder, arguments, *, limit):
    """Run ``mm-projector ARGUMENTS`` in ``folder`` with files limited to ``limit`` bytes; returns the result.

    SIGXFSZ is ignored, so a write past the limit fails with EFBIG instead of killing the process.
    """
    def apply_limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return subprocess.run([sys.executable, "-c", "from motion_matching.cli import main; main()", *map(str, arguments)],
                          cwd=folder, preexec_fn=apply_limit, capture_output=True, text=True, timeout=300)


def run(folder, arguments):
    return run_limited(folder, arguments, limit=resource.RLIM_INFINITY)


def error_line(result):
    """The one ``Error:`` line of a failed run (asserting exit 1 and no traceback)."""
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr and "Exception ignored" not in result.stderr, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error: ")]
    assert len(errors) == 1, result.stderr
    return errors[0]


def digests(folder):
    """{file name: SHA-256} of every file in ``folder`` (recursively), to show nothing changed."""
    return {str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(folder.rglob("*")) if path.is_file()}


def strays(folder):
    """Temporary files left in ``folder``: atomic writes' ``*.partial`` and staged ``*.staged`` files."""
    return sorted(str(path) for pattern in ("*.partial", "*.staged") for path in folder.rglob(pattern))


def test_generate_database_fails_with_one_line_and_keeps_the_previous_set(tmp_path):
    assert run(tmp_path, ["generate-database", "--frames", "400", "--out", "data"]).returncode == 0
    before = digests(tmp_path / "data")
    line = error_line(run_limited(tmp_path, ["generate-database", "--frames", "500", "--seed", "3", "--out", "data",
                                             "--force"], limit=100_000))  # replacing the set fails part-way
    assert line.startswith("Error: data/database.bin: cannot write it (the write stopped short (")
    assert digests(tmp_path / "data") == before and not strays(tmp_path)
    # recomputing features and latent of an edited database: features.bin fits the limit, latent.bin does not
    sizes = {name: (tmp_path / "data" / name).stat().st_size for name in ("features.bin", "latent.bin")}
    assert sizes["features.bin"] < sizes["latent.bin"]
    line = error_line(run_limited(tmp_path, ["generate-database", "--database", "data/database.bin", "--weights",
                                             "1,1,1,1,3", "--out", "data"], limit=sizes["features.bin"] + 100))
    assert line.startswith("Error: data/latent.bin: cannot write it (")
    assert digests(tmp_path / "data") == before and not strays(tmp_path)


@pytest.fixture(scope="module")
def trained_once(tmp_path_factory):
    folder = tmp_path_factory.mktemp("trained")
    write_small_toolkit_files(folder, nframes=400)
    assert run(folder, ["train"] + TRAIN).returncode == 0
    return folder


@pytest.fixture
def trained(trained_once, tmp_path):
    """A folder of its own with features.bin, latent.bin and a finished quick run in run/."""
    return shutil.copytree(trained_once, tmp_path / "trained")


def test_training_fails_with_one_line_when_projector_bin_cannot_be_written(trained):
    before = digests(trained / "run")
    line = error_line(run_limited(trained, ["train", "--seed", "5", "--force"] + TRAIN, limit=10_000))
    assert line.startswith("Error: run/projector.bin: cannot write it (")
    assert digests(trained / "run") == before and not strays(trained)


def test_training_fails_with_one_line_when_the_checkpoint_cannot_be_written(trained):
    network_size = (trained / "run" / "projector.bin").stat().st_size
    checkpoint = trained / "run" / "projector_checkpoint.pt"
    before = checkpoint.read_bytes()
    line = error_line(run_limited(trained, ["train", "--seed", "5", "--force"] + TRAIN, limit=network_size + 1000))
    assert line.startswith("Error: run/projector_checkpoint.pt: cannot write it (")
    assert checkpoint.read_bytes() == before and not strays(trained)
    formats.load_network(trained / "run" / "projector.bin")  # rewritten by the new run, but complete
    assert load_checkpoint(checkpoint)["step"] == 3


@pytest.mark.parametrize("out, options", [("exported.bin", []), ("exported.onnx", ["--format", "onnx"])])
def test_export_fails_with_one_line_and_keeps_the_previous_export(trained, out, options):
    pytest.importorskip("onnx") if out.endswith(".onnx") else None
    arguments = ["export", "run/projector_checkpoint.pt", "--out", out] + options
    assert run(trained, arguments).returncode == 0
    before = (trained / out).read_bytes()
    line = error_line(run_limited(trained, arguments + ["--force"], limit=len(before) // 4))  # replace it: fails
    assert line.startswith(f"Error: {out}: cannot write it (")
    assert (trained / out).read_bytes() == before and not strays(trained)


BUILD = ["build-cache", "--features", "features.bin", "--queries", "20000", "--chunk-rows", "4096", "--backend",
         "balltree", "--quiet"]


def test_build_cache_fails_with_one_line_keeps_the_previous_cache_and_builds_afterwards(tmp_path):
    write_small_toolkit_files(tmp_path, nframes=400)
    assert run(tmp_path, BUILD + ["--out", "reference.h5", "--seed", "2"]).returncode == 0
    assert run(tmp_path, BUILD + ["--out", "cache.h5", "--seed", "1"]).returncode == 0
    before = digests(tmp_path)
    line = error_line(run_limited(tmp_path, BUILD + ["--out", "cache.h5", "--seed", "2", "--force"], limit=500_000))
    assert line == "Error: cache.h5.partial: cannot create it (File too large)"
    assert digests(tmp_path) == before and not strays(tmp_path)
    assert run(tmp_path, BUILD + ["--out", "cache.h5", "--seed", "2", "--force"]).returncode == 0
    assert_same_contents(tmp_path / "cache.h5", tmp_path / "reference.h5")


def test_a_build_whose_disk_fills_mid_way_resumes_from_its_last_chunk(tmp_path, monkeypatch):
    """The file is allocated whole when created, so a full disk (not a size limit) fails a later chunk."""
    features_path, _ = write_small_toolkit_files(tmp_path, nframes=400)
    monkeypatch.chdir(tmp_path)
    assert CliRunner().invoke(main, BUILD + ["--out", "reference.h5"]).exit_code == 0
    commit, written = cache_build._commit, []

    def fill_up(handle, first, queries, nearest):
        if len(written) == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        written.append(first)
        commit(handle, first, queries, nearest)
    monkeypatch.setattr(cache_build, "_commit", fill_up)
    result = CliRunner().invoke(main, BUILD + ["--out", "cache.h5"])
    assert result.exit_code == 1
    assert result.output == ("Error: cache.h5.partial: cannot write it (No space left on device); fix that and run "
                             "the same command again to resume\n")
    with h5py.File(tmp_path / "cache.h5.partial", "r") as handle:
        assert handle.attrs["completed"] == 2 * 4096
    monkeypatch.setattr(cache_build, "_commit", commit)
    resumed = cache_build.build_cache(features_path, out="cache.h5", nqueries=20000, chunk_rows=4096,
                                      backend="balltree")
    assert (resumed.status, resumed.resumed_from) == ("built", 2 * 4096)
    assert_same_contents(tmp_path / "cache.h5", tmp_path / "reference.h5")
    assert not strays(tmp_path)
