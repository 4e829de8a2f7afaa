"""Ctrl-C at any moment of build-cache, train and demo (console script and toolkit-named scripts alike): one
line on stderr, exit status 130, never a traceback or click's ``Aborted!``; what is on disk is complete or a
resumable partial, and the same command run again finishes the work.

The subprocess tests send SIGINT after a range of delays counted from the moment the guard that handles it,
``motion_matching.interrupts`` (two standard-library imports), is loaded: the interpreter's start-up and the
loading of the guard itself come before any code that could handle a Ctrl-C. On a loaded
machine a delay lands in no predictable phase, so each run asserts only what holds at every moment: the run
either finished (status 0) or stopped with one line (status 130). In-process tests interrupt chosen phases.
"""
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import threading
import time
import types

import click
import h5py
import numpy as np
import pytest
from click.testing import CliRunner

from motion_matching import cache
from motion_matching.cli import group, main
from motion_matching.interrupts import INTERRUPTED_EXIT, INTERRUPTED_LINE
from motion_matching.toolkit import formats
from motion_matching.training.checkpoint import load_checkpoint

from conftest import needs_torch, write_small_toolkit_files

ROOT = pathlib.Path(__file__).parent.parent
pytestmark = pytest.mark.skipif(os.name != "posix", reason="SIGINT sent with os.kill is POSIX only")

# the child: PROGRAM (a script's path or a module's name) runs as from a shell, and a timer sends SIGINT to the
# process DELAY seconds after the harness has loaded it and the guard module. A Ctrl-C that lands in the
# harness itself (before the program's first line or after its exit) voids the sample: status VOID.
CHILD = """
import importlib.util, os, signal, sys, threading, traceback
import motion_matching.interrupts
delay, program, *arguments = sys.argv[1:]
if program.endswith(".py") or os.sep in program:
    spec, path = None, program
    with open(program) as source:
        code = compile(source.read(), program, "exec")
else:
    spec = importlib.util.find_spec(program)
    path, code = spec.origin, spec.loader.get_code(program)
sys.argv = [path, *arguments]
namespace = {"__name__": "__main__", "__file__": path, "__spec__": spec, "__builtins__": __builtins__}
timer = threading.Timer(float(delay), os.kill, (os.getpid(), signal.SIGINT))
timer.daemon = True
try:
    timer.start()
    exec(code, namespace)
except KeyboardInterrupt as stop:
    if path in [frame.f_code.co_filename for frame, _ in traceback.walk_tb(stop.__traceback__)]:
        raise  # escaped from the program: the failure these tests look for
    os._exit(%d)
"""
VOID = 99
CHILD = CHILD % VOID
BUILD = ["build-cache", "--queries", "200000", "--chunk-rows", "10000", "--quiet"]
TRAIN = ["--database", "", "--iterations", "300", "--hidden", "32", "--hidden-layers", "1",
         "--checkpoint-every", "20", "--save-every", "5", "--held-out", "0", "--threads", "1", "--quiet"]


def interrupted_after(delay, program, *arguments, cwd, env=None):
    """Run ``program arguments`` in ``cwd``, SIGINT after ``delay`` seconds; returns (status, stderr lines),
    running it again (with the delay halved, then doubled) when the signal landed in the harness."""
    for attempt in (delay, delay / 2, delay * 2):
        child = subprocess.run([sys.executable, "-c", CHILD, str(attempt), program, *arguments], cwd=cwd,
                               capture_output=True, text=True, timeout=300, env=env)
        if child.returncode != VOID:
            return child.returncode, child.stderr.splitlines()
    pytest.fail(f"SIGINT after {delay} s landed in the test's harness three times")


def assert_one_line_or_finished(status, lines, *, allowed=()):
    """Status 0, or 130 with one interrupt line (the shared one or one starting with an ``allowed`` prefix)
    last; the only other lines a quiet command may print are its notes (``note: ...``); never a traceback."""
    assert status in (0, INTERRUPTED_EXIT), lines
    assert all(_says_what_it_does(line) for line in lines[:-1]), lines
    if status == INTERRUPTED_EXIT:
        assert lines[-1] == INTERRUPTED_LINE or lines[-1].startswith(tuple(allowed)), lines
    else:
        assert not lines or _says_what_it_does(lines[-1]), lines


def _says_what_it_does(line):
    """A note, or a build's line about the partial an earlier interrupted run left (resumed, or started over
    when the interrupt came before its first rows were recorded)."""
    return line.startswith("note: ") or ".partial: " in line


