"""What the machine offers this process right now: its cores, whether other processes are using them, and
its CPU's vendor."""
import os

from motion_matching import threads


def available_cores():
    """CPU cores this process may run on (int): its affinity where the system has one, else every core,
    fewer under a cgroup CPU quota (``threads.available_cores``)."""
    return threads.available_cores()


def cpu_vendor(cpuinfo="/proc/cpuinfo"):
    """The CPU's vendor string as the kernel reports it ("GenuineIntel", "AuthenticAMD", ...), or None where
    ``cpuinfo`` cannot be read (not Linux)."""
    try:
        with open(cpuinfo, encoding="ascii", errors="replace") as lines:
            for line in lines:
                name, _, value = line.partition(":")
                if name.strip() == "vendor_id":
                    return value.strip()
    except OSError:
        return None
    return None


def load_average():
    """The 1-minute load average (float), or None where the system has none (Windows)."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def busy_note(*, load=None, cores=None):
    """One line (str) saying that other processes are using the cores, or None on a machine at rest.

    Busy means a 1-minute load average (``load``, default the system's) of at least half the cores this
    process may use (``cores``, default ``available_cores()``) and at least 1: timed work will then run
    longer than on an idle machine. None also where the load average is unknown.
    """
    load = load_average() if load is None else load
    cores = available_cores() if cores is None else cores
    if load is None or load < max(1.0, cores / 2):
        return None
    return (f"note: other processes are using the cores (load average {load:.1f}, {cores} core"
            f"{'' if cores == 1 else 's'} for this process): times will be longer than on an idle machine; "
            "training takes only the cores free at its start (--threads to choose)")
