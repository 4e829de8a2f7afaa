"""The demo command generates a synthetic database.bin and runs the retrain pipeline on it, then exports and
evaluates the projector; run again into the same folder its stages are up to date, and it refuses another
demo's database.bin before writing anything."""
import json
import os
import re
import shutil

import pytest

pytest.importorskip("torch", reason="the demo trains three networks, which needs torch")

from click.testing import CliRunner  # noqa: E402

from motion_matching.cli import main  # noqa: E402
from motion_matching.pipeline.run import STAGES, StageResult  # noqa: E402
from motion_matching.projector import c_evaluator  # noqa: E402
from motion_matching.toolkit import formats  # noqa: E402

# every network's toolkit recipe (batch 32) for 4 iterations: a 128-query cache, a few seconds a stage
SMALL = ["--frames", "1000", "--iterations", "4", "--recipe", "toolkit", "--threads", "1"]
RUNTIME = ("database.bin", "features.bin", "decompressor.bin", "latent.bin", "latent.json", "projector.bin",
           "stepper.bin", "retrain.json")


def demo(out, *arguments):
    return CliRunner().invoke(main, ["demo", "--out", str(out), *SMALL, *arguments])


def modification_times(folder):
    return {name: os.stat(folder / name).st_mtime_ns for name in sorted(os.listdir(folder))
            if os.path.isfile(folder / name)}


def summary_statuses(lines):
    """{stage: status} from the summary table that follows its header line."""
    start = next(index for index, line in enumerate(lines) if line.split()[:2] == ["stage", "status"])
    rows = [re.split(r"\s{2,}", line) for line in lines[start + 1:start + 1 + len(STAGES)]]
    return {row[0]: row[1] for row in rows}


@pytest.fixture(scope="module")
def first_run(tmp_path_factory):
    """One small demo into ``demo/`` on a machine that looks busy (the demo says so): (folder, result)."""
    from motion_matching import machine
    out = tmp_path_factory.mktemp("demo") / "demo"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(machine, "load_average", lambda: 7.5)
        result = demo(out)
    assert result.exit_code == 0, result.output
    return out, result


@pytest.fixture
def copied(first_run, tmp_path):
    """A copy of the first run's folder to change."""
    shutil.copytree(first_run[0], tmp_path / "demo")
    return tmp_path / "demo"


def test_the_demo_runs_every_pipeline_stage_between_its_own_steps(first_run):
    out, result = first_run
    lines = result.stdout.splitlines()
    headings = [line.split(":")[0] for line in lines if line.startswith("== ")]
    assert headings == ["== generate synthetic database", *(f"== {stage}" for stage in STAGES), "== export",
                        "== evaluate on held-out queries"]
    assert lines[lines.index("== generate synthetic database") + 1] == f"   database: {out / 'database.bin'}"
    assert "== decompressor: runs (never run here)" in lines
    verify = "ran" if c_evaluator.find_compiler() is not None else "skipped"
    assert summary_statuses(lines) == {**{stage: "ran" for stage in STAGES}, "verify": verify}
    assert f"   plots (PNG: truth, output and query per column): {out / 'evaluation' / 'projector_X.png'}" in lines


def test_the_demo_leaves_the_three_networks_and_the_decompressors_latent(first_run):
    out, _ = first_run
    assert all((out / name).is_file() for name in RUNTIME)
    database = formats.load_database(out / "database.bin")
    assert database.nframes == 1000
    features, latent = formats.load_features_and_latent(out / "features.bin", out / "latent.bin")
    assert features.features.shape[0] == latent.shape[0] == database.nframes
    # the latent is the trained decompressor's (not generate-database's stand-in): latent.json says so
    assert (out / "latent.bin").read_bytes() == (out / "retrain" / "decompressor" / "latent.bin").read_bytes()
    assert json.loads((out / "latent.json").read_text())["iterations"] == 4
    assert formats.load_network(out / "projector.bin").sizes == [27, 512, 512, 512, 512, 59]
    assert formats.load_network(out / "stepper.bin").sizes[0] == formats.load_network(out / "stepper.bin").sizes[-1]
    report = json.loads((out / "evaluation" / "evaluation.json").read_text())
    assert 0.0 <= report["match"]["top1"] <= 1.0


