"""evaluate-stepper: rollouts from windows inside the clips, their L1 error by horizon (against stepped frames
known exactly and against an independent numpy rollout of stepper.bin), the decoded poses' error, the
command's files and its one-line refusals."""
import json

import numpy as np
import pytest
from click.testing import CliRunner
from stepper_helpers import FRAMES, small_run

from motion_matching.cli import main
from motion_matching.data import generate
from motion_matching.toolkit import formats
from motion_matching.toolkit.overwrite import png_writer

pytest.importorskip("torch", reason="the evaluation steps a network, which needs torch")

from motion_matching.stepper import evaluate  # noqa: E402 - torch first, or the skip above

from train_helpers import write_database  # noqa: E402 - it imports torch

DT = 1.0 / 60.0
NFEATURES, NLATENT = 27, 32
VELOCITY_ERROR = {"features": 0.6, "latent": 0.3}  # what a shifted stepper adds to every velocity


def piecewise_linear(ranges, seed=0):
    """Features (F, 27) and latent (F, 32) float32 that move at one constant velocity each (``velocity``, (59,)
    per second) inside every clip and jump between clips: ``(X, Z, velocity)``."""
    rng = np.random.default_rng(seed)
    velocity = rng.uniform(-30.0, 30.0, NFEATURES + NLATENT)  # about half a unit a frame
    parts = []
    for start, stop in zip(*ranges):
        origin = rng.uniform(-5.0, 5.0, NFEATURES + NLATENT)
        parts.append(origin + np.arange(stop - start)[:, None] * DT * velocity)
    values = np.concatenate(parts).astype(np.float32)
    return values[:, :NFEATURES], values[:, NFEATURES:], velocity


def constant_stepper(velocity, *, hidden=8):
    """A stepper network whose output is ``velocity`` (59,) whatever its input (zero weights, the velocity as
    its output mean)."""
    size = len(velocity)
    layers = [(np.zeros((size, hidden), np.float32), np.zeros(hidden, np.float32)),
              (np.zeros((hidden, hidden), np.float32), np.zeros(hidden, np.float32)),
              (np.zeros((hidden, size), np.float32), np.zeros(size, np.float32))]
    ones, zeros = np.ones(size, np.float32), np.zeros(size, np.float32)
    return formats.Network(zeros, ones, velocity.astype(np.float32), ones, layers)


def random_decompressor(nbones, *, hidden=16, seed=0):
    """A decompressor network of the toolkit's layout for ``nbones`` bones, random weights (it decodes nonsense,
    but the same nonsense from the same frames)."""
    rng = np.random.default_rng(seed)
    size_in, size_out = NFEATURES + NLATENT, 15 * (nbones - 1) + 8
    layers = [((rng.standard_normal((size_in, hidden)) * 0.2).astype(np.float32), np.zeros(hidden, np.float32)),
              ((rng.standard_normal((hidden, size_out)) * 0.2).astype(np.float32), np.zeros(size_out, np.float32))]
    return formats.Network(np.zeros(size_in, np.float32), np.ones(size_in, np.float32),
                           rng.standard_normal(size_out).astype(np.float32),
                           rng.uniform(0.1, 0.3, size_out).astype(np.float32), layers)


@pytest.fixture
def linear_files(tmp_path):
    """The synthetic FRAMES-frame database (4 clips) with piecewise-linear features.bin and latent.bin, and a
    stepper.bin that steps at each clip's own velocity: a dict of paths and the velocity."""
    files = generate.generate_files(tmp_path, nframes=FRAMES)
    database = formats.load_database(files["database"])
    X, Z, velocity = piecewise_linear((database.range_starts, database.range_stops))
    formats.save_features(files["features"], formats.Features(X, np.zeros(NFEATURES, np.float32),
                                                              np.ones(NFEATURES, np.float32)))
    formats.save_latent(files["latent"], Z)
    formats.save_network(tmp_path / "stepper.bin", constant_stepper(velocity))
    return {**files, "stepper": tmp_path / "stepper.bin", "velocity": velocity, "nbones": database.nbones}


