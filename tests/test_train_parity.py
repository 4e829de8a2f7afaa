"""Online (BallTree) and offline (cache) training are the same run: bit-identical parameters."""
import os

import pytest

from motion_matching.errors import MismatchedFiles, StaleCache
from motion_matching.projector.config import TrainConfig
from motion_matching.projector.train import train_projector
from motion_matching.training.checkpoint import load_checkpoint

from conftest import write_small_toolkit_files
from train_helpers import assert_identical_states, build_balltree_cache, small_config


def run(config, files, out_dir, **options):
    features_path, latent_path = files
    return train_projector(config, features_path=features_path, latent_path=latent_path, out_dir=out_dir,
                           held_out_queries=0, **options)


@pytest.mark.parametrize("kind, precision", [("fast", "float32"), ("toolkit", "float32"), ("fast", "bfloat16")])
def test_online_and_offline_give_bit_identical_parameters(tmp_path, small_files, kind, precision):
    config = TrainConfig(iterations=50, save_every=20, checkpoint_every=1000, step=kind,  # the toolkit's network
                         precision=precision)
    cache_path = build_balltree_cache(tmp_path / "c.h5", small_files[0], nqueries=50 * 32)
    online = run(config, small_files, tmp_path / "online")
    offline = run(config, small_files, tmp_path / "offline", offline_cache=cache_path)
    assert (online.source, offline.source, online.steps, offline.steps) == ("online", "offline", 50, 50)
    assert_identical_states(load_checkpoint(online.checkpoint_path), load_checkpoint(offline.checkpoint_path))
    with open(online.network_path, "rb") as first, open(offline.network_path, "rb") as second:
        assert first.read() == second.read()
    assert online.final_loss == offline.final_loss


@pytest.mark.parametrize("kind", ["fast", "toolkit"])
def test_preloaded_cache_gives_the_same_parameters(tmp_path, small_files, kind):
    config = small_config(iterations=30, step=kind)
    cache_path = build_balltree_cache(tmp_path / "c.h5", small_files[0], nqueries=30 * 32)
    streamed = run(config, small_files, tmp_path / "streamed", offline_cache=cache_path)
    preloaded = run(config, small_files, tmp_path / "preloaded", offline_cache=cache_path, preload=True)
    assert_identical_states(load_checkpoint(streamed.checkpoint_path), load_checkpoint(preloaded.checkpoint_path))


def test_cache_of_another_seed_is_refused_suggesting_its_seed_and_a_rebuild_of_its_size(tmp_path, small_files):
    cache_path = build_balltree_cache(tmp_path / "c.h5", small_files[0], nqueries=2_000, seed=99)
    with pytest.raises(MismatchedFiles, match=r"holds the query stream of seed 99, not 1234; pass --seed 99 or run: "
                                              r"mm-projector build-cache .* --queries 2000 --seed 1234 --force$"):
        run(small_config(), small_files, tmp_path / "out", offline_cache=cache_path)  # a run of 1,280 queries
    assert not os.path.exists(tmp_path / "out")


def test_cache_of_other_features_is_refused_before_the_first_step(tmp_path):
    (tmp_path / "old").mkdir()
    old = write_small_toolkit_files(tmp_path / "old")
    cache_path = build_balltree_cache(tmp_path / "c.h5", old[0], nqueries=256)
    new = write_small_toolkit_files(tmp_path, seed=1)
    with pytest.raises(StaleCache, match=r"build-cache"):
        run(small_config(), new, tmp_path / "out", offline_cache=cache_path)
    assert not os.path.exists(tmp_path / "out" / "projector.bin")
