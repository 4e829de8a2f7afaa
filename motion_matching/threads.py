"""The default thread count of the fast step, the search and the cache build, and OpenMP's waiting.

Every core is fastest only on an idle machine: next to busy processes, OpenMP threads that wait at a
barrier for a core taken elsewhere make a step many times slower than one thread. So the default is
the cores this process may use (affinity and a cgroup CPU quota, not ``os.cpu_count()``) less those
other processes kept busy over a short sample of ``/proc/stat`` (Linux; elsewhere nothing is
subtracted), at least 1; niced processes count only for a niced process (others yield to it); the
cells search's pool of Python threads, which has no barrier, keeps every core (``Sample.choice``'s
``free_only``). ``--threads`` and ``OMP_NUM_THREADS`` stay the user's word, and ``prefer_short_spinning``
changes libgomp's waiting only where no ``OMP_*``/``GOMP_*`` variable says how.
"""
import dataclasses
import logging
import math
import os
import time
import typing

LOG = logging.getLogger(__name__)
SPIN_VARIABLES = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")
SHORT_SPIN = {"GOMP_SPINCOUNT": "10000"}
"""libgomp spins 300,000 times (milliseconds) before sleeping by default; spinning only briefly keeps an
idle machine's rate and stops idle threads from taking a core another process needs."""
SAMPLE_SECONDS = 0.25  # /proc/stat counts in 10 ms ticks: 25 per core in a sample
STAT_BUSY = (0, 2, 5, 6, 7)  # user system irq softirq steal; idle and iowait are not busy
STAT_NICE = 1  # niced processes' time: busy only for a niced process (the scheduler favours a normal one)
CGROUP_ROOT, PROC_CGROUP = "/sys/fs/cgroup", "/proc/self/cgroup"


def prefer_short_spinning(environ=os.environ):
    """Set ``SHORT_SPIN`` in ``environ`` unless the user set a variable of ``SPIN_VARIABLES``; returns
    what was set (a dict, empty when nothing). Takes effect only before an OpenMP runtime loads."""
    if any(name in environ for name in SPIN_VARIABLES):
        return {}
    environ.update(SHORT_SPIN)
    return dict(SHORT_SPIN)


def parse_cpu_max(text):
    """Cores (float) of a cgroup v2 ``cpu.max`` ("QUOTA PERIOD", "max PERIOD"); None when unlimited."""
    fields = text.split()
    if not fields or fields[0] == "max":
        return None
    period = float(fields[1]) if len(fields) > 1 else 100_000.0
    return float(fields[0]) / period


def parse_cfs(quota_text, period_text):
    """Cores (float) of a cgroup v1 ``cpu.cfs_quota_us`` and ``cpu.cfs_period_us``; None when unlimited."""
    quota, period = int(quota_text.strip()), int(period_text.strip())
    return None if quota <= 0 or period <= 0 else quota / period


def _cgroup_paths(proc_cgroup):
    """{controller: path} from ``/proc/self/cgroup`` text ("" is cgroup v2's unified hierarchy)."""
    paths = {}
    for line in proc_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            for controller in parts[1].split(","):
                paths[controller] = parts[2]
    return paths


def _read(path):
    with open(path) as file:
        return file.read()


def quota_cores(root=CGROUP_ROOT, proc_cgroup=PROC_CGROUP):
    """The CPU quota (float cores) of this process's cgroup, v2 or v1, or None when there is none."""
    try:
        paths = _cgroup_paths(_read(proc_cgroup))
    except OSError:
        return None
    candidates = []
    if "" in paths:
        candidates += [("v2", os.path.join(root, paths[""].lstrip("/"))), ("v2", root)]
    for folder in ("cpu", "cpu,cpuacct", "cpuacct,cpu"):
        own = paths.get("cpu", "/").lstrip("/")
        candidates += [("v1", os.path.join(root, folder, own)), ("v1", os.path.join(root, folder))]
    for kind, folder in candidates:
        try:
            if kind == "v2":
                return parse_cpu_max(_read(os.path.join(folder, "cpu.max")))
            return parse_cfs(_read(os.path.join(folder, "cpu.cfs_quota_us")),
                             _read(os.path.join(folder, "cpu.cfs_period_us")))
        except (OSError, ValueError):
            continue
    return None


