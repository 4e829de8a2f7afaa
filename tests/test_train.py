"""The training loop reproduces the toolkit's train_projector.py: constants, normalisation, losses, schedule."""
import dataclasses
import os

import numpy as np
import pytest
import torch

from motion_matching.errors import MismatchedFiles, MotionMatchingError
from motion_matching.projector.config import TrainConfig
from motion_matching.projector.objective import held_out_loss, make_projector, normalisation, projector_losses
from motion_matching.projector.train import train_projector
from motion_matching.toolkit import formats, recipe
from motion_matching.training.checkpoint import CHECKPOINT_KEYS, load_checkpoint

from conftest import random_features
from train_helpers import small_config, write_database


def run(config, files, out_dir, **options):
    features_path, latent_path = files
    options.setdefault("held_out_queries", 0)
    return train_projector(config, features_path=features_path, latent_path=latent_path, out_dir=out_dir, **options)


def test_defaults_are_the_toolkit_constants():
    expected = dict(iterations=500_000, batch_size=32, lr=0.001, weight_decay=0.001, amsgrad=True, lr_decay=0.99,
                    lr_decay_every=1000, seed=1234, weight_features=1.0, weight_latent=5.0, weight_distance=0.3,
                    hidden=512, hidden_layers=4, save_every=1000, device="cpu")
    assert {key: getattr(TrainConfig(), key) for key in expected} == expected
    assert (TrainConfig().step, TrainConfig().threads) == ("fast", None)  # how fast, not what is computed
    with pytest.raises(dataclasses.FrozenInstanceError):
        TrainConfig().lr = 1.0


def test_recipe_declares_the_defaults_of_training_the_model_and_the_cache():
    from motion_matching.cache import format as cache_format
    from motion_matching.demo import DemoSettings
    from motion_matching.neighbours.queries import HELD_OUT_SEED
    from motion_matching.projector.model import projector_sizes
    config = TrainConfig()
    assert (config.seed, config.batch_size, config.iterations, config.hidden) == (
        recipe.SEED, recipe.BATCH_SIZE, recipe.ITERATIONS, recipe.HIDDEN)
    assert projector_sizes(27, 32) == [27] + [recipe.HIDDEN] * recipe.HIDDEN_LAYERS + [59]
    assert cache_format.DEFAULT_SEED == recipe.SEED == DemoSettings().retrain_settings().config("projector").seed
    assert cache_format.DEFAULT_NQUERIES == 32 * 500_000 == config.batch_size * config.iterations
    assert HELD_OUT_SEED != recipe.SEED  # the held-out stream is one training never draws


def test_normalisation_uses_column_means_and_one_global_std_without_epsilon():
    X, Z = random_features(300), random_features(300, nfeatures=5, seed=1)
    mean_in, std_in, mean_out, std_out = normalisation(X, Z)
    assert np.array_equal(mean_in, X.mean(axis=0)) and np.all(std_in == X.std())
    assert np.array_equal(mean_out, np.concatenate([X.mean(axis=0), Z.mean(axis=0)]))
    assert np.array_equal(std_out, np.concatenate([X.std(axis=0), Z.std(axis=0)]))
    module = make_projector(X, Z)
    assert module.sizes == [27, 512, 512, 512, 512, 32]


def test_losses_are_the_toolkit_weighted_l1_terms():
    X, Z = random_features(200), random_features(200, nfeatures=4, seed=1)
    module = make_projector(X, Z, small_config())
    Xhat, Xgnd, Zgnd = (torch.from_numpy(a) for a in (X[:8] + 0.1, X[:8], Z[:8]))
    terms = projector_losses(module, Xhat, Xgnd, Zgnd)
    with torch.no_grad():
        output = module(Xhat).numpy().astype(np.float64)
    Xtil, Ztil = output[:, :27], output[:, 27:]
    Dgnd, Dtil = (np.linalg.norm(Xhat.numpy() - other, axis=1) for other in (X[:8], Xtil))
    expected = [np.abs(X[:8] - Xtil).mean(), 5 * np.abs(Z[:8] - Ztil).mean(), 0.3 * np.abs(Dgnd - Dtil).mean()]
    assert np.allclose([terms.xval.item(), terms.zval.item(), terms.dist.item()], expected, rtol=1e-5)
    assert terms.loss.item() == pytest.approx(sum(expected), rel=1e-5)


