"""The progress bar build-cache draws: rate since its first call (so resumed rows do not count) and ETA."""
import io

from motion_matching.cli.progress import ProgressBar, format_duration


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_format_duration_is_hours_minutes_seconds():
    assert [format_duration(s) for s in (0, 59.6, 3725, -3)] == ["0:00:00", "0:01:00", "1:02:05", "0:00:00"]


def test_rate_and_time_left_count_only_rows_done_since_the_first_call():
    clock, stream = Clock(), io.StringIO()
    bar = ProgressBar(unit="queries", stream=stream, width=10, clock=clock)
    bar(4_000, 10_000)   # a resumed build starts at row 4,000
    clock.now += 4.0
    bar(6_000, 10_000)
    assert stream.getvalue().split("\r")[-1] == \
        "[######....] 6,000/10,000 queries  60.0%  500 queries/s  ETA 0:00:08"
    bar.close()
    assert stream.getvalue().endswith("\n")


def test_first_call_has_no_rate_yet_and_close_without_drawing_writes_nothing():
    stream = io.StringIO()
    assert ProgressBar(stream=stream, width=4, clock=Clock()).line(0, 8) == \
        "[....] 0/8 queries   0.0%  0 queries/s  ETA --:--:--"
    ProgressBar(stream=stream).close()
    assert stream.getvalue() == ""
