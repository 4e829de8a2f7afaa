"""benchmarks/bench_step_modes.py: how it tells the machine's modes apart, and a tiny whole run."""
import json
import pathlib
import sys

import pytest

pytest.importorskip("torch", reason="bench_step_modes times torch training steps")

from click.testing import CliRunner  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).parent.parent / "benchmarks"))
import bench_step  # noqa: E402
import bench_step_modes  # noqa: E402


def row(ratio, after, again):
    return {"floor_ms": 1.0, "step_ms": ratio, "ratio": ratio, "adamw_after_backward_ms": after,
            "adamw_again_ms": again, "stream_gb_s": 50.0}


def test_a_sample_is_slow_where_the_first_adamw_takes_more_than_twice_the_second():
    rows = [row(1.25, 0.6, 0.5), row(1.5, 1.9, 0.6), row(1.3, 0.7, 0.5), row(1.6, 2.0, 0.5), row(1.55, 1.8, 0.55)]
    modes = bench_step_modes.mode_medians(rows)
    assert modes["quiet"]["samples"] == 2 and modes["quiet"]["ratio"] == pytest.approx(1.275)
    assert modes["slow"]["samples"] == 3 and modes["slow"]["ratio"] == 1.55
    assert modes["slow"]["adamw_after_backward_ms"] == 1.9
    assert "slow" not in bench_step_modes.mode_medians(rows[:1])


def test_a_tiny_run_prints_its_samples_and_writes_them(tmp_path, monkeypatch):
    monkeypatch.setattr(bench_step, "POOL_QUERIES", 256)
    path = tmp_path / "modes.json"
    result = CliRunner().invoke(bench_step_modes.main, ["--seconds", "0", "--batch", "16", "--calls", "2",
                                                        "--frames", "600", "--stream-mb", "1", "--backend",
                                                        "balltree", "--json", str(path)])
    assert result.exit_code == 0, result.output
    assert "medians by mode" in result.output
    written = json.loads(path.read_text())
    (sample,) = written["samples"]
    assert sample["ratio"] == pytest.approx(sample["step_ms"] / sample["floor_ms"])
    assert sum(mode["samples"] for mode in written["modes"].values()) == 1
