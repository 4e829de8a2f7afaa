"""The demo command runs the whole pipeline, announcing each step before it runs and saying where each file
went; run again into the same folder it reuses what fits and refuses another demo's files before writing."""
import json
import logging
import os

import pytest
from click.testing import CliRunner

from motion_matching.cli import main
from motion_matching.demo import STEPS
from motion_matching.toolkit import formats

pytest.importorskip("torch", reason="the command trains a network, which needs torch")

SMALL = ["--frames", "1000", "--iterations", "20", "--recipe", "toolkit"]  # batch 32: a small cache


def demo(out, *arguments):
    return CliRunner().invoke(main, ["demo", "--out", str(out), *SMALL, *arguments])


def modification_times(folder):
    return {name: os.stat(folder / name).st_mtime_ns for name in sorted(os.listdir(folder))
            if os.path.isfile(folder / name)}


def test_demo_runs_every_step_and_writes_loadable_files(tmp_path, monkeypatch):
    from motion_matching import machine
    monkeypatch.setattr(machine, "load_average", lambda: 7.5)  # a busy machine: the demo says so
    out = tmp_path / "demo"
    result = demo(out)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    note = machine.busy_note(load=7.5)
    assert lines[0] == note and lines[-1] == f"   {note} (at the start of this run)"
    headings = [index for index, line in enumerate(lines) if line.startswith("== ")]
    assert [lines[index] for index in headings] == [f"== {step}" for step in STEPS]
    assert lines[headings[0] + 1] == f"   database: {out / 'database.bin'}"  # the step's files follow its heading
    assert lines[headings[1] + 1] == f"   cache: {out / 'projector_cache.h5'}"
    assert f"   plots (PNG: truth, output and query per column): {out / 'evaluation' / 'projector_X.png'}" in lines
    network = formats.load_network(out / "projector.bin")
    assert network.sizes == [27, 512, 512, 512, 512, 59]
    features, latent = formats.load_features_and_latent(out / "features.bin", out / "latent.bin")
    assert features.features.shape[0] == latent.shape[0] == formats.load_database(out / "database.bin").nframes
    report = json.loads((out / "evaluation" / "evaluation.json").read_text())
    assert 0.0 <= report["match"]["top1"] <= 1.0
    assert f"{out / 'projector.bin'}" in result.output
    assert "compared with the measured recipes (BENCHMARKS.md, bench_quality on the 50,000-frame" in result.output
    from motion_matching.demo import REFERENCE
    _, what, top1, loss, wall = REFERENCE[0]
    assert what.startswith("toolkit recipe")
    assert f"   {what}: top-1 {top1:.1%}, held-out loss {loss:.4f}" in result.output
    took = [line for line in lines if line.startswith("   took ")]
    assert len(took) == len(STEPS)  # each step says how long it took, after its files
    this_run = [line for line in lines if line.startswith("   this run: ")]
    assert len(this_run) == 1 and " of training (the toolkit recipe's reference: " + wall + ")" in this_run[0]


def demo_result(*, steps=15_625, resumed_from=0, seconds=141.2):
    from motion_matching import demo
    from motion_matching.projector.train import TrainResult
    trained = TrainResult("projector.bin", "projector_checkpoint.pt", steps=steps, final_loss=0.5, held_out={},
                          seconds=seconds, source="offline", resumed_from=resumed_from)
    evaluation = {"match": {"top1": 0.2}, "losses": {"loss": 0.6}}
    return demo.DemoResult(evaluation, trained, {step: 1.0 for step in demo.STEPS} | {demo.STEPS[2]: seconds})


def test_demo_ends_comparing_its_result_and_training_time_with_the_measured_recipes(monkeypatch):
    from motion_matching import demo
    monkeypatch.setattr(demo, "REFERENCE", (("toolkit", "toolkit recipe", 0.25, 0.5, "1 h"),
                                            ("fast", "fast recipe", 0.3, 0.45, "9 min")))
    lines = demo.compare_with_reference(demo_result(), demo.DemoSettings())
    assert lines == [f"compared with the measured recipes ({demo.REFERENCE_SOURCE}):",
                     "   toolkit recipe: top-1 25.0%, held-out loss 0.5000, 1 h of training",
                     "   fast recipe: top-1 30.0%, held-out loss 0.4500, 9 min of training",
                     "   this run: top-1 20.0%, held-out loss 0.6000, 2 min 21 s of training (the fast recipe's "
                     "reference: 9 min)"]
    smaller = demo.compare_with_reference(demo_result(steps=40, seconds=3.4),
                                          demo.DemoSettings(frames=2000, iterations=40))
    assert smaller[-1].endswith(", 3 s of training (the fast recipe's reference: 9 min) (settings differ from the "
                                "measured demo: frames, iterations)")
    resumed = demo.compare_with_reference(demo_result(steps=30, resumed_from=20, seconds=2.0), demo.DemoSettings())
    assert ", 2 s for iterations 20-30 (an earlier run did the first ones)" in resumed[-1]
    reused = demo.compare_with_reference(demo_result(steps=30, resumed_from=30), demo.DemoSettings())
    assert ", no training (its 30 iterations were done by an earlier run)" in reused[-1]


def test_durations_read_as_minutes_and_seconds():
    from motion_matching.demo import describe_duration
    assert [describe_duration(seconds) for seconds in (0.4, 52.2, 141.4, 286.2, 2082.0, 3725.0)] == \
        ["0 s", "52 s", "2 min 21 s", "4 min 46 s", "34 min 42 s", "1 h 02 min"]


def test_a_rerun_reuses_what_fits_and_refuses_another_demo_before_writing(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="motion_matching")
    out = tmp_path / "demo"
    assert demo(out).exit_code == 0
    database_time = os.stat(out / "database.bin").st_mtime_ns
    longer = demo(out, "--iterations", "30")  # the same database; the cache grows, training continues
    assert longer.exit_code == 0, longer.output
    assert os.stat(out / "database.bin").st_mtime_ns == database_time
    assert "growing it to 960 queries" in caplog.text and "continuing the run it holds at iteration 20" in caplog.text
    before = modification_times(out)
    shorter = demo(out, "--iterations", "10")
    assert shorter.exit_code == 1
    assert shorter.stderr == (f"Error: {out / 'projector_checkpoint.pt'}: holds another demo's training (it holds 30 "
                              "iterations, more than the 10 asked for); choose another --out, or pass --force to "
                              "replace it\n")
    other = demo(out, "--frames", "1200")
    assert other.exit_code == 1
    assert other.stderr == (f"Error: {out / 'database.bin'}: database.bin, features.bin, latent.bin of another demo "
                            "(other --frames?) are in this folder; choose another --out, or pass --force to replace "
                            "them\n")
    assert modification_times(out) == before
    forced = demo(out, "--frames", "1200", "--force")
    assert forced.exit_code == 0, forced.output
    assert formats.load_database(out / "database.bin").nframes == 1200
