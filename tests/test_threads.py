"""The default thread policy: cores from affinity and cgroup quotas, other processes' load, the choice, the
notes, and OpenMP's waiting left to the user wherever they set it."""
import os
import subprocess
import sys

import pytest

from motion_matching import threads
from motion_matching.threads import CpuTimes, ThreadChoice


def test_cgroup_v2_cpu_max_gives_cores_or_none_when_unlimited():
    assert threads.parse_cpu_max("150000 100000\n") == 1.5
    assert threads.parse_cpu_max("50000") == 0.5  # the kernel's default period
    assert threads.parse_cpu_max("max 100000\n") is None


def test_cgroup_v1_quota_and_period_give_cores_or_none_when_unlimited():
    assert threads.parse_cfs("200000\n", "100000\n") == 2.0
    assert threads.parse_cfs("-1\n", "100000\n") is None


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.mark.parametrize("proc_cgroup, files, cores", [
    ("0::/ci/job\n", {"ci/job/cpu.max": "250000 100000\n"}, 2.5),
    ("0::/ci/job\n", {"cpu.max": "100000 100000\n"}, 1.0),  # the namespace's root, as Docker shows it
    ("0::/\n", {"cpu.max": "max 100000\n"}, None),
    ("4:cpu,cpuacct:/docker/abc\n", {"cpu,cpuacct/docker/abc/cpu.cfs_quota_us": "150000\n",
                                     "cpu,cpuacct/docker/abc/cpu.cfs_period_us": "100000\n"}, 1.5),
    ("1:cpu:/\n0::/\n", {"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, None),
    ("1:cpu:/\n", {}, None),
])
def test_quota_is_read_from_the_process_cgroup(tmp_path, proc_cgroup, files, cores):
    for name, text in files.items():
        write(tmp_path / "fs" / name, text)
    assert threads.quota_cores(root=tmp_path / "fs", proc_cgroup=write(tmp_path / "cgroup", proc_cgroup)) == cores


def test_available_cores_are_the_affinity_capped_by_the_quota_rounded_up():
    assert threads.available_cores(cpus=[0, 1, 2, 3], quota=1.5) == 2
    assert threads.available_cores(cpus=[0, 1, 2, 3], quota=8.0) == 4
    assert threads.available_cores(cpus=[0, 1, 2, 3], quota=0.2) == 1
    assert 1 <= threads.available_cores() <= len(threads.affinity())


def test_proc_stat_busy_seconds_count_only_the_given_cpus_and_not_idle_time():
    ticks = os.sysconf("SC_CLK_TCK")
    text = ("cpu  30 1 10 500 9 1 1 2 0 0\ncpu0 10 1 4 200 5 1 0 1 0 0\n"
            "cpu1 20 0 6 300 4 0 1 1 0 0\nintr 1234\n")
    assert threads.parse_proc_stat(text, [0]) == pytest.approx(17 / ticks)
    assert threads.parse_proc_stat(text, [0, 1]) == pytest.approx(45 / ticks)
    assert threads.parse_proc_stat(text, [2]) is None
    assert threads.parse_proc_stat(text, [0, 1], count_nice=False) == pytest.approx(44 / ticks)


def test_niced_processes_count_as_busy_only_for_a_niced_process(tmp_path, monkeypatch):
    ticks = os.sysconf("SC_CLK_TCK")
    stat = tmp_path / "stat"
    stat.write_text("cpu0 10 90 4 200 5 1 0 1 0 0\n")  # 90 ticks of niced work
    monkeypatch.setattr(threads.os, "getpriority", lambda which, who: 0)
    assert threads.cpu_times([0], stat_path=str(stat)).busy == pytest.approx(16 / ticks)
    monkeypatch.setattr(threads.os, "getpriority", lambda which, who: 10)
    assert threads.cpu_times([0], stat_path=str(stat)).busy == pytest.approx(106 / ticks)
    assert threads.niceness() == 10


def test_others_busy_subtracts_this_process_and_never_goes_negative():
    before = CpuTimes(busy=10.0, own=1.0, wall=100.0)
    assert threads.others_busy(before, CpuTimes(busy=12.0, own=1.5, wall=101.0)) == pytest.approx(1.5)
    assert threads.others_busy(before, CpuTimes(busy=10.5, own=1.9, wall=101.0)) == 0.0
    assert threads.others_busy(before, CpuTimes(busy=None, own=1.0, wall=101.0)) is None


@pytest.mark.parametrize("cores, busy, chosen", [(2, 0.0, 2), (2, 0.4, 2), (2, 0.6, 1), (2, 1.0, 1), (2, 2.0, 1),
                                                 (2, 3.5, 1), (8, 2.2, 6), (4, None, 4), (1, 0.0, 1)])
def test_the_choice_is_the_free_cores_at_least_one(cores, busy, chosen):
    assert threads.choose_threads(cores, busy) == chosen


def test_the_note_names_the_load_and_the_choice_and_only_when_cores_were_busy():
    assert ThreadChoice(1, "measured", 2, 1.96).note("training") == (
        "note: 2.0 of 2 cores busy with other processes at start: training on 1 thread (--threads to choose)")
    assert ThreadChoice(2, "checkpoint", 2, 1.2).note("training") == (
        "note: 1.2 of 2 cores busy with other processes at start: training continues on the 2 threads it "
        "started with (--threads to choose)")
    assert ThreadChoice(2, "measured", 2, 0.3).note("searching") is None
    assert ThreadChoice(2, "option", 2).note("training") is None
    assert ThreadChoice(2, "measured", 2, None).note("training") is None


def test_a_given_count_and_omp_num_threads_stay_the_users_word():
    sample = threads.Sample(seconds=0.0, environ={"OMP_NUM_THREADS": "3"})
    assert sample.choice(5) == ThreadChoice(5, "option", sample.cores)
    assert sample.choice() == ThreadChoice(3, "OMP_NUM_THREADS", sample.cores)
    assert threads.omp_num_threads({"OMP_NUM_THREADS": "4,2"}) == 4
    assert threads.omp_num_threads({"OMP_NUM_THREADS": "many"}) is None
    assert threads.omp_num_threads({}) is None


@pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="measuring other processes' load needs /proc/stat")
def test_busy_processes_beside_a_sample_make_it_choose_one_thread():
    cores = threads.available_cores()
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(cores)]
    try:
        choice = threads.Sample(seconds=0.5, environ={}).choice()
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()
    assert choice.source == "measured" and choice.threads == 1
    assert choice.busy > cores - 0.5
    assert threads.Sample(seconds=0.0, environ={}).choice(free_only=False).threads == cores  # a pool keeps them