def test_learning_rate_decays_after_iteration_zero_and_every_period(tmp_path, small_files):
    result = run(small_config(iterations=25, lr_decay_every=10), small_files, tmp_path)
    state = load_checkpoint(result.checkpoint_path)
    assert state["optimizer"]["param_groups"][0]["lr"] == pytest.approx(0.001 * 0.99 ** 3)  # after 0, 10, 20
    assert state["optimizer"]["param_groups"][0]["amsgrad"] is True


def test_run_writes_a_runtime_network_and_a_checkpoint_with_its_config(tmp_path, small_files):
    config = small_config(iterations=30)
    result = run(config, small_files, tmp_path, held_out_queries=256)
    network = formats.load_network(tmp_path / "projector.bin")
    assert network.sizes == [27, 32, 32, 32, 32, 59]
    assert np.all(network.std_in == random_features(2000).std())
    state = load_checkpoint(result.checkpoint_path)
    assert state["config"] == config.to_dict() and state["step"] == 30 and len(state["inputs"]["features"]) == 64
    assert tuple(state) == CHECKPOINT_KEYS  # the layout documented in checkpoint.py, key for key
    assert set(state["inputs"]) == {"features", "latent"} and set(state["rng"]) == {"torch"}
    assert state["source"] == "online" and np.isfinite(state["rolling_loss"])
    assert set(result.held_out) == {"loss", "xval", "zval", "dist"} and np.isfinite(result.held_out["loss"])


def test_training_lowers_the_held_out_loss(tmp_path, small_files):
    features, latent = formats.load_features_and_latent(*small_files)
    config = small_config(iterations=150, hidden=64)
    before = held_out_loss(make_projector(features.features, latent, config), features.features, latent,
                           nqueries=512, config=config)
    after = run(config, small_files, tmp_path, held_out_queries=512).held_out
    assert after["loss"] < 0.8 * before["loss"]


def test_database_of_another_length_is_refused(tmp_path, small_files):
    write_database(tmp_path / "database.bin", 1999)
    with pytest.raises(MismatchedFiles, match=r"database\.bin: has 1999 frames but .*features\.bin has 2000$"):
        run(small_config(), small_files, tmp_path / "out", database_path=tmp_path / "database.bin")


def test_plots_are_written_like_the_toolkit(tmp_path, small_files):
    pytest.importorskip("matplotlib", reason="the plots need matplotlib")
    features = random_features(400, nfeatures=3)  # few columns: one panel each keeps the test quick
    formats.save_features(tmp_path / "features.bin", formats.Features(features, np.zeros(3, np.float32),
                                                                      np.ones(3, np.float32)))
    formats.save_latent(tmp_path / "latent.bin", random_features(400, nfeatures=2, seed=1))
    write_database(tmp_path / "database.bin", 400)
    run(small_config(iterations=2, hidden_layers=1), (tmp_path / "features.bin", tmp_path / "latent.bin"),
        tmp_path / "out", plots=True, database_path=tmp_path / "database.bin")
    for name, columns in (("projector_X.png", 3), ("projector_Z.png", 2)):
        with open(tmp_path / "out" / name, "rb") as stream:
            png = stream.read()
        assert png[:8] == b"\x89PNG\r\n\x1a\n"
        assert int.from_bytes(png[20:24], "big") == round((1.2 * columns + 1) * 60)  # 1.2 in panels, 1 in of title


def test_tensorboard_logs_are_written(tmp_path, small_files):
    pytest.importorskip("tensorboard", reason="the logs need tensorboard")
    run(small_config(iterations=3), small_files, tmp_path / "out", tensorboard=tmp_path / "logs")
    assert any(name.startswith("events.out.tfevents") for name in os.listdir(tmp_path / "logs"))


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA: the refusal cannot happen")
def test_cuda_without_a_device_is_refused(tmp_path, small_files):
    with pytest.raises(MotionMatchingError, match=r"^--device: cuda requested but torch sees no CUDA device$"):
        run(small_config(device="cuda"), small_files, tmp_path)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here: the --device cuda path needs one")
def test_cuda_offline_run_matches_its_online_run(tmp_path, small_files):
    from train_helpers import build_balltree_cache
    config = small_config(iterations=20, device="cuda")
    cache_path = build_balltree_cache(tmp_path / "c.h5", small_files[0], nqueries=20 * 32)
    online = run(config, small_files, tmp_path / "online")
    offline = run(config, small_files, tmp_path / "offline", offline_cache=cache_path)
    assert online.final_loss == offline.final_loss