def evaluate_linear(files, **options):
    return evaluate.evaluate_stepper(files["stepper"], database_path=files["database"],
                                     features_path=files["features"], latent_path=files["latent"], **options)


def test_every_window_lies_inside_a_clip_and_a_capped_subset_is_evenly_spaced_and_seeded():
    ranges = (np.array([0, 30, 45]), np.array([30, 45, 100]))  # the middle clip is too short for a window
    every, possible = evaluate.window_starts(ranges, window=20, limit=1000)
    assert possible == 47 and every.tolist() == list(range(0, 11)) + list(range(45, 81))
    capped, possible = evaluate.window_starts(ranges, window=20, limit=10, seed=1)
    assert possible == 47 and len(capped) == 10 and set(capped) <= set(every)
    positions = np.searchsorted(every, capped)
    assert set(np.diff(positions)) <= {4, 5}  # 47 / 10 apart
    assert capped.tolist() == evaluate.window_starts(ranges, window=20, limit=10, seed=1)[0].tolist()
    assert capped.tolist() != evaluate.window_starts(ranges, window=20, limit=10, seed=2)[0].tolist()


def test_a_stepper_that_steps_at_the_databases_own_velocity_has_no_error(linear_files):
    report, arrays = evaluate_linear(linear_files, windows=10 ** 6)
    database = formats.load_database(linear_files["database"])
    clips = database.range_stops - database.range_starts
    assert report["windows"] == report["windows_possible"] == int(np.sum(clips - 19))
    # a window across two clips, or a rollout compared with the wrong frames, would be half a unit off or more
    assert np.max(arrays["feature_l1"]) < 1e-4 and np.max(arrays["latent_l1"]) < 1e-4
    assert report["horizons"] == list(range(1, 20)) and len(report["feature_l1"]["by_horizon"]) == 19


def test_a_velocity_error_grows_the_error_by_exactly_one_frame_of_it_a_frame(linear_files):
    shift = np.r_[np.full(NFEATURES, VELOCITY_ERROR["features"]), np.full(NLATENT, VELOCITY_ERROR["latent"])]
    formats.save_network(linear_files["stepper"], constant_stepper(linear_files["velocity"] + shift))
    report, _ = evaluate_linear(linear_files, windows=50)
    horizons = np.arange(1, 20)
    for name, error in (("feature_l1", VELOCITY_ERROR["features"]), ("latent_l1", VELOCITY_ERROR["latent"])):
        np.testing.assert_allclose(report[name]["by_horizon"], horizons * DT * error, rtol=1e-3)
        assert report[name]["mean"] == pytest.approx(10 * DT * error, rel=1e-3)
    terms = report["loss_terms"]  # the toolkit's weights; values over all 20 frames (0..19), velocities over 19
    assert terms["xval"] == pytest.approx(2.0 * 9.5 * DT * VELOCITY_ERROR["features"], rel=1e-3)
    assert terms["zval"] == pytest.approx(7.5 * 9.5 * DT * VELOCITY_ERROR["latent"], rel=1e-3)
    assert terms["xvel"] == pytest.approx(0.2 * VELOCITY_ERROR["features"], rel=1e-3)
    assert terms["zvel"] == pytest.approx(0.5 * VELOCITY_ERROR["latent"], rel=1e-3)


def numpy_rollout_l1(network, X, Z, start):
    """Mean absolute error per value of features and of latent (19,) each, of stepper ``network`` run as the
    runtime runs it, in numpy, from frame ``start`` for 19 frames."""
    frame = np.concatenate([X[start], Z[start]]).astype(np.float64)
    errors = []
    for step in range(1, 20):
        hidden = (frame - network.mean_in) / network.std_in
        for index, (weights, bias) in enumerate(network.layers):
            hidden = hidden @ weights + bias
            hidden = np.maximum(hidden, 0.0) if index < len(network.layers) - 1 else hidden
        frame = frame + DT * (hidden * network.std_out + network.mean_out)
        truth = np.concatenate([X[start + step], Z[start + step]])
        errors.append((np.abs(frame - truth)[:X.shape[1]].mean(), np.abs(frame - truth)[X.shape[1]:].mean()))
    return np.array(errors).T


