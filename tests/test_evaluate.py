"""Projector evaluation: loss terms, match accuracy (with ties), noise-level bins, report and plots."""
import json

import numpy as np
import pytest
from click.testing import CliRunner

from motion_matching.cli import main
from motion_matching.errors import MismatchedFiles
from motion_matching.fingerprint import file_sha256
from motion_matching.neighbours.queries import HELD_OUT_SEED, generate_queries
from motion_matching.neighbours.search import make_searcher
from motion_matching.projector import evaluate
from motion_matching.projector.config import TrainConfig
from motion_matching.projector.export import export_network
from motion_matching.projector.model import network_to_module
from motion_matching.projector.objective import held_out_loss
from motion_matching.toolkit import formats, recipe
from motion_matching.training.checkpoint import save_checkpoint

from conftest import TOOLKIT_NETWORKS, random_features, write_small_toolkit_files
from export_helpers import random_projector, write_checkpoint


def pass_through_network(nfeatures=27, nlatent=32):
    """A network whose features output is exactly its input (relu(x) - relu(-x)) and whose latent is 0."""
    eye = np.eye(nfeatures, dtype=np.float32)
    first = np.hstack([eye, -eye])
    second = np.zeros((2 * nfeatures, nfeatures + nlatent), np.float32)
    second[:, :nfeatures] = np.vstack([eye, -eye])
    zeros_in, zeros_out = np.zeros(nfeatures, np.float32), np.zeros(nfeatures + nlatent, np.float32)
    layers = [(first, np.zeros(2 * nfeatures, np.float32)), (second, zeros_out)]
    return formats.Network(zeros_in, zeros_in + 1, zeros_out, zeros_out + 1, layers)


def brute_force_nearest(frames, queries):
    """Index of the nearest frame of each query, in float64 (|q|^2 - 2 q.x + |x|^2: no (m, F, n) array)."""
    frames, queries = frames.astype(np.float64), queries.astype(np.float64)
    return (np.square(frames).sum(1)[None] - 2 * queries @ frames.T).argmin(1)


def test_a_projector_returning_the_query_matches_every_query():
    features = random_features(600, seed=2)
    latent = np.random.default_rng(2).normal(size=(600, 32)).astype(np.float32)
    module = network_to_module(pass_through_network()).eval()
    report, arrays = evaluate.evaluate_projector(module, features, latent, nqueries=1500, seed=9)
    queries, _ = generate_queries(features, seed=9, start=0, stop=1500)
    truth = brute_force_nearest(features, queries)
    np.testing.assert_array_equal(arrays["Xtil"], queries)
    assert report["match"] == {"top1": 1.0, "top5": 1.0}
    losses = report["losses"]
    assert losses["feature_l1"] == pytest.approx(np.abs(features[truth] - queries).mean(), rel=1e-6)
    assert losses["latent_l1"] == pytest.approx(np.abs(latent[truth]).mean(), rel=1e-6)
    assert losses["dist"] == pytest.approx(0.3 * np.linalg.norm(queries - features[truth], axis=1).mean(), rel=1e-6)
    assert losses["loss"] == pytest.approx(losses["feature_l1"] + 5 * losses["latent_l1"] + losses["dist"])
    assert [row["queries"] for row in report["by_noise_level"]] == [
        int(((arrays["levels"] >= low) & (arrays["levels"] < high)).sum())
        for low, high in [(0, 0.25), (0.25, 0.5), (0.5, 0.75), (0.75, 1.01)]]


def test_match_counts_ties_and_top_k():
    features = np.array([[0, 0], [0, 0], [1, 0], [2, 0], [3, 0], [4, 0], [5, 0]], np.float32)  # 0 and 1 tie
    outputs = np.array([[0, 0], [0, 0], [3.1, 0], [0.9, 0]], np.float32)
    truth = np.array([1, 0, 2, 5])
    top1, top5 = evaluate.match_flags(features, outputs, truth)
    assert top1.tolist() == [True, True, False, False]
    # for [3.1, 0] frame 2 is 3rd nearest (top-5); for [0.9, 0] frame 5 is 6th (its 5th nearest is at 3.1)
    assert top5.tolist() == [True, True, True, False]


def test_loss_terms_follow_the_training_weights():
    Xhat = np.array([[3.0, 4.0]], np.float32)
    Xgnd, Xtil = np.zeros((1, 2), np.float32), np.array([[0.0, 1.0]], np.float32)
    Zgnd, Ztil = np.ones((1, 3), np.float32), np.array([[1.0, 2.0, 4.0]], np.float32)
    terms = evaluate.loss_terms(Xhat, Xgnd, Zgnd, Xtil, Ztil)
    # |Dgnd - Dtil| = |5 - sqrt(9 + 9)|
    assert terms == pytest.approx({"feature_l1": 0.5, "latent_l1": 4 / 3, "distance_l1": 5 - 18 ** 0.5,
                                   "xval": 0.5, "zval": 20 / 3, "dist": 0.3 * (5 - 18 ** 0.5),
                                   "loss": 0.5 + 20 / 3 + 0.3 * (5 - 18 ** 0.5)})


