"""A decompressor run's last iterations (``--latent-share``) train each frame's latent directly, the compressor
frozen: the settings, the batches, the optimiser's partial steps, what the run writes and its exact resume."""
import pytest

torch = pytest.importorskip("torch", reason="the decompressor trains with torch")

from decompressor_helpers import small_run  # noqa: E402

from motion_matching.data import generate  # noqa: E402
from motion_matching.decompressor.batches import WindowBatches  # noqa: E402
from motion_matching.decompressor.config import DecompressorConfig, recipe_config  # noqa: E402
from motion_matching.decompressor.inputs import load_inputs  # noqa: E402
from motion_matching.decompressor.train import train_decompressor  # noqa: E402
from motion_matching.toolkit import formats  # noqa: E402
from motion_matching.training.checkpoint import load_checkpoint  # noqa: E402
from motion_matching.training.run import TrainingInterrupted  # noqa: E402
from motion_matching.training.step import OptimiserStep  # noqa: E402

TUNED = {"latent_share": 0.5, "latent_batch_size": 16}


def test_the_share_sets_where_the_latents_start_and_is_refused_out_of_range_or_with_exact_toolkit():
    assert DecompressorConfig(iterations=20, latent_share=0.25).latent_start == 15
    assert DecompressorConfig(iterations=20).latent_start == 20  # none: the toolkit's run
    assert DecompressorConfig(iterations=1, latent_share=0.9).latent_start == 1  # the compressor trains once
    assert DecompressorConfig(iterations=20, latent_share=0.25).iterations_shape_the_run()
    for share in (1.0, -0.1, float("nan")):
        with pytest.raises(ValueError, match="latent_share"):
            DecompressorConfig(latent_share=share)
    with pytest.raises(ValueError, match="--exact-toolkit trains the compressor to the end"):
        DecompressorConfig(exact_toolkit=True, latent_share=0.1)
    assert recipe_config("toolkit").latent_share == recipe_config("preview").latent_share == 0
    fast = recipe_config("fast")
    assert (fast.latent_start, fast.latent_batch_size) == (36_000, 2048)


def test_batches_switch_to_the_latent_batch_size_at_its_iteration_also_after_a_seek(tmp_path):
    files = generate.generate_files(tmp_path, nframes=1200)
    inputs = load_inputs(files["database"], files["features"])
    source = WindowBatches(inputs, batch_size=4, later_from=2, later_batch_size=6)
    sizes = [len(source.next()[2]) for _ in range(4)]
    assert sizes == [4, 4, 6, 6]
    resumed = WindowBatches(inputs, batch_size=4, later_from=2, later_batch_size=6)
    resumed.seek(3)
    gnd, X, frames = resumed.next()
    assert frames.shape == (6, 2) and X.shape[:2] == (6, 2) and gnd["Ypos"].shape[:2] == (6, 2)
    assert torch.equal(frames[:, 1], frames[:, 0] + 1)
    assert torch.equal(X, inputs.X[frames])


def test_a_partial_fast_step_is_torchs_adamw_step_of_those_parameters_with_each_groups_rate():
    torch.manual_seed(3)
    shared, own = torch.nn.Linear(4, 3), torch.nn.Parameter(torch.randn(5, 3))
    config = DecompressorConfig(lr=0.01)
    groups = [{"params": list(shared.parameters())}, {"params": [own], "lr_scale": 10.0, "weight_decay": 0.0}]
    fast = OptimiserStep(groups, config)
    assert [group["lr"] for group in fast.optimizer.param_groups] == [0.01, pytest.approx(0.1)]
    reference_shared, reference_own = torch.nn.Linear(4, 3), torch.nn.Parameter(own.detach().clone())
    reference_shared.load_state_dict(shared.state_dict())
    reference = OptimiserStep([{"params": list(reference_shared.parameters())},
                               {"params": [reference_own], "lr_scale": 10.0, "weight_decay": 0.0}], config).optimizer
    x = torch.randn(8, 4)
    for index in range(6):
        tuned = index >= 2  # the first two steps train the layer alone, the rest the layer and the table
        before = own.detach().clone()
        loss = (shared(x) - (own[:1] if tuned else 0)).abs().mean()
        fast(loss, list(shared.parameters()) + ([own] if tuned else []))
        if not tuned:
            assert torch.equal(own, before)  # a parameter left out is not moved, nor its state made
        reference.zero_grad(set_to_none=True)
        (reference_shared(x) - (reference_own[:1] if tuned else 0)).abs().mean().backward()
        reference.step()
    assert torch.equal(own, reference_own)
    for mine, theirs in zip(shared.parameters(), reference_shared.parameters()):
        assert torch.equal(mine, theirs)


