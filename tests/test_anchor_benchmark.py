"""benchmarks/anchor.py on a tiny database: a decompressor anchor stopped by SIGTERM, its work folder lost and
continued from the state alone ends with the unbroken run's bytes; measuring snapshots inside the run moves none of
its random draws; ``report`` gives the rows; a state with no checkpoint starts over."""
import json
import math
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time

import pytest

pytest.importorskip("torch", reason="the anchor trains the decompressor with torch")

import torch  # noqa: E402
from click.testing import CliRunner  # noqa: E402

from motion_matching.training.checkpoint import load_checkpoint  # noqa: E402

BENCHMARKS = pathlib.Path(__file__).parent.parent / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
import anchor  # noqa: E402

pytestmark = pytest.mark.skipif(os.name != "posix", reason="SIGTERM stops the run: POSIX only")

ANCHOR = str(BENCHMARKS / "anchor.py")
ITERATIONS = 50
SMALL = ["--frames", "1200", "--iterations", str(ITERATIONS)]
ENVIRONMENT = {**os.environ, "OMP_NUM_THREADS": "1"}  # every run on one thread, whatever else the machine runs
OUTPUTS = ("decompressor.bin", "latent.bin")
TIMEOUT = 300


def train_command(work, state):
    """``anchor.py train``, run in a process of its own: it sets the SIGINT handler (the guard, SIGTERM's)."""
    return [sys.executable, ANCHOR, "train", "decompressor", "--work", str(work), "--state", str(state), *SMALL]


def train(work, state):
    """The finished ``train`` run (a ``CompletedProcess`` with text output)."""
    return subprocess.run(train_command(work, state), capture_output=True, text=True, env=ENVIRONMENT,
                          timeout=TIMEOUT)


def wait_for_first_snapshot(state, child):
    """Return once ``state``'s anchor_log.json records a snapshot; fail if ``child`` ends first or time runs out."""
    log, deadline = state / "anchor_log.json", time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        if log.exists() and json.loads(log.read_text())["snapshots"]:  # written atomically: never half a file
            return
        assert child.poll() is None, f"the run ended (status {child.returncode}) before its first snapshot"
        time.sleep(0.01)
    pytest.fail(f"no snapshot in {log} after {TIMEOUT} s")


def stop_with_sigterm(work, state, errors_path):
    """Run ``train`` and send it SIGTERM once it has a snapshot; returns its exit status."""
    with open(errors_path, "w") as errors:
        child = subprocess.Popen(train_command(work, state), stdout=subprocess.DEVNULL, stderr=errors,
                                 env=ENVIRONMENT)
        try:
            wait_for_first_snapshot(state, child)
            child.send_signal(signal.SIGTERM)
            return child.wait(timeout=TIMEOUT)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()


def test_a_run_stopped_and_continued_from_its_state_alone_ends_with_the_unbroken_runs_files(tmp_path):
    unbroken = train(tmp_path / "unbroken", tmp_path / "unbroken-state")
    assert unbroken.returncode == 0, unbroken.stderr
    assert f"finished: {ITERATIONS:,} iterations, measured and kept in {tmp_path / 'unbroken-state'}" in unbroken.stdout

    work, state = tmp_path / "work", tmp_path / "state"
    assert stop_with_sigterm(work, state, tmp_path / "stopped.err") == 143, (tmp_path / "stopped.err").read_text()
    assert "interrupted: run the same command to continue" in (tmp_path / "stopped.err").read_text()
    step = load_checkpoint(work / "run" / "decompressor_checkpoint.pt")["step"]
    assert 1 <= step < ITERATIONS
    assert str(step) in json.loads((state / "anchor_log.json").read_text())["seconds_at"]  # counted on from there
    assert load_checkpoint(state / "checkpoint.pt")["step"] == step  # kept without `save`: a cut-off session loses
    shutil.rmtree(work)  # its work folder, and nothing else

    continued = train(tmp_path / "elsewhere", state)
    assert continued.returncode == 0, continued.stderr
    assert f"continuing from the kept checkpoint {state / 'checkpoint.pt'}" in continued.stderr
    for name in OUTPUTS:
        assert (tmp_path / "elsewhere" / "run" / name).read_bytes() == (tmp_path / "unbroken" / "run" / name
                                                                        ).read_bytes(), name
    assert load_checkpoint(state / "checkpoint.pt")["step"] == ITERATIONS

    reported = CliRunner().invoke(anchor.main, ["report", "decompressor", "--state", str(state), "--json",
                                                str(tmp_path / "report.json")])
    assert reported.exit_code == 0, reported.output
    report = json.loads((tmp_path / "report.json").read_text())
    assert (report["network"], report["frames"], report["finished"]) == ("decompressor", 1200, True)
    (row,) = report["rows"]  # the one snapshot, after iteration 0, measured by the stopped run as it was taken
    assert row["iterations"] == 1
    assert f"pos {row['position_error_cm']['mean']:.3f} cm" in reported.output
    assert 0 < row["position_error_cm"]["mean"] <= row["position_error_cm"]["max"]
    assert 0 <= row["contact_accuracy"] <= 1 and math.isfinite(row["loss"])

    saved = CliRunner().invoke(anchor.main, ["save", "decompressor", "--work", str(tmp_path / "elsewhere"),
                                             "--state", str(state)])
    assert saved.exit_code == 0, saved.output
    assert saved.output.splitlines() == [  # nothing left to measure
        f"kept {tmp_path / 'elsewhere' / 'run' / 'decompressor_checkpoint.pt'} as {state / 'checkpoint.pt'}"]


