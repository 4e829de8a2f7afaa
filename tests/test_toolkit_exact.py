"""--exact-toolkit: the toolkit script's own stream, online and offline, resumable, and refused when it does not fit."""
import dataclasses

import h5py
import numpy as np
import pytest
from click.testing import CliRunner

from motion_matching.cache import build_cache, open_cache, verify_cache
from motion_matching.cli import main
from motion_matching.errors import CorruptCache, InvalidFile, MismatchedFiles
from motion_matching.neighbours.toolkit_stream import ToolkitStream
from motion_matching.projector.train import TrainingInterrupted, train_projector
from motion_matching.toolkit import formats
from motion_matching.training.checkpoint import load_checkpoint

from train_helpers import assert_identical_states, small_config, write_database

SAVE_EVERY = 10


@pytest.fixture
def toolkit_files(small_files, tmp_path):
    """(features.bin, latent.bin, database.bin) of 2,000 frames in 3 clips."""
    return (*small_files, write_database(tmp_path / "database.bin", 2000, nclips=3))


def exact_config(**changes):
    return small_config(exact_toolkit=True, save_every=SAVE_EVERY, **changes)


def run(config, files, out_dir, **options):
    features_path, latent_path, database_path = files
    return train_projector(config, features_path=features_path, latent_path=latent_path,
                           database_path=database_path, out_dir=out_dir, held_out_queries=0, **options)


def toolkit_cache(files, path, *, nqueries, batch_size=32, **options):
    build_cache(files[0], out=path, nqueries=nqueries, seed=1234, chunk_rows=8 * batch_size, exact_toolkit=True,
                database_path=files[2], batch_size=batch_size, save_every=SAVE_EVERY, **options)
    return path


def global_numpy_draws(X, *, iterations, batch, save_every, preview):
    """The toolkit script's calls on numpy's global generator, written out as the script has them."""
    np.random.seed(1234)
    X_noise_std = X.std(axis=0) + 1.0
    batches = []
    for i in range(iterations):
        samples = np.random.randint(0, X.shape[0], size=[batch])
        nsigma = np.random.uniform(size=[batch, 1]).astype(np.float32)
        noise = np.random.normal(size=[batch, X.shape[1]]).astype(np.float32)
        batches.append(X[samples] + X_noise_std * nsigma * noise)
        if i % save_every == 0:
            np.random.uniform(size=[preview, 1])
            np.random.normal(size=[preview, X.shape[1]])
    return np.concatenate(batches)


def test_stream_is_the_scripts_draws_and_continues_from_a_saved_state():
    X = np.random.default_rng(0).standard_normal((500, 5)).astype(np.float32)
    expected = global_numpy_draws(X, iterations=25, batch=3, save_every=10, preview=7)
    stream = ToolkitStream(X, seed=1234, batch_size=3, save_every=10, preview_rows=7)
    first = stream.batches(12)[0]
    state = stream.state()
    resumed = ToolkitStream(X, seed=1, batch_size=3, save_every=10, preview_rows=7)
    resumed.restore(state)
    rest = resumed.batches(13)[0]
    assert np.concatenate([first, rest]).tobytes() == expected.tobytes()


def test_online_offline_and_resumed_runs_are_identical(tmp_path, toolkit_files):
    config = exact_config(iterations=41)
    online = run(config, toolkit_files, tmp_path / "online")
    cache_path = toolkit_cache(toolkit_files, tmp_path / "tk.h5", nqueries=41 * 32)
    offline = run(config, toolkit_files, tmp_path / "offline", offline_cache=cache_path)
    with pytest.raises(TrainingInterrupted) as stopped:
        run(config, toolkit_files, tmp_path / "broken", progress=_stop_at(20))
    checkpoint = load_checkpoint(stopped.value.result.checkpoint_path)
    assert checkpoint["rng"]["toolkit_stream"]["iteration"] == 20
    resumed = run(config, toolkit_files, tmp_path / "broken", resume=stopped.value.result.checkpoint_path)
    reference = (tmp_path / "online" / "projector.bin").read_bytes()
    for result in (offline, resumed):
        assert_identical_states(load_checkpoint(online.checkpoint_path), load_checkpoint(result.checkpoint_path))
        assert open(result.network_path, "rb").read() == reference


