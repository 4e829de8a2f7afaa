"""The machine's cores and the busy note the demo prints before timing itself."""
import os

from motion_matching import machine


def test_available_cores_are_those_this_process_may_use():
    expected = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert machine.available_cores() == expected >= 1


def test_busy_note_when_the_load_reaches_half_the_cores():
    assert machine.busy_note(load=0.4, cores=2) is None
    assert machine.busy_note(load=0.9, cores=1) is None
    assert machine.busy_note(load=3.0, cores=8) is None
    assert machine.busy_note(load=1.0, cores=2) == ("note: other processes are using the cores (load average 1.0, "
                                                    "2 cores for this process): times will be longer than on an "
                                                    "idle machine; training takes only the cores free at its "
                                                    "start (--threads to choose)")
    assert "(load average 4.2, 1 core for this process)" in machine.busy_note(load=4.2, cores=1)


def test_no_note_where_the_load_average_is_unknown(monkeypatch):
    monkeypatch.delattr(os, "getloadavg", raising=False)
    assert machine.load_average() is None
    assert machine.busy_note(cores=2) is None
