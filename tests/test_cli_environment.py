"""Options set through the environment (MM_PROJECTOR_<COMMAND>_<PARAMETER>, and the scripts'
MM_PROJECTOR_<PARAMETER>): a bad value is named by its variable, not by the option it sets."""
import os
import pathlib
import subprocess
import sys

import pytest

from test_cli_bad_options import BASE, last_line, make_inputs, run_with


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """The folder of test_cli_bad_options: small toolkit files, a cache, a checkpoint, bad files."""
    return make_inputs(tmp_path_factory.mktemp("inputs"))


# per command, an option and a bad value set through the environment, and the problem named after the variable
ENVIRONMENT_CASES = [
    ("generate-database", "--seed", "seed", "abc", "'abc' is not a valid integer range"),
    ("build-cache", "--queries", "nqueries", "abc", "'abc' is not a valid integer range"),
    ("verify-cache", "--sample", "sample", "-5", "-5 is not in the range x>=0"),
    ("train", "--iterations", "iterations", "abc", "'abc' is not a valid integer"),
    ("export", "--format", "format_", "bogus", "'bogus' is not one of 'bin', 'onnx'"),
    ("evaluate", "--queries", "queries", "0", "0 is not in the range x>=1"),
    ("demo", "--frames", "frames", "x", "'x' is not a valid integer range"),
]


@pytest.mark.parametrize("command, option, name, value, problem", ENVIRONMENT_CASES, ids=lambda value: str(value))
def test_a_bad_value_from_the_environment_names_the_variable(inputs, monkeypatch, command, option, name, value,
                                                             problem):
    variable = f"MM_PROJECTOR_{command.upper().replace('-', '_')}_{name.upper()}"
    result = run_with(inputs, monkeypatch, command, without(BASE[command], option), "", env={variable: value})
    assert result.exit_code == 2, result.output
    assert result.output == f"Error: {variable}: {problem}; it sets {option} (see 'main {command} --help')\n"


def without(arguments, option):
    """``arguments`` (list of str) without ``option`` and its value."""
    at = arguments.index(option) if option in arguments else len(arguments)
    return arguments[:at] + arguments[at + 2:]


# the variables are named after the parameters (features_path), as click names them
@pytest.mark.parametrize("command, arguments, variable", [
    ("check-files", ["--latent", "latent.bin"], "MM_PROJECTOR_CHECK_FILES_FEATURES"),
    ("cache-info", ["cache.h5"], "MM_PROJECTOR_CACHE_INFO_FEATURES_PATH")])
def test_a_bad_path_from_the_environment_is_named_like_one_given_on_the_command_line(inputs, monkeypatch, command,
                                                                                     arguments, variable):
    result = run_with(inputs, monkeypatch, command, arguments, "", env={variable: "folder"})
    assert result.exit_code == 1, result.output
    assert last_line(result) == "Error: folder: is a folder, not a file"


def test_an_option_the_library_refuses_from_the_environment_names_the_variable(inputs, monkeypatch):
    result = run_with(inputs, monkeypatch, "train", BASE["train"], "", env={"MM_PROJECTOR_TRAIN_DEVICE": "bogus"})
    assert result.exit_code == 1, result.output
    assert last_line(result) == ("Error: MM_PROJECTOR_TRAIN_DEVICE: 'bogus' is not a torch device (cpu, cuda or "
                                 "cuda:N); it sets --device")


@pytest.mark.parametrize("script, variable, value, problem", [
    ("train_projector.py", "MM_PROJECTOR_ITERATIONS", "abc", "'abc' is not a valid integer; it sets --iterations"),
    ("generate_database.py", "MM_PROJECTOR_FRAMES", "abc", "'abc' is not a valid integer range; it sets --frames"),
])
def test_the_scripts_name_their_own_variables(inputs, script, variable, value, problem):
    root = pathlib.Path(__file__).parent.parent
    finished = subprocess.run([sys.executable, str(root / script)], cwd=inputs, capture_output=True, text=True,
                              env={**os.environ, variable: value}, timeout=120)
    assert finished.returncode == 2, finished.stderr
    assert finished.stderr == f"Error: {variable}: {problem} (see '{script} --help')\n"