def _stop_at(step):
    def progress(report):
        if report.step == step:
            raise KeyboardInterrupt
    return progress


def test_offline_checkpoint_resumes_online_by_replaying_the_draws(tmp_path, toolkit_files):
    config = exact_config(iterations=30)
    cache_path = toolkit_cache(toolkit_files, tmp_path / "tk.h5", nqueries=30 * 32)
    unbroken = run(config, toolkit_files, tmp_path / "unbroken")
    with pytest.raises(TrainingInterrupted) as stopped:
        run(config, toolkit_files, tmp_path / "mixed", offline_cache=cache_path, progress=_stop_at(20))
    resumed = run(config, toolkit_files, tmp_path / "mixed", resume=stopped.value.result.checkpoint_path)
    assert_identical_states(load_checkpoint(unbroken.checkpoint_path), load_checkpoint(resumed.checkpoint_path))


def test_projector_bin_is_written_only_when_the_toolkit_writes_it(tmp_path, toolkit_files):
    at_save = run(exact_config(iterations=SAVE_EVERY + 1), toolkit_files, tmp_path / "a")
    later = run(exact_config(iterations=SAVE_EVERY + 7), toolkit_files, tmp_path / "b")
    assert open(at_save.network_path, "rb").read() == open(later.network_path, "rb").read()
    assert load_checkpoint(later.checkpoint_path)["step"] == SAVE_EVERY + 7


def test_interrupted_toolkit_cache_build_resumes_to_the_same_file(tmp_path, toolkit_files):
    whole = toolkit_cache(toolkit_files, tmp_path / "whole.h5", nqueries=40 * 32)
    assert toolkit_cache(toolkit_files, tmp_path / "cut.h5", nqueries=40 * 32, stop_after=2) is not None
    assert (tmp_path / "cut.h5.partial").exists() and not (tmp_path / "cut.h5").exists()
    toolkit_cache(toolkit_files, tmp_path / "cut.h5", nqueries=40 * 32)
    with h5py.File(whole, "r") as a, h5py.File(tmp_path / "cut.h5", "r") as b:
        for name in ("queries", "nearest", "toolkit_stream/keys", "toolkit_stream/pos", "toolkit_stream/has_gauss",
                     "toolkit_stream/cached_gaussian"):
            assert a[name][()].tobytes() == b[name][()].tobytes(), name
        assert (b.attrs["stream"], b.attrs["batch_size"], b.attrs["save_every"]) == ("toolkit", 32, SAVE_EVERY)
    with open_cache(whole, features_path=toolkit_files[0]) as reader:
        queries, _ = reader.read(0, 40 * 32)
    X = formats.load_features(toolkit_files[0]).features
    expected = global_numpy_draws(X, iterations=40, batch=32, save_every=SAVE_EVERY, preview=2000 - 1333)
    assert queries.tobytes() == expected.tobytes()


def test_verify_regenerates_toolkit_rows_and_catches_a_changed_one(tmp_path, toolkit_files):
    path = toolkit_cache(toolkit_files, tmp_path / "tk.h5", nqueries=40 * 32)
    assert verify_cache(path, features_path=toolkit_files[0], sample=200, seed=0).rows_regenerated == 200
    with h5py.File(path, "r+") as handle:
        handle["queries"][700, 3] += 1e-3
    with pytest.raises(CorruptCache, match="queries row 700 differs"):
        verify_cache(path, features_path=toolkit_files[0], sample=1280, seed=0)