def test_the_rollout_is_the_runtimes_arithmetic_on_a_trained_stepper(tmp_path):
    files, result = small_run(tmp_path)
    report, arrays = evaluate.evaluate_stepper(result.network_path, database_path=files["database"],
                                               features_path=files["features"], latent_path=files["latent"],
                                               windows=3)
    assert arrays["starts"].tolist() == sorted(set(arrays["starts"].tolist())) and report["windows"] == 3
    network = formats.load_network(result.network_path)
    X, Z = formats.load_features(files["features"]).features, formats.load_latent(files["latent"])
    for row, start in enumerate(arrays["starts"]):
        features, latent = numpy_rollout_l1(network, X, Z, start)
        np.testing.assert_allclose(arrays["feature_l1"][row], features, rtol=1e-3, atol=1e-6)
        np.testing.assert_allclose(arrays["latent_l1"][row], latent, rtol=1e-3, atol=1e-6)
    assert report["feature_l1"]["mean"] == pytest.approx(arrays["feature_l1"].mean())


def test_decoded_poses_of_exact_steps_have_the_decompressors_own_error(linear_files, tmp_path):
    from motion_matching.decompressor.evaluate import RuntimeDecompressor, frame_errors
    from motion_matching.decompressor.inputs import load_inputs
    formats.save_network(tmp_path / "decompressor.bin", random_decompressor(linear_files["nbones"]))
    report, arrays = evaluate_linear(linear_files, windows=40, decompressor_path=tmp_path / "decompressor.bin")
    stepped, alone = report["position_error_cm"], report["decompressor_alone_cm"]
    assert alone["mean"] > 1.0  # a random decompressor: far from the database's poses
    for key in ("mean", "p95", "max"):
        assert stepped[key] == pytest.approx(alone[key], rel=1e-3)
    np.testing.assert_allclose(stepped["by_horizon"], alone["by_horizon"], rtol=1e-3)
    # the decompressor's own error is evaluate-decompressor's, frame by frame
    inputs = load_inputs(linear_files["database"], linear_files["features"])
    import torch
    module = RuntimeDecompressor(formats.load_network(tmp_path / "decompressor.bin")).eval()
    per_frame = frame_errors(module, inputs, torch.from_numpy(formats.load_latent(linear_files["latent"])))
    frames = arrays["starts"][:, None] + np.arange(1, 20)
    expected = per_frame["position_cm"][frames][..., 1:]
    np.testing.assert_allclose(arrays["decompressor_cm"], expected, rtol=1e-4, atol=1e-4)


@pytest.fixture
def trained(tmp_path, monkeypatch):
    """A briefly trained stepper in ``run/`` beside its files, a random decompressor.bin, the folder current."""
    files, result = small_run(tmp_path)
    formats.save_network(tmp_path / "decompressor.bin",
                         random_decompressor(formats.load_database(files["database"]).nbones))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(*arguments):
    return CliRunner().invoke(main, ["evaluate-stepper", "--stepper", "run/stepper.bin", "--windows", "64",
                                     *arguments])


def test_evaluate_stepper_writes_its_report_and_plot_and_replaces_only_its_own(trained):
    pytest.importorskip("matplotlib", reason="the plot needs matplotlib")
    result = run("--decompressor", "decompressor.bin", "--out", "evaluation")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("feature L1: mean ") and lines[1].startswith("latent L1: mean ")
    assert lines[2].startswith("position error: mean ") and lines[3].startswith("loss ")
    assert lines[-1] == "wrote evaluation/stepper_evaluation.json, evaluation/stepper_errors.png"
    report = json.loads((trained / "evaluation" / "stepper_evaluation.json").read_text())
    assert report["format"] == evaluate.REPORT_FORMAT and report["windows"] == 64 and report["frames"] == FRAMES
    position = report["position_error_cm"]
    assert 0 < position["mean"] <= position["p95"] <= position["max"] and len(position["by_horizon"]) == 19
    assert report["inputs"]["decompressor"] == "decompressor.bin"
    assert png_writer(trained / "evaluation" / "stepper_errors.png") == "mm-projector evaluate-stepper"
    assert run("--out", "evaluation").exit_code == 0  # its own files: replaced without --force
    assert "position_error_cm" not in json.loads((trained / "evaluation" / "stepper_evaluation.json").read_text())
    (trained / "evaluation" / "stepper_evaluation.json").write_text("{}")
    refused = run("--out", "evaluation")
    assert refused.exit_code == 1
    assert refused.output == ("Error: evaluation/stepper_evaluation.json: exists (not written by evaluate-stepper); "
                              "pass --force to replace it, or choose another --out\n")
    assert (trained / "evaluation" / "stepper_evaluation.json").read_text() == "{}"
    assert run("--out", "evaluation", "--force").exit_code == 0


