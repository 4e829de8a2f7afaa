"""Ctrl-C at any moment of build-cache, train and demo (console script and toolkit-named scripts alike): one
line on stderr, exit status 130, never a traceback or click's ``Aborted!``; what is on disk is complete or a
resumable partial, and the same command run again finishes the work. SIGTERM the same, with status 143, also
in a job started in the background (SIGINT ignored).

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
from motion_matching.interrupts import INTERRUPTED_EXIT, INTERRUPTED_LINE, TERMINATED_EXIT
from motion_matching.toolkit import formats
from motion_matching.training.checkpoint import load_checkpoint

from conftest import needs_torch, write_small_toolkit_files

ROOT = pathlib.Path(__file__).parent.parent
pytestmark = pytest.mark.skipif(os.name != "posix", reason="SIGINT sent with os.kill is POSIX only")

# the child: PROGRAM (a script's path or a module's name) runs as from a shell, and a timer sends SIGNAL (SIGINT,
# or SIGTERM to a job that ignores SIGINT as one started in the background does) to the process DELAY seconds
# after the harness has loaded it and the guard module. A signal that lands in the harness itself (before the
# program's first line or after its exit) voids the sample: status VOID, or death by SIGTERM before the program
# could handle it.
CHILD = """
import importlib.util, os, signal, sys, threading, traceback
import motion_matching.interrupts
delay, signal_name, program, *arguments = sys.argv[1:]
if signal_name == "SIGTERM":
    signal.signal(signal.SIGINT, signal.SIG_IGN)
if program.endswith(".py") or os.sep in program:
    spec, path = None, program
    with open(program) as source:
        code = compile(source.read(), program, "exec")
else:
    spec = importlib.util.find_spec(program)
    path, code = spec.origin, spec.loader.get_code(program)
sys.argv = [path, *arguments]
namespace = {"__name__": "__main__", "__file__": path, "__spec__": spec, "__builtins__": __builtins__}
timer = threading.Timer(float(delay), os.kill, (os.getpid(), getattr(signal, signal_name)))
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


def interrupted_after(delay, program, *arguments, cwd, env=None, signal_name="SIGINT"):
    """Run ``program arguments`` in ``cwd``, ``signal_name`` after ``delay`` seconds; returns (status, stderr
    lines), running it again (with the delay halved, then doubled) when the signal landed in the harness."""
    void = (VOID, -signal.SIGTERM) if signal_name == "SIGTERM" else (VOID,)
    for attempt in (delay, delay / 2, delay * 2):
        child = subprocess.run([sys.executable, "-c", CHILD, str(attempt), signal_name, program, *arguments],
                               cwd=cwd, capture_output=True, text=True, timeout=300, env=env)
        if child.returncode not in void:
            return child.returncode, child.stderr.splitlines()
    pytest.fail(f"{signal_name} after {delay} s landed in the test's harness three times")


def assert_one_line_or_finished(status, lines, *, allowed=(), stopped=INTERRUPTED_EXIT):
    """Status 0, or ``stopped`` (130, Ctrl-C's) with one interrupt line (the shared one or one starting with an
    ``allowed`` prefix) last; the only other lines a quiet command may print are its notes (``note: ...``);
    never a traceback."""
    assert status in (0, stopped), lines
    assert all(_says_what_it_does(line) for line in lines[:-1]), lines
    if status == stopped:
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


# SIGTERM (kill, a build machine's timeout) at fewer moments: the same handling as Ctrl-C's, exit status 143
SIGNALS = {"SIGINT": (INTERRUPTED_EXIT, None), "SIGTERM": (TERMINATED_EXIT, 2)}


@pytest.mark.parametrize("signal_name", SIGNALS)
def test_build_cache_at_many_moments_stops_in_one_line_and_the_same_command_finishes(tmp_path, signal_name):
    stopped, every = SIGNALS[signal_name]
    features_path, _ = write_small_toolkit_files(tmp_path)
    cache.build_cache(features_path, out=tmp_path / "reference.h5", nqueries=200_000, chunk_rows=10_000)
    program = console_script()
    for delay in (0.02, 0.2, 0.6, 1.2, 2.0, 3.2, 4.5)[::every]:
        status, lines = interrupted_after(delay, program, *BUILD, cwd=tmp_path, signal_name=signal_name)
        assert_one_line_or_finished(status, lines, allowed=("interrupted: ", "interrupted before the first chunk"),
                                    stopped=stopped)
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