def test_short_spinning_is_set_only_where_the_user_said_nothing():
    environ = {"PATH": "/bin"}
    assert threads.prefer_short_spinning(environ) == threads.SHORT_SPIN
    assert environ == {"PATH": "/bin", **threads.SHORT_SPIN}
    for given in ({"OMP_WAIT_POLICY": "ACTIVE"}, {"GOMP_SPINCOUNT": "infinite"}):
        environ = dict(given)
        assert threads.prefer_short_spinning(environ) == {} and environ == given


def spin_setting(**environ):
    """GOMP_SPINCOUNT as a fresh interpreter sees it after importing the package, and whether torch is loaded."""
    env = {name: value for name, value in os.environ.items() if name not in threads.SPIN_VARIABLES}
    code = "import os, sys, motion_matching; print(os.environ.get('GOMP_SPINCOUNT'), 'torch' in sys.modules)"
    return subprocess.run([sys.executable, "-c", code], env={**env, **environ}, capture_output=True, text=True,
                          check=True).stdout.split()


def test_importing_the_package_sets_the_spin_count_before_torch_loads_unless_the_user_set_one():
    assert spin_setting() == [threads.SHORT_SPIN["GOMP_SPINCOUNT"], "False"]
    assert spin_setting(GOMP_SPINCOUNT="777") == ["777", "False"]
    assert spin_setting(OMP_WAIT_POLICY="ACTIVE") == ["None", "False"]


def test_a_slowdown_is_said_once_it_falls_under_half_the_best_rate():
    assert threads.slowdown_note(rate=3.1, best=45.2, busy=1.8, cores=2, threads=2) == (
        "note: training slowed to 3.1 it/s from 45.2 it/s, 1.8 of 2 cores busy with other processes; it keeps "
        "its 2 threads (--threads to choose)")
    assert threads.slowdown_note(rate=30.0, best=45.2, busy=1.8, cores=2, threads=2) is None
    assert threads.slowdown_note(rate=3.1, best=None, busy=1.8, cores=2, threads=2) is None
    assert threads.slowdown_note(rate=1.0, best=4.0, busy=None, cores=2, threads=1) == (
        "note: training slowed to 1.0 it/s from 4.0 it/s; it keeps its 1 thread (--threads to choose)")
    # nothing else busy (a virtual machine's host took the cores): no --threads hint, which could not help
    for busy in (0.0, 0.5):
        assert threads.slowdown_note(rate=57.7, best=118.0, busy=busy, cores=2, threads=2) == (
            "note: training slowed to 57.7 it/s from 118.0 it/s while other processes kept at most half a core busy: "
            "the machine itself is slower for now (a virtual machine's host, or its clock)")
    assert "--threads" in threads.slowdown_note(rate=57.7, best=118.0, busy=0.6, cores=2, threads=2)


def test_the_rate_watch_says_a_slowdown_once_with_the_load_of_its_window(monkeypatch, caplog):
    snapshots = iter([CpuTimes(0.0, 0.0, 0.0), CpuTimes(1.0, 1.0, 1.0), CpuTimes(2.0, 2.0, 2.0),
                      CpuTimes(4.0, 2.5, 3.0), CpuTimes(6.0, 3.0, 4.0)])
    monkeypatch.setattr(threads, "cpu_times", lambda cpus: next(snapshots))
    monkeypatch.setattr(threads, "WINDOW_SECONDS", 0.0)
    caplog.set_level("WARNING", logger="motion_matching.threads")
    watch = threads.RateWatch(ThreadChoice(2, "measured", 2, 0.0))
    for step in (0, 100, 200, 210, 215):  # 100 it/s twice, then 10 and 5 it/s
        watch.observe(step)
    assert [record.getMessage() for record in caplog.records] == [
        "note: training slowed to 10.0 it/s from 100.0 it/s, 1.5 of 2 cores busy with other processes; it keeps "
        "its 2 threads (--threads to choose)"]