def test_measuring_a_snapshot_inside_the_run_leaves_its_random_draws_alone(tmp_path):
    unbroken = train(tmp_path / "anchor", tmp_path / "state")
    assert unbroken.returncode == 0, unbroken.stderr
    assert "1" in json.loads((tmp_path / "state" / "anchor_quality.json").read_text())  # measured after step 1

    data, alone = tmp_path / "anchor" / "data", tmp_path / "alone"
    untouched = (  # the same training with no snapshots, on one thread as well
        "import sys; sys.path.insert(0, sys.argv[1]); import anchor; network = anchor.Network('decompressor'); "
        "network.train({'database': sys.argv[2], 'features': sys.argv[3]}, None, sys.argv[4], config=network.config("
        f"'toolkit', exact_toolkit=True, iterations={ITERATIONS}), on_step=None, progress=None)")
    trained = subprocess.run([sys.executable, "-c", untouched, str(BENCHMARKS), str(data / "database.bin"),
                              str(data / "features.bin"), str(alone)], capture_output=True, text=True,
                             env=ENVIRONMENT, timeout=TIMEOUT)
    assert trained.returncode == 0, trained.stderr
    # an exact run writes its runtime files after iteration 0 only (and every 1,000): the checkpoint holds the rest
    measured, untouched = (load_checkpoint(folder / "decompressor_checkpoint.pt")["model"]
                           for folder in (tmp_path / "anchor" / "run", alone))
    assert measured.keys() == untouched.keys()
    for name, weights in measured.items():
        assert torch.equal(weights, untouched[name]), name


def test_an_anchor_on_a_folder_of_its_own_keeps_that_folder_and_refuses_another(tmp_path):
    from motion_matching.data import generate

    data, other, incomplete = tmp_path / "data", tmp_path / "other", tmp_path / "incomplete"
    for folder in (data, other):
        folder.mkdir()
        generate.generate_files(str(folder), nframes=1200)
    incomplete.mkdir()
    shutil.copyfile(data / "database.bin", incomplete / "database.bin")

    state = tmp_path / "state"
    trained = subprocess.run([*train_command(tmp_path / "work", state), "--data", str(data)], capture_output=True,
                             text=True, env=ENVIRONMENT, timeout=TIMEOUT)
    assert trained.returncode == 0, trained.stderr
    assert not (tmp_path / "work" / "data").exists()  # no synthetic database made beside the given one
    log = json.loads((state / "anchor_log.json").read_text())
    assert log["frames"] is None
    assert pathlib.Path(anchor.REPOSITORY, log["data"]).resolve() == data.resolve()
    assert log["inputs"]["features"] == anchor.file_sha256(str(data / "features.bin"))

    refused = CliRunner().invoke(anchor.main, ["train", "decompressor", "--work", str(tmp_path / "work"),
                                               "--state", str(state), "--data", str(other), *SMALL])
    assert refused.exit_code == 2
    assert f"--data {other}: this anchor was started on {data}" in refused.output

    missing = CliRunner().invoke(anchor.main, ["train", "decompressor", "--work", str(tmp_path / "fresh"),
                                               "--state", str(tmp_path / "fresh-state"), "--data", str(incomplete),
                                               *SMALL])
    assert missing.exit_code == 1
    assert missing.output.strip().splitlines() == [
        f"Error: {incomplete / 'features.bin'}: no such file (--data needs database.bin and features.bin)"]

    reported = CliRunner().invoke(anchor.main, ["report", "decompressor", "--state", str(state), "--json",
                                                str(tmp_path / "report.json")])
    assert reported.exit_code == 0, reported.output
    report = json.loads((tmp_path / "report.json").read_text())
    assert (report["frames"], report["data"], report["finished"]) == (None, log["data"], True)


def test_a_state_that_keeps_no_checkpoint_starts_over_and_says_so(tmp_path):
    state = tmp_path / "state"
    assert train(tmp_path / "work", state).returncode == 0
    (state / "checkpoint.pt").unlink()  # as a state from before the training process kept one
    shutil.rmtree(tmp_path / "work" / "run")

    again = train(tmp_path / "work", state)
    assert again.returncode == 0, again.stderr
    assert f"{state}: records {ITERATIONS:,} iterations but keeps no checkpoint: starting over from iteration 0" in (
        again.stderr)
    log = json.loads((state / "anchor_log.json").read_text())
    assert sorted(map(int, log["seconds_at"])) == [ITERATIONS] and list(log["snapshots"]) == ["1"]