@pytest.mark.parametrize("signal_name", SIGNALS)
def test_train_script_at_many_moments_stops_in_one_line_and_the_same_command_finishes(tmp_path, signal_name):
    needs_torch()
    stopped, every = SIGNALS[signal_name]
    write_small_toolkit_files(tmp_path, nframes=400)
    script = str(ROOT / "train_projector.py")
    for delay in (0.05, 0.6, 1.5, 3.0, 5.0)[::every]:
        status, lines = interrupted_after(delay, script, *TRAIN, cwd=tmp_path, signal_name=signal_name)
        assert_one_line_or_finished(status, lines, allowed=("interrupted after ", "interrupted; "), stopped=stopped)
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




def test_sigterm_to_a_background_training_saves_the_step_reached_and_the_same_command_ends_as_an_unbroken_run(
        tmp_path):
    """A job started in the background ignores SIGINT; SIGTERM (kill, a build machine's cancel) stops its training
    at the next step boundary with a checkpoint of that step, not only the last periodic one."""
    needs_torch()
    from motion_matching.projector.config import TrainConfig
    from motion_matching.projector.train import train_projector

    from train_helpers import assert_identical_states

    features_path, latent_path = write_small_toolkit_files(tmp_path, nframes=400)
    settings = {"iterations": 1000, "hidden": 128, "hidden_layers": 1, "save_every": 5, "checkpoint_every": 100_000}
    train_projector(TrainConfig(**settings, threads=1), features_path=features_path, latent_path=latent_path,
                    out_dir=tmp_path / "unbroken", held_out_queries=0)
    command = [sys.executable, "-c", "from motion_matching.cli import main; main()", "train", "--database", "",
               "--iterations", "1000", "--hidden", "128", "--hidden-layers", "1", "--save-every", "5",
               "--checkpoint-every", "100000", "--held-out", "0", "--threads", "1", "--quiet", "--out", "broken"]
    network, stops = tmp_path / "broken" / "projector.bin", []
    for _ in range(3):  # each stop lands at another moment of a step or between two
        stops.append(terminated_training(command, cwd=tmp_path, network=network))
    assert 0 < stops[0] < stops[1] < stops[2] < 1000, stops
    again = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
    assert network.read_bytes() == (tmp_path / "unbroken" / "projector.bin").read_bytes()
    assert_identical_states(load_checkpoint(tmp_path / "broken" / "projector_checkpoint.pt"),
                            load_checkpoint(tmp_path / "unbroken" / "projector_checkpoint.pt"))


def terminated_training(command, *, cwd, network):
    """Start (or continue) ``command``'s training as a background job (SIGINT ignored), SIGTERM it once it has
    written ``network`` after a new iteration, and check its one line and its checkpoint; returns the step it
    stopped at."""
    checkpoint = network.with_name("projector_checkpoint.pt")
    start = load_checkpoint(checkpoint)["step"] if checkpoint.exists() else 0
    seen = network.stat().st_mtime_ns if network.exists() else None
    child = subprocess.Popen(command, cwd=cwd, stderr=subprocess.PIPE, text=True,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    while child.poll() is None and not (network.exists() and network.stat().st_mtime_ns != seen):
        time.sleep(0.01)  # polling for the file the run writes every few iterations
    child.send_signal(signal.SIGINT)  # ignored, as in a background job
    child.send_signal(signal.SIGTERM)
    lines = child.communicate(timeout=120)[1].splitlines()
    assert child.returncode == TERMINATED_EXIT, lines
    assert len(lines) == 1 and lines[0].startswith("interrupted after ") and lines[0].endswith(
        "run the same command again to continue"), lines
    stopped_at = int(lines[0].split()[2].replace(",", ""))
    assert start < stopped_at == load_checkpoint(checkpoint)["step"]
    return stopped_at


def test_the_outermost_guard_makes_sigterm_an_interrupt_and_puts_the_default_back(monkeypatch):
    from motion_matching import interrupts

    monkeypatch.setattr(interrupts, "_stop_signals", [])  # this process's record: the other tests' exits stay 130
    interrupts_exit = interrupts.interrupts_exit
    earlier = signal.signal(signal.SIGTERM, signal.SIG_DFL)  # as a command starts: whatever other tests left
    try:
        _check_guard(interrupts_exit, interrupts)
    finally:
        signal.signal(signal.SIGTERM, earlier)


def _check_guard(interrupts_exit, interrupts):
    with interrupts_exit():
        handler = signal.getsignal(signal.SIGTERM)
        with interrupts_exit():
            assert signal.getsignal(signal.SIGTERM) is handler
        assert signal.getsignal(signal.SIGTERM) is handler
        with pytest.raises(KeyboardInterrupt):
            handler(signal.SIGTERM, None)
        assert interrupts.interrupted_exit() == TERMINATED_EXIT
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
