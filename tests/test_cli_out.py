"""``--out``: a FOLDER for train, evaluate, demo and generate-database, a FILE for build-cache and export;
a folder named like a file is refused, and a refused run leaves no folder behind."""
import os

import pytest
from click.testing import CliRunner

from motion_matching.cli import main

from conftest import NEEDS_TORCH, TOOLKIT_NETWORKS, TORCH_ABSENT, needs_torch

WITH_TORCH = pytest.mark.skipif(TORCH_ABSENT, reason=NEEDS_TORCH)


@pytest.fixture
def in_files(tmp_path, small_files, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def invoke(*args):
    return CliRunner().invoke(main, [str(arg) for arg in args])


@pytest.mark.parametrize("arguments", [
    pytest.param(["train", "--database", "", "--iterations", "2", "--quiet"], marks=WITH_TORCH),
    pytest.param(["evaluate", "--projector", TOOLKIT_NETWORKS / "projector.bin", "--queries", "10"], marks=WITH_TORCH),
    pytest.param(["demo", "--iterations", "2"], marks=WITH_TORCH),
    ["generate-database", "--frames", "300"],
])
def test_a_folder_named_like_a_file_is_refused_and_not_made(in_files, arguments):
    result = invoke(*arguments, "--out", "newrun.bin")
    assert result.exit_code == 1
    assert result.output == ("Error: newrun.bin: is named like a file but this --out names a folder (files are "
                             "written into it); give a folder name such as newrun\n")
    assert not os.path.exists("newrun.bin")


def test_a_refused_run_leaves_no_empty_folder(in_files):
    needs_torch()
    result = invoke("train", "--database", "", "--iterations", "2", "--offline", "missing.h5", "--out", "run/a")
    assert result.exit_code == 1 and "missing.h5" in result.output
    assert not os.path.exists("run")


def test_help_names_folders_and_files():
    needs_torch()  # train, evaluate, demo, export
    for command, kind in (("train", "FOLDER"), ("evaluate", "FOLDER"), ("demo", "FOLDER"),
                          ("generate-database", "FOLDER"), ("build-cache", "FILE"), ("export", "FILE")):
        assert f"--out {kind}" in invoke(command, "--help").output, command