def test_files_of_other_frame_counts_are_one_line_and_write_nothing(trained):
    formats.save_latent(trained / "short.bin", formats.load_latent("latent.bin")[:-1])
    result = run("--latent", "short.bin")
    assert result.exit_code == 1
    assert result.output == f"Error: short.bin: has {FRAMES - 1} frames but features.bin has {FRAMES}\n"
    write_database(trained / "other.bin", FRAMES + 1)
    result = run("--database", "other.bin")
    assert result.exit_code == 1
    assert result.output == f"Error: features.bin: has {FRAMES} frames but other.bin has {FRAMES + 1}\n"
    assert not (trained / "evaluation").exists()


def test_networks_of_the_wrong_shapes_are_one_line_and_write_nothing(trained):
    nbones = formats.load_database("database.bin").nbones
    pose = 15 * (nbones - 1) + 8
    result = run("--stepper", "decompressor.bin")
    assert result.exit_code == 1
    assert result.output == (f"Error: decompressor.bin: has layers 59 -> 16 -> {pose}; a stepper of these files has "
                             "59 -> hidden -> hidden -> 59 (27 features + 32 latent)\n")
    result = run("--decompressor", "run/stepper.bin")
    assert result.exit_code == 1
    assert result.output == (f"Error: run/stepper.bin: has layers 59 -> 64 -> 64 -> 59; a decompressor of these files "
                             f"has 59 -> hidden -> {pose} (27 features + 32 latent in, {nbones - 1} bones' pose, the "
                             "root's velocities and 2 contacts out)\n")
    assert not (trained / "evaluation").exists()


def test_a_database_whose_clips_hold_no_window_is_one_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_database(tmp_path / "database.bin", 60, nclips=4)  # clips of 15 frames
    X, Z, velocity = piecewise_linear((np.array([0, 15, 30, 45]), np.array([15, 30, 45, 60])))
    formats.save_features(tmp_path / "features.bin", formats.Features(X, np.zeros(NFEATURES, np.float32),
                                                                      np.ones(NFEATURES, np.float32)))
    formats.save_latent(tmp_path / "latent.bin", Z)
    formats.save_network(tmp_path / "stepper.bin", constant_stepper(velocity))
    result = CliRunner().invoke(main, ["evaluate-stepper"])
    assert result.exit_code == 1
    assert result.output == "Error: database.bin: no clip holds a window of 20 frames (the longest has 15)\n"
    assert not (tmp_path / "evaluation").exists()


def test_ctrl_c_while_it_steps_is_one_line_and_keeps_the_previous_report(trained, monkeypatch):
    from motion_matching.interrupts import INTERRUPTED_EXIT, INTERRUPTED_LINE
    assert run("--out", "evaluation", "--no-plots").exit_code == 0
    before = (trained / "evaluation" / "stepper_evaluation.json").read_bytes()

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt
        yield  # a generator, as the one it replaces

    monkeypatch.setattr(evaluate, "stepped_blocks", interrupted)
    result = run("--out", "evaluation", "--no-plots", "--windows", "32")
    assert result.exit_code == INTERRUPTED_EXIT
    assert result.stderr == INTERRUPTED_LINE + "\n"
    assert (trained / "evaluation" / "stepper_evaluation.json").read_bytes() == before
