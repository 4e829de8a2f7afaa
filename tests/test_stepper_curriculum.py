"""Growing windows (--first-window, --window-ramp): the frames each iteration trains on, the settings refused,
resume, and the work the ETA counts."""
import pytest
from click.testing import CliRunner

from motion_matching.cli import main
from motion_matching.stepper.config import StepperConfig
from motion_matching.training.config import numeric_differences

GROWING = {"first_window": 2, "window_ramp": 0.5, "iterations": 100}


def test_windows_grow_linearly_from_the_first_to_the_full_window_over_the_ramp():
    config = StepperConfig(**GROWING)
    frames = [config.window_at(step) for step in range(config.iterations)]
    assert frames[0] == 2 and frames[25] == 11 and frames[49] == 20 and set(frames[50:]) == {20}
    assert all(later - earlier in (0, 1) for earlier, later in zip(frames, frames[1:]))
    assert {StepperConfig().window_at(step) for step in range(0, 500_000, 997)} == {20}  # the toolkit's: none


@pytest.mark.parametrize("settings, message", [
    ({"first_window": 2}, "first_window needs window_ramp above 0"),
    ({"window_ramp": 0.5}, "window_ramp needs first_window"),
    ({"first_window": 1, "window_ramp": 0.5}, "first_window must be between 2 and window (20), not 1"),
    ({"first_window": 21, "window_ramp": 0.5}, "first_window must be between 2 and window (20), not 21"),
    ({"first_window": 2, "window_ramp": 1.5}, "window_ramp must be between 0 and 1, not 1.5"),
    ({"first_window": 2, "window_ramp": 0.5, "exact_toolkit": True}, "leave out --first-window and --window-ramp"),
])
def test_settings_that_cannot_grow_windows_are_refused(settings, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        StepperConfig(**settings)


def test_a_resumed_run_with_growing_windows_must_keep_its_iterations():
    growing = StepperConfig(**GROWING)
    assert numeric_differences(growing, StepperConfig(**{**GROWING, "iterations": 200})) == ["iterations"]
    # the toolkit's schedule without growing windows: more iterations continue the run
    assert numeric_differences(StepperConfig(iterations=100), StepperConfig(iterations=200)) == []


def _trained_frames(tmp_path, monkeypatch, **settings):
    """The windows (B, W, nfeatures) each iteration of a small run computed its losses on."""
    torch = pytest.importorskip("torch", reason="training needs torch")
    from stepper_helpers import small_run

    from motion_matching.stepper import train as stepper_train
    seen, losses = [], stepper_train.stepper_losses

    def recording(module, Xgnd, Zgnd, *rest):
        seen.append(Xgnd.clone())
        return losses(module, Xgnd, Zgnd, *rest)
    with monkeypatch.context() as patch:
        patch.setattr(stepper_train, "stepper_losses", recording)
        small_run(tmp_path, **settings)
    return torch, seen


def test_each_iteration_trains_on_the_first_frames_of_the_windows_the_toolkit_draws(tmp_path, monkeypatch):
    settings = {"iterations": 12, "first_window": 3, "window_ramp": 0.5}
    torch, growing = _trained_frames(tmp_path / "growing", monkeypatch, **settings)
    _, full = _trained_frames(tmp_path / "full", monkeypatch, iterations=12)
    config = StepperConfig(**settings)
    assert [windows.shape[1] for windows in growing] == [config.window_at(step) for step in range(12)]
    assert growing[0].shape[1] == 3 and growing[-1].shape[1] == 20
    # the same draws: iteration 0 of both runs starts from the same frames (the models differ after it)
    assert torch.equal(growing[0], full[0][:, :3])


def test_a_growing_run_interrupted_and_rerun_is_the_straight_runs_bytes(tmp_path, monkeypatch):
    pytest.importorskip("torch", reason="training needs torch")
    from stepper_helpers import FRAMES

    from motion_matching.cli import train as train_cli
    from motion_matching.data import generate
    generate.generate_files(tmp_path, nframes=FRAMES)
    monkeypatch.chdir(tmp_path)
    line = ["train-stepper", "--hidden", "32", "--threads", "1", "--iterations", "30", "--first-window", "2",
            "--window-ramp", "0.6"]

    def interrupt(report):
        if report.step == 10:
            raise KeyboardInterrupt
    with monkeypatch.context() as patch:
        patch.setattr(train_cli, "training_progress", lambda bar: interrupt)
        stopped = CliRunner().invoke(main, [*line, "--out", "run"])
    assert stopped.exit_code == 130, stopped.output
    finished = CliRunner().invoke(main, [*line, "--out", "run", "--quiet"])
    straight = CliRunner().invoke(main, [*line, "--out", "straight", "--quiet"])
    assert finished.exit_code == straight.exit_code == 0, finished.output + straight.output
    assert (tmp_path / "run" / "stepper.bin").read_bytes() == (tmp_path / "straight" / "stepper.bin").read_bytes()
    other = CliRunner().invoke(main, [*line[:6], "40", *line[7:], "--out", "run", "--quiet"])
    assert other.exit_code != 0 and "iterations" in other.output


def test_the_work_of_growing_windows_counts_their_stepped_frames(tmp_path):
    pytest.importorskip("torch", reason="training needs torch")
    from stepper_helpers import FRAMES

    from motion_matching.data import generate
    from motion_matching.stepper import train as stepper_train
    from motion_matching.stepper.inputs import load_inputs
    files = generate.generate_files(tmp_path, nframes=FRAMES)
    inputs = load_inputs(files["database"], files["features"], files["latent"], window=20)

    def run(**settings):
        config = StepperConfig(hidden=16, threads=1, **settings)
        return config, stepper_train._Run(config, inputs, out_dir=str(tmp_path), progress=None, tensorboard=None)
    config, growing = run(**GROWING)
    stepped = sum(config.window_at(step) - 1 for step in range(100))
    assert growing.work(100) == pytest.approx(stepped / 19) and growing.work(0) == 0
    assert growing.work(50) == pytest.approx(sum(config.window_at(step) - 1 for step in range(50)) / 19)
    assert growing.work(100) - growing.work(50) == pytest.approx(50)  # full windows after the ramp
    _, plain = run(iterations=100)
    assert [plain.work(step) for step in (0, 37, 100)] == [0.0, 37.0, 100.0]


def test_the_slowdown_watch_starts_once_the_windows_are_whole(tmp_path, monkeypatch):
    """A short window's step time is not in proportion to its frames, so rates during the ramp are not compared."""
    pytest.importorskip("torch", reason="training needs torch")
    from stepper_helpers import small_run

    from motion_matching import threads
    observed = []
    monkeypatch.setattr(threads.RateWatch, "observe", lambda self, step: observed.append(step))
    config = StepperConfig(**GROWING)
    first_whole = next(step for step in range(config.iterations) if config.window_at(step) == config.window)
    small_run(tmp_path, hidden=16, **GROWING)
    assert observed and min(observed) >= first_whole and observed == sorted(observed)
    assert max(observed) == config.iterations
    observed.clear()
    small_run(tmp_path / "plain", hidden=16, iterations=30)
    assert observed == [10, 20, 30]


def test_the_fast_recipe_grows_its_windows_and_retrain_trains_it():
    from motion_matching.pipeline.settings import RetrainSettings
    from motion_matching.stepper.config import recipe_config
    fast = recipe_config("fast")
    assert (fast.first_window, fast.window_ramp, fast.window) == (2, 0.85, 20)
    assert recipe_config("small").window_ramp == 0.75  # as measured on LaFAN1
    assert fast.window_at(0) == 2 and fast.window_at(fast.iterations - 1) == 20
    toolkit = recipe_config("toolkit")
    assert fast.batch_size * fast.iterations >= toolkit.batch_size * toolkit.iterations
    assert RetrainSettings(recipe="fast").config("stepper") == fast
    preview = RetrainSettings(recipe="preview")
    assert preview.config("stepper") == recipe_config("preview") and preview.note("stepper") is None
    assert preview.config("stepper").first_window is None