def test_losses_equal_trainings_held_out_loss():
    features = random_features(800, seed=6)
    latent = np.random.default_rng(6).normal(size=(800, 32)).astype(np.float32)
    module = random_projector(hidden=64, seed=6)
    report, _ = evaluate.evaluate_projector(module, features, latent, nqueries=1000)
    training = held_out_loss(module, features, latent, nqueries=1000, searcher=make_searcher(features))
    assert {name: report["losses"][name] for name in training} == pytest.approx(training, rel=1e-5)


def test_losses_use_the_runs_weights_as_training_does():
    features = random_features(500, seed=7)
    latent = np.random.default_rng(7).normal(size=(500, 32)).astype(np.float32)
    module = random_projector(hidden=32, seed=7)
    config = TrainConfig(weight_features=2.0, weight_latent=0.5, weight_distance=4.0)
    report, _ = evaluate.evaluate_projector(module, features, latent, nqueries=600, config=config)
    training = held_out_loss(module, features, latent, nqueries=600, config=config, searcher=make_searcher(features))
    assert {name: report["losses"][name] for name in training} == pytest.approx(training, rel=1e-5)
    assert report["loss_weights"] == {"xval": 2.0, "zval": 0.5, "dist": 4.0}
    losses = report["losses"]
    assert losses["dist"] == pytest.approx(4.0 * losses["distance_l1"])


def test_a_checkpoint_is_evaluated_with_the_loss_weights_it_was_trained_with(tmp_path):
    features_path, latent_path = write_small_toolkit_files(tmp_path, nframes=300)
    config = TrainConfig(weight_latent=2.0, seed=99)
    checkpoint = write_checkpoint(tmp_path / "run.pt", random_projector(hidden=16, seed=3), config=config.to_dict())
    report = evaluate.evaluate_files(checkpoint, features_path, latent_path, tmp_path / "eval", nqueries=300,
                                     plots=False, config=TrainConfig(weight_latent=7.0))
    assert report["loss_weights"] == {"xval": 1.0, "zval": 2.0, "dist": 0.3} and report["training_seed"] == 99
    assert report["losses"]["zval"] == pytest.approx(2.0 * report["losses"]["latent_l1"])
    network = tmp_path / "projector.bin"
    export_network(checkpoint, network)  # a .bin holds no settings: the given config's weights count
    report = evaluate.evaluate_files(network, features_path, latent_path, tmp_path / "eval", nqueries=300,
                                     plots=False, config=TrainConfig(weight_latent=7.0))
    assert report["loss_weights"]["zval"] == 7.0


def test_default_queries_are_held_out_from_training():
    features = random_features(300)
    held_out, _ = generate_queries(features, seed=HELD_OUT_SEED, start=0, stop=100)
    trained, _ = generate_queries(features, seed=recipe.SEED, start=0, stop=100)
    assert HELD_OUT_SEED != recipe.SEED
    assert not np.isclose(held_out[:, None, :], trained[None], atol=1e-6).all(-1).any()


def test_toolkit_projector_evaluates_on_small_random_data(tmp_path):
    features_path, latent_path = write_small_toolkit_files(tmp_path)
    report = evaluate.evaluate_files(TOOLKIT_NETWORKS / "projector.bin", features_path, latent_path,
                                     tmp_path / "eval", nqueries=2000, plots=False)
    assert json.loads((tmp_path / "eval" / "evaluation.json").read_text()) == json.loads(json.dumps(report))
    assert 0 <= report["match"]["top1"] <= report["match"]["top5"] <= 1
    assert all(np.isfinite(value) for value in report["losses"].values())
    assert sum(row["queries"] for row in report["by_noise_level"]) == 2000
    assert report["files"] == [str(tmp_path / "eval" / "evaluation.json")]
    assert report["inputs"]["projector"]["sha256"] == __import__("hashlib").sha256(
        (TOOLKIT_NETWORKS / "projector.bin").read_bytes()).hexdigest()


def test_projector_must_fit_the_data(tmp_path):
    features_path, latent_path = write_small_toolkit_files(tmp_path, nframes=200, nlatent=16)
    with pytest.raises(MismatchedFiles, match=r"projector.bin: maps 27 -> 59 values but the data need 27 -> 27 \+ 16"):
        evaluate.evaluate_files(TOOLKIT_NETWORKS / "projector.bin", features_path, latent_path, tmp_path / "eval")
    assert not (tmp_path / "eval").exists()


