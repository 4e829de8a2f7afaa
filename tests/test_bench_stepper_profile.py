"""benchmarks/bench_stepper_profile.py: a tiny whole run reports the step, its products alone and their share."""
import json
import pathlib
import sys

import pytest

pytest.importorskip("torch", reason="bench_stepper_profile times and profiles torch training steps")

from click.testing import CliRunner  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).parent.parent / "benchmarks"))
import bench_stepper_profile  # noqa: E402

from motion_matching.data import generate  # noqa: E402


def test_a_tiny_run_splits_the_step_into_its_products_and_the_rest(tmp_path):
    generate.generate_files(tmp_path / "data", nframes=1200)
    out = tmp_path / "profile.json"
    result = CliRunner().invoke(bench_stepper_profile.main, [
        "--data", str(tmp_path / "data"), "--window", "3", "--threads", "1", "--repeats", "1", "--steps", "2",
        "--json", str(out)])
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert report["window"] == 3 and report["step_ms"] > 0 and report["one_autocast_region_ms"] > 0
    assert 0 < report["products_alone_ms"] and 0 < report["profiled_products_share"] < 1
    assert report["profiled_others"] and all(0 < share < 1 for _, share in report["profiled_others"])
    assert "| matrix products alone |" in result.output


def test_the_products_alone_are_those_of_every_stepped_frame():
    import torch

    from motion_matching.stepper.model import Stepper
    calls = []
    module = Stepper(59, hidden=16)
    timed = bench_stepper_profile.products_alone(module, batch_size=4, frames=3, dtype=torch.float32)
    original_mm, original_addmm = torch.mm, torch.addmm
    try:
        torch.mm = lambda a, b: calls.append(("mm", tuple(a.shape), tuple(b.shape))) or original_mm(a, b)
        torch.addmm = lambda c, a, b: calls.append(("addmm", tuple(a.shape), tuple(b.shape))) or original_addmm(c, a, b)
        assert timed() > 0
    finally:
        torch.mm, torch.addmm = original_mm, original_addmm
    assert len(calls) == 2 * 9  # two stepped frames: three layers forward, two products each backward
    forward = [call for call in calls if call[0] == "addmm"][:3]
    assert forward == [("addmm", (4, 59), (59, 16)), ("addmm", (4, 16), (16, 16)), ("addmm", (4, 16), (16, 59))]