def _checkpoint(result):
    return load_checkpoint(result.checkpoint_path)["model"]


def test_the_last_iterations_keep_the_compressor_and_write_the_frames_own_latents(tmp_path):
    files, tuned = small_run(tmp_path / "tuned", iterations=20, **TUNED)
    _, plain = small_run(tmp_path / "plain", iterations=10)  # the same first 10 iterations, then it stops
    tuned_model, plain_model = _checkpoint(tuned), _checkpoint(plain)
    for name, value in plain_model.items():
        if name.startswith("compressor."):
            assert torch.equal(tuned_model[name], value), name  # frozen from iteration 10 on
    latent = formats.load_latent(tmp_path / "tuned" / "run" / "latent.bin")
    assert latent.shape == (1200, 32)
    assert torch.equal(torch.from_numpy(latent), tuned_model["frame_latent"])
    compressed = formats.load_latent(tmp_path / "plain" / "run" / "latent.bin")
    assert not (latent == compressed).all()  # the frames' latents moved from the compressor's
    assert not torch.equal(tuned_model["decompressor.linear1.weight"], plain_model["decompressor.linear1.weight"])


@pytest.mark.parametrize("stop_after", [10, 14])  # at the switch, and inside the latent iterations
def test_a_run_stopped_at_or_after_the_switch_continues_to_the_same_bytes(tmp_path, stop_after):
    files, _ = small_run(tmp_path / "straight", iterations=20, **TUNED)
    config = DecompressorConfig(iterations=20, hidden=64, threads=1, **TUNED)

    def stop(step, module):
        if step == stop_after:
            raise KeyboardInterrupt

    paths = {"database_path": files["database"], "features_path": files["features"], "out_dir": tmp_path / "run"}
    with pytest.raises(TrainingInterrupted):
        train_decompressor(config, on_step=stop, **paths)
    assert load_checkpoint(tmp_path / "run" / "decompressor_checkpoint.pt")["step"] == stop_after
    assert train_decompressor(config, **paths).steps == 20
    for name in ("decompressor.bin", "latent.bin"):
        assert (tmp_path / "run" / name).read_bytes() == (tmp_path / "straight" / "run" / name).read_bytes(), name


def test_how_often_the_files_are_written_changes_no_byte_of_the_last_ones(tmp_path):
    # the fast recipe writes them less often than the script: a save draws nothing and trains nothing
    _, rare = small_run(tmp_path / "rare", iterations=20, save_every=50, **TUNED)
    _, often = small_run(tmp_path / "often", iterations=20, save_every=3, **TUNED)
    for name in ("decompressor.bin", "latent.bin"):
        assert (tmp_path / "rare" / "run" / name).read_bytes() == (tmp_path / "often" / "run" / name).read_bytes()


def test_the_latents_iterations_compute_in_their_own_precision_auto_resolved_like_the_runs(tmp_path, monkeypatch):
    from motion_matching.decompressor import train as train_module
    from motion_matching.training.step import native_bfloat16, with_resolved_precision

    with pytest.raises(ValueError, match="latent_precision must be one of float32, bfloat16, auto"):
        DecompressorConfig(latent_precision="half")
    resolved = with_resolved_precision(DecompressorConfig(latent_precision="auto"), torch.device("cpu"))
    assert resolved.latent_precision == ("bfloat16" if native_bfloat16(torch.device("cpu")) else "float32")
    assert with_resolved_precision(DecompressorConfig()).latent_precision is None
    seen = []
    losses = train_module.fast_decompressor_losses

    def recording(module, gnd, X, parents, forward, Zgnd=None):
        seen.append((Zgnd is not None, forward.precision))
        return losses(module, gnd, X, parents, forward, Zgnd=Zgnd)

    monkeypatch.setattr(train_module, "fast_decompressor_losses", recording)
    small_run(tmp_path, iterations=8, precision="bfloat16", latent_precision="float32", **TUNED)
    assert seen == [(False, "bfloat16")] * 4 + [(True, "float32")] * 4


def test_the_latents_windows_reach_the_last_frame_which_the_scripts_windows_never_do(tmp_path):
    files = generate.generate_files(tmp_path, nframes=1200)
    inputs = load_inputs(files["database"], files["features"])
    source = WindowBatches(inputs, batch_size=4096, later_from=1, later_batch_size=4096)
    scripts, latents = source.next()[2], source.next()[2]
    assert scripts.max() == 1198 and scripts.min() == 0  # frame 1199 is in no window of the script's
    assert latents.max() == 1199 and latents.min() == 0