def affinity():
    """The CPU numbers (sorted list of int) this process may run on; all of them where there is no affinity."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def available_cores(*, cpus=None, quota=None):
    """Cores (int, at least 1) this process may use: its ``cpus`` (default its affinity), fewer under a
    cgroup CPU ``quota`` (default this process's), rounded up (a quota of 1.5 lets 2 threads run)."""
    count = len(affinity() if cpus is None else cpus)
    quota = quota_cores() if quota is None else quota
    if quota:
        count = min(count, math.ceil(quota - 1e-9))
    return max(1, count)


@dataclasses.dataclass(frozen=True)
class CpuTimes:
    """A snapshot: busy seconds of ``cpus`` (None: unknown), this process's CPU seconds, the wall clock."""

    busy: float
    own: float
    wall: float


def niceness():
    """This process's niceness (int; 0 where it cannot be read)."""
    try:
        return os.getpriority(os.PRIO_PROCESS, 0)
    except (AttributeError, OSError):
        return 0


def parse_proc_stat(text, cpus, *, count_nice=True):
    """Busy seconds (float) of the CPUs numbered ``cpus`` in ``/proc/stat`` text, niced processes' time
    included when ``count_nice``; None if one is missing."""
    ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    lines = {fields[0]: fields[1:] for fields in (line.split() for line in text.splitlines()) if fields}
    busy = 0
    for cpu in cpus:
        values = lines.get(f"cpu{cpu}")
        if values is None or len(values) < 8:
            return None
        busy += sum(int(values[index]) for index in STAT_BUSY) + (int(values[STAT_NICE]) if count_nice else 0)
    return busy / ticks


def cpu_times(cpus, stat_path="/proc/stat", *, count_nice=None):
    """A ``CpuTimes`` snapshot now (``busy`` None where ``stat_path`` cannot be read). Niced processes' time
    counts as busy only when this process is niced too (``count_nice`` None): beside a process of positive
    niceness the scheduler gives a normal one nearly the whole core (weights 15 against 1,024 at nice 19)."""
    count_nice = niceness() > 0 if count_nice is None else count_nice
    try:
        busy = parse_proc_stat(_read(stat_path), cpus, count_nice=count_nice)
    except (OSError, ValueError):
        busy = None
    times = os.times()
    return CpuTimes(busy, times.user + times.system, time.monotonic())


def others_busy(before, after):
    """Cores (float, >= 0) that other processes kept busy between two ``CpuTimes``; None if unknown."""
    if before.busy is None or after.busy is None or after.wall <= before.wall:
        return None
    others = (after.busy - before.busy) - (after.own - before.own)
    return max(0.0, others / (after.wall - before.wall))


def choose_threads(cores, busy):
    """Threads (int, 1..``cores``) for ``cores`` usable cores of which ``busy`` (float or None) are taken:
    the free ones, a core counting as free when at most half of it is busy."""
    if busy is None:
        return cores
    return max(1, min(cores, math.floor(cores - busy + 0.5)))


@dataclasses.dataclass(frozen=True)
class ThreadChoice:
    """The thread count a run uses and why: ``source`` is "option" (``--threads`` or a fixed count),
    "OMP_NUM_THREADS", "checkpoint" (a resumed run's) or "measured"; ``cores`` usable, ``busy`` of them
    taken by other processes (None where unmeasured)."""

    threads: int
    source: str
    cores: int
    busy: typing.Optional[float] = None

    def note(self, doing):
        """One line saying that other processes made this run take fewer threads (``doing``: "training"),
        or None when they did not."""
        if self.source not in ("measured", "checkpoint") or self.busy is None:
            return None
        if choose_threads(self.cores, self.busy) >= self.cores:
            return None
        plural = "" if self.threads == 1 else "s"
        what = (f"continues on the {self.threads} thread{plural} it started with" if self.source == "checkpoint"
                else f"on {self.threads} thread{plural}")
        return (f"note: {self.busy:.1f} of {self.cores} cores busy with other processes at start: {doing} {what} "
                f"(--threads to choose)")


def omp_num_threads(environ=os.environ):
    """``OMP_NUM_THREADS``'s first level as an int >= 1, or None when unset or not a count."""
    try:
        value = int(environ.get("OMP_NUM_THREADS", "").split(",")[0])
    except ValueError:
        return None
    return value if value >= 1 else None


class Sample:
    """A measurement of other processes' load that runs while the caller sets up: ``Sample()`` starts it,
    ``choice(threads)`` ends it (waiting until ``seconds`` have passed) and returns the ``ThreadChoice``."""

    def __init__(self, *, seconds=SAMPLE_SECONDS, environ=os.environ):
        self.cpus, self.seconds, self.environ = affinity(), seconds, environ
        self.cores = available_cores(cpus=self.cpus)
        self.start = cpu_times(self.cpus)

    def choice(self, threads=None, *, free_only=True):
        """``threads`` when given, else ``OMP_NUM_THREADS``, else the free cores (``choose_threads``), or
        every core unless ``free_only`` (work shared out block by block, with no barrier to wait at, gets
        the larger share of busy cores with more threads); the load is measured either way."""
        if threads is not None:
            return ThreadChoice(int(threads), "option", self.cores)
        if omp_num_threads(self.environ) is not None:
            return ThreadChoice(omp_num_threads(self.environ), "OMP_NUM_THREADS", self.cores)
        if self.start.busy is None:
            return ThreadChoice(self.cores, "measured", self.cores)
        time.sleep(max(0.0, self.start.wall + self.seconds - time.monotonic()))
        busy = others_busy(self.start, cpu_times(self.cpus))
        return ThreadChoice(choose_threads(self.cores, busy) if free_only else self.cores, "measured", self.cores,
                            busy)


def logged(choice, doing):
    """``choice`` (a ``ThreadChoice``), after logging its note for ``doing`` (e.g. "searching") if it has one."""
    note = choice.note(doing)
    if note:
        LOG.warning(note)
    return choice


def default_threads(threads=None, *, doing, seconds=SAMPLE_SECONDS):
    """The logged ``ThreadChoice`` for ``doing`` that starts now, after a sample of ``seconds``."""
    return logged(Sample(seconds=seconds).choice(threads), doing)


SLOWER = 0.5  # a window under half the run's best rate is worth a line
IDLE_BUSY = 0.5  # at most half a core busy elsewhere (a free core to choose_threads): a slowdown is the machine's
WINDOW_SECONDS = 5.0


def slowdown_note(*, rate, best, busy, cores, threads, doing="training"):
    """One line (str) when ``rate`` (iterations/s over the last window) fell under ``SLOWER`` x the run's
    ``best``, with the ``busy`` cores (float or None) of the ``cores`` seen meanwhile (at most ``IDLE_BUSY``:
    the machine itself slowed); else None."""
    if best is None or rate >= SLOWER * best:
        return None
    if busy is not None and busy <= IDLE_BUSY:  # no thread count would help: say so rather than hint --threads
        return (f"note: {doing} slowed to {rate:.1f} it/s from {best:.1f} it/s while other processes kept at most "
                "half a core busy: the machine itself is slower for now (a virtual machine's host, or its clock)")
    load = "" if busy is None else f", {busy:.1f} of {cores} cores busy with other processes"
    plural = "" if threads == 1 else "s"
    return (f"note: {doing} slowed to {rate:.1f} it/s from {best:.1f} it/s{load}; it keeps its {threads} "
            f"thread{plural} (--threads to choose)")


class RateWatch:
    """Watches a run's rate in windows of ``WINDOW_SECONDS`` and logs ``slowdown_note`` once per run."""

    def __init__(self, choice, *, doing="training"):
        self.choice, self.doing, self.cpus = choice, doing, affinity()
        self.mark, self.best, self.said = None, None, False

    def new_pace(self):
        """Forget the rates seen so far: the run's iterations cost another amount from here on."""
        self.mark, self.best = None, None

    def observe(self, step):
        """Call with the iterations done so far; cheap between windows (one clock read)."""
        if self.said:
            return
        if self.mark is not None and time.monotonic() - self.mark[1].wall < WINDOW_SECONDS:
            return
        now = cpu_times(self.cpus)
        if self.mark is not None:
            first, before = self.mark
            rate = (step - first) / (now.wall - before.wall)
            note = slowdown_note(rate=rate, best=self.best, busy=others_busy(before, now),
                                 cores=self.choice.cores, threads=self.choice.threads, doing=self.doing)
            if note:
                LOG.warning(note)
                self.said = True
            self.best = rate if self.best is None else max(self.best, rate)
        self.mark = (step, now)
