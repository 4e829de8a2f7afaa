"""benchmarks/bench_step.py: its pairing of the steps as their commands run them, and a tiny whole run."""
import json
import pathlib
import sys

import pytest

pytest.importorskip("torch", reason="bench_step times torch training steps")

from click.testing import CliRunner  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).parent.parent / "benchmarks"))
import bench_step  # noqa: E402

from motion_matching.training import step  # noqa: E402


def timings(values):
    """Per-repeat (wall, cpu) pairs from wall milliseconds."""
    return [(value, value) for value in values]


def test_pairs_compare_the_toolkit_step_on_one_thread_with_the_fast_step_on_every_core(monkeypatch):
    monkeypatch.setattr(step, "available_cores", lambda: 2)
    settings = [(32, 1), (32, 2)]
    times = {(32, 1, "toolkit"): timings([6.0, 10.0, 9.0]), (32, 1, "fast"): timings([1.0, 1.0, 1.0]),
             (32, 2, "toolkit"): timings([1.0, 1.0, 1.0]), (32, 2, "fast"): timings([3.0, 4.0, 9.0])}
    (pair,) = bench_step.as_run_pairs(times, settings, repeats=3)
    # per repeat 6/3, 10/4, 9/9: the median of the ratios (2), not the ratio of the medians (9/4)
    assert pair["ratio_median"] == 2.0 and pair["ratio_min"] == 1.0 and pair["ratio_max"] == 2.5
    assert (pair["toolkit_ms"], pair["fast_ms"], pair["fast_threads"]) == (9.0, 4.0, 2)


def test_fast_over_floor_paired_is_the_median_of_each_repeats_own_ratio():
    # a repeat in which the machine was slower (8 against 4) does not pull the pairing as it pulls the medians
    paired = bench_step.paired_ratios([2.5, 8.0, 2.6], [2.0, 4.0, 2.0])
    assert paired == {"median": 1.3, "min": 1.25, "max": 2.0}
    with pytest.raises(ValueError):
        bench_step.paired_ratios([1.0, 2.0], [1.0])


def test_no_pair_without_both_thread_counts(monkeypatch):
    monkeypatch.setattr(step, "available_cores", lambda: 2)
    times = {(32, 1, name): timings([1.0]) for name in bench_step.ENTRIES}
    assert bench_step.as_run_pairs(times, [(32, 1)], repeats=1) == []


def test_a_tiny_run_prints_both_tables_and_writes_them(tmp_path, monkeypatch):
    monkeypatch.setattr(bench_step, "TARGET_SECONDS", 0.01)
    monkeypatch.setattr(bench_step, "POOL_QUERIES", 256)
    monkeypatch.setattr(step, "available_cores", lambda: 2)
    path = tmp_path / "step.json"
    result = CliRunner().invoke(bench_step.main, ["--frames", "600", "--batches", "16", "--threads", "1,2",
                                                  "--repeats", "2", "--backend", "balltree", "--json", str(path)])
    assert result.exit_code == 0, result.output
    assert "as the commands run them" in result.output
    written = json.loads(path.read_text())
    assert [(row["batch"], row["threads"]) for row in written["rows"]] == [(16, 1), (16, 2)]
    for row in written["rows"]:
        ratios = [fast / floor for fast, floor in zip(row["fast_runs_ms_wall"], row["floor_runs_ms_wall"])]
        assert row["fast_over_floor_paired_median_wall"] == pytest.approx(sorted(ratios)[0] / 2 + sorted(ratios)[1] / 2)
        assert row["fast_over_floor_paired_min_wall"] == min(ratios)
    assert "fast/floor paired" in result.output
    (pair,) = written["as_run"]
    assert pair["batch"] == 16 and pair["ratio_min"] <= pair["ratio_median"] <= pair["ratio_max"]