def assert_no_traceback_and_one_interrupt_line_last(status, lines, interrupt_lines):
    """For commands that log their steps on stderr: status 0, or 130 with one of ``interrupt_lines`` last
    and only once; never a traceback or ``Aborted!``."""
    assert status in (0, INTERRUPTED_EXIT), lines
    assert not any(line.startswith(("Traceback", "Aborted!")) for line in lines), lines
    if status == INTERRUPTED_EXIT:
        assert lines[-1] in interrupt_lines and sum(line.startswith("interrupted") for line in lines) == 1, lines


def console_script():
    path = shutil.which("mm-projector")
    if path is None:
        pytest.skip("the mm-projector console script is not installed (pip install -e .)")
    return path


def test_build_cache_at_many_moments_stops_in_one_line_and_the_same_command_finishes(tmp_path):
    features_path, _ = write_small_toolkit_files(tmp_path)
    cache.build_cache(features_path, out=tmp_path / "reference.h5", nqueries=200_000, chunk_rows=10_000)
    program = console_script()
    for delay in (0.02, 0.2, 0.6, 1.2, 2.0, 3.2, 4.5):
        status, lines = interrupted_after(delay, program, *BUILD, cwd=tmp_path)
        assert_one_line_or_finished(status, lines, allowed=("interrupted: ", "interrupted before the first chunk"))
        partial = tmp_path / "projector_cache.h5.partial"
        if (tmp_path / "projector_cache.h5").exists():
            assert status == 0 or not partial.exists()  # published whole: no partial beside it
        elif partial.exists():
            with h5py.File(partial, "r") as handle:  # a partial that a rerun resumes: its counter is readable
                assert 0 <= int(handle.attrs["completed"]) <= 200_000
    again = subprocess.run([program, *BUILD], cwd=tmp_path, capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
    with h5py.File(tmp_path / "projector_cache.h5", "r") as built, h5py.File(tmp_path / "reference.h5", "r") as ref:
        assert np.array_equal(built["queries"][:], ref["queries"][:])
        assert np.array_equal(built["nearest"][:], ref["nearest"][:])


def test_train_script_at_many_moments_stops_in_one_line_and_the_same_command_finishes(tmp_path):
    needs_torch()
    write_small_toolkit_files(tmp_path, nframes=400)
    script = str(ROOT / "train_projector.py")
    for delay in (0.05, 0.6, 1.5, 3.0, 5.0):
        status, lines = interrupted_after(delay, script, *TRAIN, cwd=tmp_path)
        assert_one_line_or_finished(status, lines, allowed=("interrupted after ", "interrupted; "))
        if (tmp_path / "projector_checkpoint.pt").exists():
            assert load_checkpoint(tmp_path / "projector_checkpoint.pt")["step"] <= 300
    again = subprocess.run([sys.executable, script, *TRAIN], cwd=tmp_path, capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
    assert load_checkpoint(tmp_path / "projector_checkpoint.pt")["step"] == 300
    formats.load_network(tmp_path / "projector.bin")


def test_python_m_train_projector_and_generate_database_stop_in_one_line(tmp_path):
    needs_torch()
    write_small_toolkit_files(tmp_path, nframes=400)
    env_path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    for delay in (0.1, 1.0):  # -m: found through the path, as once installed
        status, lines = interrupted_after(delay, "train_projector", *TRAIN, cwd=tmp_path,
                                          env={**os.environ, "PYTHONPATH": env_path})
        assert_one_line_or_finished(status, lines, allowed=("interrupted after ", "interrupted; "))
    for delay in (0.05, 0.4, 1.2):
        out = tmp_path / f"data-{delay}"
        status, lines = interrupted_after(delay, str(ROOT / "generate_database.py"), "--frames", "2000",
                                          "--out", str(out), cwd=tmp_path)
        assert_no_traceback_and_one_interrupt_line_last(status, lines, (INTERRUPTED_LINE,))
        for name in ("database.bin", "features.bin", "latent.bin"):
            if (out / name).exists():  # each file there is whole: written under a temporary name, then renamed
                getattr(formats, f"load_{name.split('.')[0]}")(out / name)


def test_demo_at_many_moments_stops_in_one_line(tmp_path):
    needs_torch()
    program = console_script()
    arguments = ["demo", "--out", "demo", "--frames", "1000", "--iterations", "20", "--recipe", "toolkit"]
    for delay in (0.3, 1.5, 4.0, 8.0):
        status, lines = interrupted_after(delay, program, *arguments, cwd=tmp_path)
        assert_no_traceback_and_one_interrupt_line_last(status, lines, (
            INTERRUPTED_LINE, "interrupted; the files in demo are complete: run the same command again to continue"))


def raising_keyboard_interrupt(*args, **kwargs):
    raise KeyboardInterrupt


@pytest.mark.parametrize("target", ["motion_matching.cache.build.formats.load_features",
                                    "motion_matching.cache.build.make_searcher"])
def test_build_cache_interrupted_before_its_first_chunk_says_one_line(tmp_path, monkeypatch, target):
    features_path, _ = write_small_toolkit_files(tmp_path)
    monkeypatch.setattr(target, raising_keyboard_interrupt)
    result = CliRunner().invoke(main, ["build-cache", "--features", str(features_path), "--out",
                                       str(tmp_path / "c.h5"), "--queries", "1000"])
    assert result.exit_code == INTERRUPTED_EXIT
    assert result.stderr == INTERRUPTED_LINE + "\n" and result.stdout == ""
    assert sorted(os.listdir(tmp_path)) == ["features.bin", "latent.bin"]


def test_ctrl_c_while_a_command_module_loads_says_one_line(monkeypatch):
    monkeypatch.delitem(main.commands, "train", raising=False)  # as in a fresh process: its module loads now
    monkeypatch.setattr(group.importlib, "import_module", raising_keyboard_interrupt)
    result = CliRunner().invoke(main, ["train", "--help"])
    assert result.exit_code == INTERRUPTED_EXIT
    assert result.stderr == INTERRUPTED_LINE + "\n"


def test_demo_interrupted_while_it_makes_its_database_says_its_line(tmp_path, monkeypatch):
    needs_torch()
    monkeypatch.setattr("motion_matching.demo.locomotion.generate_synthetic_database", raising_keyboard_interrupt)
    result = CliRunner().invoke(main, ["demo", "--out", str(tmp_path / "demo"), "--frames", "1000"])
    assert result.exit_code == INTERRUPTED_EXIT
    assert result.stderr == (f"interrupted; the files in {tmp_path / 'demo'} are complete: run the same command "
                             "again to continue\n")


def test_ctrl_c_while_click_closes_the_command_says_one_line():
    @click.command(cls=group.Command)
    @click.pass_context
    def closing(context):
        context.call_on_close(raising_keyboard_interrupt)  # after the callback: click's own teardown
    result = CliRunner().invoke(closing, [])
    assert result.exit_code == INTERRUPTED_EXIT
    assert result.stderr == INTERRUPTED_LINE + "\n"


def test_exit_codes_and_other_aborts_stay_as_click_makes_them():
    @click.command(cls=group.Command)
    @click.option("--code", type=int)
    @click.option("--abort", is_flag=True)
    @click.pass_context
    def exiting(context, code, abort):
        if abort:
            raise click.Abort()  # as a prompt answered with end-of-file does
        if code is not None:
            context.exit(code)
        return "a value, not a status"
    assert CliRunner().invoke(exiting, []).exit_code == 0
    assert CliRunner().invoke(exiting, ["--code", "3"]).exit_code == 3
    aborted = CliRunner().invoke(exiting, ["--abort"])
    assert aborted.exit_code == 1 and aborted.stderr == "Aborted!\n"


def test_a_ctrl_c_that_lands_in_a_finaliser_reaches_the_main_thread_again_after_the_hook_returns():
    from motion_matching import interrupts

    others = []
    landed = types.SimpleNamespace(exc_value=KeyboardInterrupt())
    # a suite started in the background (nohup, `cmd &`) inherits an ignored SIGINT; a terminal's Ctrl-C has Python's
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        interrupts._interrupt_again(landed, default=others.append)  # returns: raising in the hook would be lost
        with pytest.raises(KeyboardInterrupt):
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:  # the re-delivered interrupt is raised at a check of pending signals
                threading.Event().wait(0.05)
    finally:
        signal.signal(signal.SIGINT, previous)
    other = types.SimpleNamespace(exc_value=ValueError("x"))
    interrupts._interrupt_again(other, default=others.append)
    assert others == [other]


FINALISER_INTERRUPTED = """
import sys, threading
from motion_matching.interrupts import interrupts_exit

class InterruptedWhileCollected:
    def __del__(self):
        raise KeyboardInterrupt  # as a Ctrl-C that lands in a finaliser

with interrupts_exit():
    InterruptedWhileCollected()
    threading.Event().wait(60)  # a blocking wait: the command is still running when the interrupt comes again
    print("not interrupted", file=sys.stderr)
"""


def _sigint_as_at_a_terminal():
    """In the child before it starts: SIGINT's default action, so Python installs its handler even when the
    suite itself runs in the background with SIGINT ignored."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_a_ctrl_c_in_a_finaliser_stops_the_command_with_the_one_line():
    child = subprocess.run([sys.executable, "-c", FINALISER_INTERRUPTED], capture_output=True, text=True,
                           timeout=120, cwd=ROOT, preexec_fn=_sigint_as_at_a_terminal)
    assert (child.returncode, child.stderr) == (INTERRUPTED_EXIT, INTERRUPTED_LINE + "\n")


