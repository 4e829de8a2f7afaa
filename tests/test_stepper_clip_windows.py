"""--clip-windows: the stepper draws only windows inside one clip, each clip's last one included; the toolkit's
draw (windows straddling two clips, never the last frame) stays the default and --exact-toolkit's."""
import dataclasses

import numpy as np
import pytest
from click.testing import CliRunner

from motion_matching.cli import main
from motion_matching.stepper.config import StepperConfig, recipe_config
from motion_matching.stepper.inputs import clip_window_starts
from motion_matching.training.config import numeric_differences

RANGES = (np.array([0, 30, 55]), np.array([30, 55, 100]))  # clips of 30, 25 and 45 frames


def test_clip_window_starts_are_every_start_whose_window_ends_inside_its_clip():
    starts = clip_window_starts(RANGES, 20)
    assert starts.tolist() == [*range(0, 11), *range(30, 36), *range(55, 81)]
    assert clip_window_starts(RANGES, 31).tolist() == list(range(55, 70))  # the two short clips have none
    assert clip_window_starts(RANGES, 46).size == 0


def test_the_setting_is_off_in_the_toolkit_fast_and_preview_recipes_refused_with_exact_toolkit_and_kept():
    assert not any(recipe_config(name).clip_windows for name in ("toolkit", "fast", "preview"))
    with pytest.raises(ValueError, match="--exact-toolkit draws the script's windows: leave out --clip-windows"):
        StepperConfig(exact_toolkit=True, clip_windows=True)
    assert numeric_differences(StepperConfig(), StepperConfig(clip_windows=True)) == ["clip_windows"]


def _batches(tmp_path, **settings):
    torch = pytest.importorskip("torch", reason="the batches are torch tensors")
    from stepper_helpers import FRAMES

    from motion_matching.data import generate
    from motion_matching.stepper.batches import WindowBatches, clip_starts
    from motion_matching.stepper.inputs import load_inputs
    files = generate.generate_files(tmp_path, nframes=FRAMES)
    inputs = load_inputs(files["database"], files["features"], files["latent"], window=20)
    config = StepperConfig(**settings)
    starts = clip_starts(inputs, config) if config.clip_windows else None
    return torch, inputs, WindowBatches(inputs, batch_size=4096, window=20, starts=starts, window_at=config.window_at)


def test_clip_windows_draw_inside_the_clips_up_to_each_clips_last_frame(tmp_path):
    torch, inputs, batches = _batches(tmp_path, clip_windows=True)
    starts, stops = (np.asarray(bound) for bound in inputs.ranges)
    assert len(starts) > 1  # the synthetic database has several clips, so the toolkit's windows straddle some
    torch.manual_seed(0)
    drawn = torch.cat([batches.indices() for _ in range(8)]).numpy()
    clip = np.searchsorted(starts, drawn[:, 0], side="right") - 1
    assert (drawn[:, -1] < stops[clip]).all()  # no window straddles two clips
    allowed = clip_window_starts(inputs.ranges, 20)
    assert set(drawn[:, 0].tolist()) == set(allowed.tolist())  # 32,768 draws of a few hundred starts reach them all
    assert inputs.nframes - 1 in drawn  # the last frame, which the toolkit's draw never reaches

    toolkit_batches = _batches(tmp_path / "toolkit")[2]
    torch.manual_seed(0)
    toolkit = torch.cat([toolkit_batches.indices() for _ in range(8)]).numpy()
    assert inputs.nframes - 1 not in toolkit
    clip = np.searchsorted(starts, toolkit[:, 0], side="right") - 1
    assert (toolkit[:, -1] >= stops[clip]).any()


def test_growing_clip_windows_draw_windows_of_each_iterations_length_up_to_each_clips_last_frame(tmp_path):
    settings = {"clip_windows": True, "first_window": 2, "window_ramp": 0.5, "iterations": 10}
    torch, inputs, batches = _batches(tmp_path, **settings)
    config = StepperConfig(**settings)
    stops = set(np.asarray(inputs.ranges[1]).tolist())
    torch.manual_seed(0)
    for step in range(config.iterations):
        X, Z = batches.next()
        assert X.shape[1] == Z.shape[1] == config.window_at(step)
    batches.seek(0)
    drawn = torch.cat([batches.indices() for _ in range(8)])  # iteration 0's length, 32,768 draws
    assert drawn.shape[1] == 2 and {stop - 1 for stop in stops} <= set(drawn[:, -1].tolist())  # every clip's end


def test_a_database_without_a_clip_of_a_window_is_refused_in_one_line(tmp_path, monkeypatch):
    pytest.importorskip("torch", reason="training needs torch")
    from motion_matching.data import generate
    from motion_matching.toolkit import formats
    files = generate.generate_files(tmp_path, nframes=1200)
    database = formats.load_database(files["database"])
    cuts = np.arange(0, database.nframes, 10)  # clips of 10 frames: none holds a window of 20
    database = dataclasses.replace(database, range_starts=cuts.astype(np.int32),
                                   range_stops=np.minimum(cuts + 10, database.nframes).astype(np.int32))
    formats.save_database(files["database"], database)
    monkeypatch.chdir(tmp_path)
    refused = CliRunner().invoke(main, ["train-stepper", "--clip-windows", "--iterations", "2", "--hidden", "16",
                                        "--threads", "1", "--out", "run"])
    assert refused.exit_code == 1, refused.output
    assert refused.output.strip().splitlines() == [
        "Error: database.bin: has no clip of 20 frames: --clip-windows draws only windows inside one clip"]
    assert not (tmp_path / "run").exists()  # refused before the run's folder was made


def test_a_run_with_clip_windows_trains_and_records_the_setting(tmp_path):
    pytest.importorskip("torch", reason="training needs torch")
    from stepper_helpers import small_run

    from motion_matching.training.checkpoint import load_checkpoint
    _, result = small_run(tmp_path, iterations=3, clip_windows=True)
    assert result.network_path.endswith("stepper.bin")
    assert load_checkpoint(tmp_path / "run" / "stepper_checkpoint.pt")["config"]["clip_windows"] is True