@pytest.mark.parametrize("change, message", [
    (dict(exact_toolkit=False), r"holds the toolkit script's query stream \(build-cache --exact-toolkit\); pass "
                                r"--exact-toolkit or run: mm-projector build-cache .* --force$"),
    (dict(batch_size=16), r"was drawn for the toolkit stream with batch_size 32, this run has 16; run: .*"
                          r"--exact-toolkit --database \S+ --batch-size 16 --save-every 10 --force$"),
    (dict(save_every=20), r"with save_every 10, this run has 20"),
    (dict(iterations=60), r"holds 1280 queries of the toolkit stream, this --exact-toolkit run needs 1920"),
])
def test_a_toolkit_cache_drawn_for_other_settings_is_refused(tmp_path, toolkit_files, change, message):
    path = toolkit_cache(toolkit_files, tmp_path / "tk.h5", nqueries=40 * 32)
    config = dataclasses.replace(exact_config(iterations=40), **change)
    with pytest.raises(MismatchedFiles, match=message):
        run(config, toolkit_files, tmp_path / "out", offline_cache=path)
    assert not (tmp_path / "out" / "projector.bin").exists()


def test_a_default_cache_is_refused_by_an_exact_run(tmp_path, toolkit_files):
    build_cache(toolkit_files[0], out=tmp_path / "c.h5", nqueries=2048, chunk_rows=256)
    with pytest.raises(MismatchedFiles, match=r"holds the default query stream, not the toolkit script's that "
                                              r"--exact-toolkit needs; run: .* --exact-toolkit"):
        run(exact_config(), toolkit_files, tmp_path / "out", offline_cache=tmp_path / "c.h5")


def test_a_database_without_range_2_is_refused(tmp_path, toolkit_files):
    two_clips = write_database(tmp_path / "two.bin", 2000, nclips=2)
    files = (*toolkit_files[:2], two_clips)
    with pytest.raises(InvalidFile, match=r"two.bin: has 2 ranges; the toolkit's preview needs range 2"):
        run(exact_config(), files, tmp_path / "out")
    with pytest.raises(InvalidFile, match=r"two.bin: has 2 ranges"):
        toolkit_cache(files, tmp_path / "tk.h5", nqueries=1024)


def cli(*arguments):
    return CliRunner().invoke(main, [str(argument) for argument in arguments])


def test_cli_builds_describes_and_refuses_toolkit_caches(tmp_path, toolkit_files):
    features, _, database = toolkit_files
    out = tmp_path / "tk.h5"
    built = cli("build-cache", "--exact-toolkit", "--features", features, "--database", database, "--queries", 640,
                "--save-every", SAVE_EVERY, "--out", out, "--quiet")
    assert built.exit_code == 0 and built.output.startswith(f"wrote {out}: 640 queries;")
    info = cli("cache-info", out, "--features", features)
    assert f"stream: toolkit (batch 32, save interval {SAVE_EVERY}, preview 667 rows)" in info.output.splitlines()
    again = cli("build-cache", "--exact-toolkit", "--features", features, "--database", database, "--queries", 640,
                "--save-every", 20, "--out", out, "--quiet")
    assert again.exit_code == 1
    assert again.output.startswith(f"Error: {out}: holds the toolkit stream of batch 32, save interval "
                                   f"{SAVE_EVERY}, preview 667 rows, not the toolkit stream of batch 32, save "
                                   "interval 20, preview 667 rows; not replaced without --force; run: ")
    uneven = cli("build-cache", "--exact-toolkit", "--features", features, "--database", database, "--queries", 650,
                 "--out", tmp_path / "other.h5")
    assert uneven.exit_code == 1
    assert uneven.output == ("Error: --queries: --exact-toolkit caches hold whole batches: 650 is not a multiple of "
                             "--batch-size 32 (try 640)\n")


def test_exact_toolkit_selects_the_toolkit_step_on_one_thread_and_refuses_others():
    from motion_matching.projector.config import TrainConfig
    from motion_matching.training.step import resolved_threads
    config = TrainConfig(exact_toolkit=True)
    assert (config.step, resolved_threads(config)) == ("toolkit", 1)
    assert TrainConfig().step == "fast"
    for change in (dict(step="fast"), dict(threads=2), dict(device="cuda")):
        with pytest.raises(ValueError, match="--exact-toolkit runs the toolkit's step on one CPU thread"):
            TrainConfig(exact_toolkit=True, **change)
