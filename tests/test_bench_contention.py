"""benchmarks/bench_contention.py: the requirement it checks, its table, and a tiny whole run."""
import json
import os
import pathlib
import sys
import time

import pytest

pytest.importorskip("torch", reason="bench_contention times torch training")

from click.testing import CliRunner  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).parent.parent / "benchmarks"))
import bench_contention  # noqa: E402


def runs(*rates, threads=1):
    return [{"rate": rate, "threads": threads} for rate in rates]


def test_the_default_is_compared_with_the_better_fixed_count_and_idle_needs_more():
    results = {("fast", 0, "default"): runs(90.0, 100.0, 95.0, threads=2), ("fast", 0, "threads_1"): runs(60.0),
               ("fast", 0, "threads_2"): runs(100.0, 99.0, 101.0), ("fast", 2, "default"): runs(40.0),
               ("fast", 2, "threads_1"): runs(45.0), ("fast", 2, "threads_2"): runs(3.0, threads=2)}
    idle, busy = bench_contention.summary(results, workloads=["fast"], loads=[0, 2], cores=2)
    assert (idle["default"], idle["threads_2"], idle["default_chose"]) == (95.0, 100.0, [2])
    assert (idle["ratio"], idle["required"], idle["met"]) == (0.95, 0.95, True)
    assert busy["ratio"] == pytest.approx(40 / 45) and (busy["required"], busy["met"]) == (0.85, True)
    results[("fast", 2, "default")] = runs(38.0)
    assert bench_contention.summary(results, workloads=["fast"], loads=[2], cores=2)[0]["met"] is False
    table = bench_contention.table([idle, busy], 2)
    assert "| fast (it/s) | 0 | 95.0 (2) | 60.0 | 100.0 | 0.95 | 0.95 | yes |  |" in table.splitlines()


def test_a_tiny_run_times_every_policy_beside_busy_processes_and_kills_them(tmp_path):
    path = tmp_path / "contention.json"
    result = CliRunner().invoke(bench_contention.main, ["--quick", "--loads", "1", "--workloads",
                                                        "toolkit,build-cache", "--json", str(path)])
    assert result.exit_code == 0, result.output
    written = json.loads(path.read_text())
    assert [(row["workload"], row["busy"]) for row in written["rows"]] == [("toolkit", 1), ("build-cache", 1)]
    cores = written["cores"]
    for row in written["rows"]:
        assert row["default"] > 0 and row["threads_1"] > 0 and row[f"threads_{cores}"] > 0
        assert all(1 <= count <= cores for count in row["default_chose"])
        assert f"| {row['workload']} " in result.output
    assert written["rows"][0]["threads_1_chose"] == [1]  # the fixed count is what the run used
    assert len(written["busy_pids"]) == 1
    for pid in written["busy_pids"]:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_niced_busy_loops_run_at_that_niceness_and_are_killed():
    with bench_contention.BusyProcesses(1, nice=19) as loops:
        pid = loops.pids[0]
        deadline = time.monotonic() + 30
        while os.getpriority(os.PRIO_PROCESS, pid) != 19 and time.monotonic() < deadline:
            os.sched_yield()  # until `nice` has set it and exec'd the loop
        assert os.getpriority(os.PRIO_PROCESS, pid) == 19
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_a_run_past_its_time_limit_counts_as_its_work_over_that_time(tmp_path):
    spec = {"workload": "build-cache", "key": "threads_1", "threads": 1, "env": {}, "queries": 1000,
            "features": str(tmp_path / "never-read.bin"), "out": str(tmp_path / "cache.h5")}
    result = bench_contention.run_child(spec, timeout=0.01)  # killed before the interpreter has started
    assert result == {"rate": 100_000.0, "seconds": 0.01, "threads": 1, "timed_out": True}
    rows = bench_contention.summary({("build-cache", 1, key): [result] for key in ("default", "threads_1")},
                                    workloads=["build-cache"], loads=[1], cores=1)
    assert "| build-cache (queries/s) | 1 | <= 100,000.0 (1) | <= 100,000.0 |" in bench_contention.table(rows, 1)