def test_plots_have_one_panel_per_column(tmp_path):
    pytest.importorskip("matplotlib", reason="plots need the optional [plot] extra (matplotlib)")
    from motion_matching.projector.plots import plot_predictions
    rng = np.random.default_rng(0)
    arrays = {name: rng.normal(size=(300, width)).astype(np.float32)
              for name, width in (("Xhat", 3), ("Xgnd", 3), ("Xtil", 3), ("Zgnd", 5), ("Ztil", 5))}
    written = plot_predictions(arrays, tmp_path)
    assert written == [str(tmp_path / "projector_X.png"), str(tmp_path / "projector_Z.png")]
    heights = []
    for path in written:
        png = open(path, "rb").read()
        assert png[:8] == b"\x89PNG\r\n\x1a\n"
        heights.append(int.from_bytes(png[20:24], "big"))  # IHDR height in pixels
    assert heights == [round((1.2 * 3 + 1) * 60), round((1.2 * 5 + 1) * 60)]  # 1.2 inch panels, 1 inch of titles


def test_prediction_plots_have_a_title_axis_labels_and_a_legend():
    pytest.importorskip("matplotlib", reason="plots need the optional [plot] extra")
    from motion_matching.projector import plots
    plt = plots._pyplot("out", "pass --no-plots")
    series = [np.zeros((10, 3), np.float32), np.ones((10, 3), np.float32)]
    figure = plots.prediction_figure(plt, series, ["gnd", "til"], column_name="latent", xlabel="held-out query")
    try:
        assert figure._suptitle.get_text() == plots.TITLES["latent"]
        assert [axis.get_ylabel() for axis in figure.axes] == ["latent 0", "latent 1", "latent 2"]
        assert figure.axes[-1].get_xlabel() == "held-out query"
        assert [text.get_text() for text in figure.legends[0].get_texts()] == [
            "nearest database frame (exact search: the target)", "projector output"]
    finally:
        plt.close(figure)


def test_a_checkpoint_evaluated_on_other_files_than_its_training_warns_in_one_line(tmp_path, caplog):
    (tmp_path / "trained").mkdir()
    (tmp_path / "other").mkdir()
    trained = write_small_toolkit_files(tmp_path / "trained", nframes=300, seed=1)
    other = write_small_toolkit_files(tmp_path / "other", nframes=300, seed=2)
    checkpoint = tmp_path / "run.pt"
    save_checkpoint(checkpoint, model=random_projector(hidden=16).state_dict(), optimizer={}, scheduler={}, step=0,
                    config={}, rng={}, inputs={"features": file_sha256(trained[0]), "latent": file_sha256(trained[1])})
    caplog.set_level("INFO", logger="motion_matching")
    evaluate.evaluate_files(checkpoint, *trained, tmp_path / "eval", nqueries=100, plots=False)
    assert not caplog.records  # its own training files: nothing to say
    evaluate.evaluate_files(checkpoint, other[0], trained[1], tmp_path / "eval", nqueries=100, plots=False)
    assert caplog.messages == [f"{checkpoint}: was trained on another features.bin than {other[0]} (the SHA-256 it "
                               "records differs): these numbers are for other data than its training's"]
    caplog.clear()
    evaluate.evaluate_files(checkpoint, *other, tmp_path / "eval", nqueries=100, plots=False)
    assert caplog.messages == [f"{checkpoint}: was trained on another features.bin and latent.bin than {other[0]} "
                               f"and {other[1]} (the SHA-256 it records differs): these numbers are for other data "
                               "than its training's"]
    caplog.clear()
    network = tmp_path / "projector.bin"
    export_network(checkpoint, network)  # a .bin records no inputs: nothing to compare, no warning
    evaluate.evaluate_files(network, *other, tmp_path / "eval", nqueries=100, plots=False)
    assert not caplog.records


def test_evaluate_refuses_features_and_latent_of_different_frame_counts_in_one_line(tmp_path):
    features_path, _ = write_small_toolkit_files(tmp_path, nframes=300)
    (tmp_path / "other").mkdir()
    _, latent_path = write_small_toolkit_files(tmp_path / "other", nframes=299)
    result = CliRunner().invoke(main, ["evaluate", "--projector", str(TOOLKIT_NETWORKS / "projector.bin"),
                                       "--features", str(features_path), "--latent", str(latent_path),
                                       "--out", str(tmp_path / "eval")])
    assert result.exit_code == 1
    assert result.output == f"Error: {latent_path}: has 299 frames but {features_path} has 300\n"
    assert not (tmp_path / "eval").exists()
