"""Every command the README shows runs, as written, on small data, so the README cannot drift from the code.

Commands are taken from the README's ``sh`` blocks and from the example column of its commands table, in
order, and run in one working folder. Where the README asks for full sizes, ``SMALLER`` swaps the value
(every swap must be used) and ``ENVIRONMENT`` shrinks the defaults (``MM_PROJECTOR_<COMMAND>_<OPTION>``),
so each command keeps its shape. ``NOT_RUN`` names the lines this test leaves out, and why.
"""
import pathlib
import re
import shlex

import pytest
from click.testing import CliRunner

import generate_database
import train_projector
from motion_matching.cli import main
from motion_matching.data.bvh.exporter import write_database_bvh
from motion_matching.data.generate import write_toolkit_files
from motion_matching.data.synthetic import locomotion as synthetic

from conftest import needs_torch

README = pathlib.Path(__file__).parent.parent / "README.md"
SMALLER = {"--queries 16000000": "--queries 4096", "--iterations 500000": "--iterations 20",
           "--sample 5000": "--sample 200"}
ENVIRONMENT = {"MM_PROJECTOR_BUILD_CACHE_NQUERIES": "4096", "MM_PROJECTOR_ITERATIONS": "20",
               "MM_PROJECTOR_TRAIN_ITERATIONS": "20", "MM_PROJECTOR_DEMO_FRAMES": "2000",
               "MM_PROJECTOR_DEMO_ITERATIONS": "20", "MM_PROJECTOR_FRAMES": "2000",
               "MM_PROJECTOR_GENERATE_DATABASE_FRAMES": "2000", "MM_PROJECTOR_EVALUATE_QUERIES": "500",
               "MM_PROJECTOR_HELD_OUT_QUERIES": "500", "MM_PROJECTOR_TRAIN_HELD_OUT_QUERIES": "500",
               "MM_PROJECTOR_TRAIN_DECOMPRESSOR_ITERATIONS": "20", "MM_PROJECTOR_TRAIN_STEPPER_ITERATIONS": "20",
               "MM_PROJECTOR_RETRAIN_DECOMPRESSOR_ITERATIONS": "20", "MM_PROJECTOR_RETRAIN_PROJECTOR_ITERATIONS": "20",
               "MM_PROJECTOR_RETRAIN_STEPPER_ITERATIONS": "20", "MM_PROJECTOR_RETRAIN_CACHE_QUERIES": "4096"}
NOT_RUN = {"python3 -m venv": "makes a virtualenv (this suite runs in one)",
           ". .venv/bin/activate": "makes a virtualenv (this suite runs in one)",
           "pip install": "installs the project (this suite runs on the installed project)",
           "python -m pytest": "this suite itself", "ruff check": "lint, run by .ci/run",
           "lint-imports": "the layer rules, run by .ci/run",
           "python benchmarks/": "full-size benchmarks (benchmarks/, not the suite)",
           "python -c": "prints whether the C extension is built (a one-line check, no command)"}
PROGRAMS = {"mm-projector": main, "python train_projector.py": train_projector.main,
            "python -m train_projector": train_projector.main,
            "python generate_database.py": generate_database.generate_database}


def readme_commands():
    """The command lines (str) of the README in reading order: ``sh`` block lines and the commands table's
    example column."""
    text, found = README.read_text(), []
    for block in re.finditer(r"```sh\n(.*?)```", text, flags=re.S):
        for offset, line in enumerate(block.group(1).splitlines()):
            line = re.sub(r"\s+#\s.*$", "", line).strip()
            found += [(block.start(), offset, part.strip()) for part in line.split("&&") if part.strip()]
    start, stop = text.index("## Commands"), text.index("A typical session")
    for row in re.finditer(r"^\|.*\| `([^`]+)` \|$", text[start:stop], flags=re.M):
        found.append((start + row.start(), 0, row.group(1)))
    return [line for _, _, line in sorted(found, key=lambda item: item[:2])]


def split(line):
    """(program, arguments) of a README line; program None for a ``cd``."""
    for skipped in NOT_RUN:
        if line.startswith(skipped):
            return "skip", []
    if line.startswith("cd "):
        return None, shlex.split(line)[1:]
    for name in sorted(PROGRAMS, key=len, reverse=True):
        if line == name or line.startswith(name + " "):
            return name, shlex.split(line[len(name):])
    raise AssertionError(f"README command {line!r} runs a program this test does not know")


def shrink(line, used):
    for big, small in SMALLER.items():
        if big in line:
            used.add(big)
            line = line.replace(big, small)
    return line


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    """A folder holding the toolkit files of a small synthetic database, two BVH clips named as the README
    names them, and ``my-toolkit/resources`` with a copy of the files (and the toolkit's trained projector.bin)."""
    database = synthetic.generate_synthetic_database(seed=0, nframes=600)
    write_toolkit_files(tmp_path, database)
    clips = write_database_bvh(database, tmp_path / "clips")
    for name, clip in zip(("walk1.bvh", "run1.bvh"), clips):
        pathlib.Path(clip).rename(tmp_path / name)
    resources = tmp_path / "my-toolkit" / "resources"
    write_toolkit_files(resources, database)
    (resources / "projector.bin").write_bytes((pathlib.Path(__file__).parent / "data" / "toolkit" /
                                               "projector.bin").read_bytes())
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_readme_shows_the_commands_this_test_expects():
    lines = readme_commands()
    assert len(lines) >= 20
    assert "mm-projector evaluate --projector projector.bin --out evaluation/" in lines


def test_every_readme_command_runs(workspace, monkeypatch):
    needs_torch()  # train, export, evaluate and demo are among them
    used, ran = set(), []
    for line in readme_commands():
        program, arguments = split(shrink(line, used))
        if program == "skip":
            continue
        if program is None:
            monkeypatch.chdir(arguments[0])
            continue
        result = CliRunner().invoke(PROGRAMS[program], arguments, env=ENVIRONMENT, prog_name=program)
        assert result.exit_code == 0, f"README command {line!r} failed:\n{result.output}"
        ran.append(line)
    assert used == set(SMALLER), f"swaps no README command uses any more: {set(SMALLER) - used}"
    assert len(ran) >= 16
