"""benchmarks/bench_stepper_compiled.py: the recipe's seconds from the window lengths, and a tiny whole run."""
import json
import pathlib
import sys

import pytest

pytest.importorskip("torch", reason="bench_stepper_compiled times torch training steps")

from click.testing import CliRunner  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).parent.parent / "benchmarks"))
import bench_stepper_compiled  # noqa: E402

from motion_matching.data import generate  # noqa: E402
from motion_matching.stepper.config import StepperConfig  # noqa: E402


def test_the_recipes_seconds_follow_its_windows_between_the_measured_lengths():
    growing = StepperConfig(iterations=4, first_window=2, window_ramp=1.0)
    frames = [growing.window_at(step) for step in range(4)]
    assert frames[0] == 2 and len(set(frames)) == 4  # four lengths, between the two measured
    expected = sum(10 + 10 * (length - 2) / 18 for length in frames) / 1000  # 10 ms at 2 frames, 20 at 20
    assert bench_stepper_compiled.recipe_seconds(growing, {2: 10.0, 20: 20.0}) == pytest.approx(expected)
    assert bench_stepper_compiled.recipe_seconds(StepperConfig(iterations=3), {2: 10.0, 20: 20.0}) == 0.06


def test_a_tiny_run_times_both_modes_and_writes_its_table(tmp_path):
    import torch

    from motion_matching.training.compiled import compiler_ready
    if not compiler_ready(torch.device("cpu")):
        pytest.skip("no C++ compiler torch.compile can use on this machine: nothing to compare")
    generate.generate_files(tmp_path / "data", nframes=1200)
    out = tmp_path / "compiled.json"
    result = CliRunner().invoke(bench_stepper_compiled.main, [
        "--data", str(tmp_path / "data"), "--windows", "2,3", "--busy", "0", "--threads", "1", "--repeats", "2",
        "--steps", "1", "--json", str(out)])
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    windows = [row["window"] for row in report["rows"]]
    assert windows == [2, 3, "fast recipe (s)"]
    assert all(row["eager_ms"] > 0 and row["compiled_ms"] > 0 for row in report["rows"])
    assert "| 0 | 3 |" in result.output
