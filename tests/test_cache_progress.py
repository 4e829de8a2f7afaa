"""The progress display of build-cache, train and demo: tqdm's style, rate since the first call (so resumed
rows do not count), a bar on a terminal and a plain line every few seconds elsewhere."""
import io

from motion_matching.cli.progress import PLAIN_EVERY, ProgressBar, format_duration


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_format_duration_is_hours_minutes_seconds():
    assert [format_duration(s) for s in (0, 59.6, 3725, -3)] == ["0:00:00", "0:01:00", "1:02:05", "0:00:00"]


def test_rate_and_time_left_count_only_rows_done_since_the_first_call():
    clock, stream = Clock(), io.StringIO()
    bar = ProgressBar(unit="queries", label="build-cache", stream=stream, clock=clock)
    bar(4_000, 10_000)   # a resumed build starts at row 4,000
    clock.now += PLAIN_EVERY
    bar(6_000, 10_000)
    assert stream.getvalue().splitlines()[-1] == \
        "build-cache:  60%|######    | 6000/10000 [00:05<00:10, 400.00 queries/s]"


def test_without_a_terminal_a_plain_line_comes_every_few_seconds_and_at_the_end():
    clock, stream = Clock(), io.StringIO()
    bar = ProgressBar(unit="it", stream=stream, clock=clock)
    for step in range(0, 101):
        bar(step, 100, f"loss {1 / (step + 1):.4f}")
        clock.now += 0.25  # 25 s in all
    lines = stream.getvalue().splitlines()
    assert "\r" not in stream.getvalue()
    assert len(lines) == 1 + int(25 / PLAIN_EVERY)  # the first call, then one per PLAIN_EVERY seconds
    assert lines[-1].startswith("100%|##########| 100/100 [00:25<00:00,")
    assert lines[-1].endswith(" 4.00 it/s, loss 0.0099]")


def test_on_a_terminal_the_bar_redraws_one_line_and_close_ends_it():
    stream = Terminal()
    bar = ProgressBar(unit="queries", stream=stream)
    assert bar.terminal
    for done in range(0, 1000, 100):
        bar(done, 1000)
    bar(1000, 1000)
    bar.close()
    text = stream.getvalue()
    assert "\r" in text and text.endswith("\n") and text.count("\n") == 1
    assert "1000/1000" in text


def test_quiet_bar_and_first_call_show_nothing_odd():
    stream = io.StringIO()
    ProgressBar(stream=stream, quiet=True)(5, 10)
    ProgressBar(stream=stream).close()
    assert stream.getvalue() == ""
    assert ProgressBar(stream=stream, clock=Clock()).line(0, 8) == "  0%|          | 0/8 [00:00<?, ? queries/s]"


def test_build_caches_final_rate_is_its_bars_rate_setup_left_out(tmp_path, monkeypatch):
    import types

    from motion_matching.cache import build as build_module
    from motion_matching.cli.cache import describe_build

    from cache_fixtures import build
    from conftest import write_small_toolkit_files

    features_path, _ = write_small_toolkit_files(tmp_path)
    out = tmp_path / "cache.h5"
    build(features_path, out, stop_after=1)  # resumed below: the rows found there count in neither
    clock = Clock()
    real_searcher = build_module.make_searcher

    def slow_setup(*arguments, **options):  # 10 s of setup, then 2 s per chunk searched
        clock.now += 10
        searcher = real_searcher(*arguments, **options)

        def nearest(*rows):
            clock.now += 2
            return searcher.nearest(*rows)
        return types.SimpleNamespace(nearest=nearest)
    monkeypatch.setattr(build_module, "make_searcher", slow_setup)
    monkeypatch.setattr(build_module, "time", types.SimpleNamespace(monotonic=clock))
    stream = io.StringIO()
    result = build(features_path, out, progress=ProgressBar(unit="queries", stream=stream, clock=clock))
    assert (result.rows_written, result.search_seconds, result.seconds) == (11_808, 4.0, 14.0)
    assert stream.getvalue().splitlines()[-1].endswith("20000/20000 [00:04<00:00, 2952.00 queries/s]")
    assert describe_build(result).endswith("; 11,808 searched in 4.0 s (2,952 queries/s), 14.0 s in all")


def test_a_given_eta_replaces_tqdms_which_assumes_every_unit_costs_the_same():
    clock, stream = Clock(), io.StringIO()
    bar = ProgressBar(unit="it", stream=stream, clock=clock)
    bar(0, 100, "loss 1.0000", eta=float("inf"))
    clock.now += 10
    bar(50, 100, "loss 0.5000", eta=200.0)  # tqdm's own estimate would be 00:10
    assert stream.getvalue().splitlines() == ["  0%|          | 0/100 [00:00<?, ? it/s, loss 1.0000]",
                                              " 50%|#####     | 50/100 [00:10<03:20,  5.00 it/s, loss 0.5000]"]
    terminal = Terminal()
    bar = ProgressBar(unit="it", stream=terminal)
    bar(50, 100, "loss 0.5000", eta=3725.0)
    bar.close()
    assert "<1:02:05," in terminal.getvalue()


def test_a_training_bar_shows_the_runs_own_eta():
    import types

    from motion_matching.cli.train import training_progress

    stream = io.StringIO()
    report = types.SimpleNamespace(step=10, iterations=40, loss=1.0, rolling_loss=1.0, lr=0.004, rate=2.0, eta=125.0)
    training_progress(ProgressBar(unit="it", stream=stream, clock=Clock()))(report)  # a training.run.Progress
    assert "<02:05," in stream.getvalue()