def test_the_demo_ends_with_the_summary_and_an_honest_comparison(first_run):
    from motion_matching import machine
    from motion_matching.demo import LIKE_FOR_LIKE, REFERENCE
    _, result = first_run
    lines = result.stdout.splitlines()
    note = machine.busy_note(load=7.5)
    assert lines[0] == note and lines[-2:] == [LIKE_FOR_LIKE, f"   {note} (at the start of this run)"]
    _, what, top1, wall = REFERENCE[0]
    assert f"   {what}: top-1 {top1:.1%}, {wall} of training" in lines
    this_run = [line for line in lines if line.startswith("   this run: ")]
    assert len(this_run) == 1 and ", the projector stage took " in this_run[0]
    assert this_run[0].endswith(f"(the toolkit recipe's reference: {wall}) (settings differ from the measured demo: "
                                "frames, recipe, iterations)")


def test_a_rerun_finds_every_stage_up_to_date_and_writes_nothing_of_the_pipeline(copied):
    before = modification_times(copied)
    rerun = demo(copied)
    assert rerun.exit_code == 0, rerun.output
    lines = rerun.stdout.splitlines()
    assert [f"== {stage}: up to date" for stage in STAGES] == [line for line in lines if line.endswith(": up to date")]
    assert set(summary_statuses(lines).values()) <= {"up to date", "skipped"}
    after = modification_times(copied)
    assert {name: after[name] for name in RUNTIME} == {name: before[name] for name in RUNTIME}
    assert "no training (the projector stage was up to date: an earlier run trained it)" in rerun.stdout


def test_another_demos_database_is_refused_before_writing_and_replaced_with_force(copied):
    before = modification_times(copied)
    other = demo(copied, "--frames", "1200")
    assert other.exit_code == 1
    assert other.stderr == (f"Error: {copied / 'database.bin'}: is another demo's (other --frames?) or not a demo's; "
                            "choose another --out, or pass --force to replace it\n")
    assert modification_times(copied) == before
    forced = demo(copied, "--frames", "1200", "--force")
    assert forced.exit_code == 0, forced.output
    assert formats.load_database(copied / "database.bin").nframes == 1200
    assert formats.load_features(copied / "features.bin").features.shape[0] == 1200
    assert summary_statuses(forced.stdout.splitlines())["projector"] == "ran"


def test_the_demo_settings_shrink_every_network_and_the_cache():
    from motion_matching.demo import DemoSettings
    default = DemoSettings().retrain_settings()
    assert default.cache_queries == 16_000_000 and default.recipe == "fast"
    small = DemoSettings(recipe="toolkit", iterations=4).retrain_settings()
    assert [small.config(network).iterations for network in ("decompressor", "projector", "stepper")] == [4, 4, 4]
    assert small.cache_queries == 4 * 32  # one cached query per training sample: the toolkit recipe's batch 32


def stage(name, status, seconds=0.0):
    return StageResult(name, status, seconds, None, [])


def test_the_comparison_names_the_projector_stage_and_what_compares(monkeypatch):
    from motion_matching import demo
    monkeypatch.setattr(demo, "REFERENCE", (("toolkit", "toolkit recipe", 0.25, "1 h"),
                                            ("fast", "fast recipe", 0.3, "9 min")))
    result = demo.DemoResult({"match": {"top1": 0.2}}, [stage("cache", "ran", 9.0), stage("projector", "ran", 141.2)],
                             {})
    assert demo.compare_with_reference(result, demo.DemoSettings()) == [
        f"compared with the measured projector recipes ({demo.REFERENCE_SOURCE}):",
        "   toolkit recipe: top-1 25.0%, 1 h of training", "   fast recipe: top-1 30.0%, 9 min of training",
        "   this run: top-1 20.0%, the projector stage took 2 min 21 s (the fast recipe's reference: 9 min)",
        demo.LIKE_FOR_LIKE]
    smaller = demo.compare_with_reference(result, demo.DemoSettings(frames=2000, iterations=40))
    assert smaller[-2].endswith("(the fast recipe's reference: 9 min) (settings differ from the measured demo: "
                                "frames, iterations)")
    reused = demo.DemoResult({"match": {"top1": 0.2}}, [stage("projector", "up to date")], {})
    assert ", no training (the projector stage was up to date: an earlier run trained it)" in \
        demo.compare_with_reference(reused, demo.DemoSettings())[-2]


def test_durations_read_as_minutes_and_seconds():
    from motion_matching.demo import describe_duration
    assert [describe_duration(seconds) for seconds in (0.4, 52.2, 141.4, 286.2, 2082.0, 3725.0)] == \
        ["0 s", "52 s", "2 min 21 s", "4 min 46 s", "34 min 42 s", "1 h 02 min"]
