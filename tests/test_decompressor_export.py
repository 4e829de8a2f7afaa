"""A decompressor checkpoint exports to the runtime's .bin and ONNX; tools/nnet_eval.c agrees with torch on it."""
import numpy as np
import pytest
import torch
from click.testing import CliRunner
from decompressor_helpers import small_run

from motion_matching.cli import main
from motion_matching.decompressor.evaluate import RuntimeDecompressor
from motion_matching.projector import c_evaluator
from motion_matching.toolkit import formats

from conftest import shared_fixture

TOLERANCE = 1e-5


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    folder = tmp_path_factory.mktemp("decompressor")
    return small_run(folder)


def decoded(network, X, Z):
    """torch's decompressor outputs (F, columns) float32 for features X and latent Z (F, ...)."""
    with torch.no_grad():
        module = RuntimeDecompressor(network).eval()
        return module.decode(torch.from_numpy(X)[None], torch.from_numpy(Z)[None])[0].numpy()


def test_export_of_the_checkpoint_is_the_runs_decompressor_bin(trained, tmp_path):
    _, result = trained
    out = tmp_path / "exported.bin"
    done = CliRunner().invoke(main, ["export", result.checkpoint_path, "--out", str(out)])
    assert done.exit_code == 0, done.output
    assert done.output.startswith(f"wrote {out}: bin, 59 -> 64 -> 338, ")
    assert out.read_bytes() == open(result.network_path, "rb").read()


def test_decompressor_bin_has_the_toolkit_fixtures_layout(trained):
    fixture = formats.load_network(shared_fixture("toolkit", "decompressor.bin"))
    assert fixture.sizes == [59, 512, 338]  # 27 features + 32 latent -> 512 -> 22 bones x 15 + 6 + 2
    ours = formats.load_network(trained[1].network_path)
    assert ours.sizes[0] == fixture.sizes[0] and ours.sizes[-1] == fixture.sizes[-1]
    assert np.all(ours.mean_in == 0) and np.all(ours.std_in == 1) and np.all(fixture.std_in == 1)


def test_onnx_export_agrees_with_torch(trained, tmp_path):
    pytest.importorskip("onnx", reason="ONNX export needs the optional onnx package")
    pytest.importorskip("onnxruntime", reason="checking the ONNX graph needs onnxruntime")
    from motion_matching.projector.onnx_export import run_onnx
    files, result = trained
    out = tmp_path / "decompressor.onnx"
    done = CliRunner().invoke(main, ["export", result.checkpoint_path, "--out", str(out)])
    assert done.exit_code == 0, done.output
    X = formats.load_features(files["features"]).features
    Z = formats.load_latent(result.network_path.replace("decompressor.bin", "latent.bin"))
    expected = decoded(formats.load_network(result.network_path), X, Z)
    (actual,) = run_onnx(out, np.hstack([X, Z]))
    assert np.allclose(actual, expected, rtol=1e-5, atol=1e-5)


def test_c_evaluator_agrees_with_torch_on_the_decompressor(trained, tmp_path):
    if c_evaluator.find_compiler() is None:
        pytest.skip("no C compiler (cc or $CC) on this machine: the C reference evaluator cannot be built")
    files, result = trained
    executable = c_evaluator.build_c_evaluator(tmp_path, flags=("-std=c99", "-O2", "-Wall", "-Werror"))
    X = formats.load_features(files["features"]).features
    Z = formats.load_latent(result.network_path.replace("decompressor.bin", "latent.bin"))
    expected = decoded(formats.load_network(result.network_path), X, Z)
    actual = c_evaluator.c_network_outputs(executable, result.network_path, np.hstack([X, Z]), workdir=tmp_path)
    scale = np.maximum(1.0, np.abs(expected).max(axis=0))
    assert actual.shape == expected.shape == (len(X), 338)
    assert np.all(np.abs(actual - expected) <= TOLERANCE * scale), np.abs(actual - expected).max()


def test_a_narrower_compressor_leaves_the_runtime_decompressor_its_width_and_exports_the_same_bytes(tmp_path):
    _, result = small_run(tmp_path, hidden=64, compressor_hidden=16, iterations=3)
    state = torch.load(result.checkpoint_path, weights_only=False)["model"]
    assert state["compressor.linear1.weight"].shape == (16, 16) and state["decompressor.linear0.weight"].shape[0] == 64
    assert formats.load_network(result.network_path).sizes == [59, 64, 338]
    out = tmp_path / "exported.bin"
    done = CliRunner().invoke(main, ["export", result.checkpoint_path, "--out", str(out)])
    assert done.exit_code == 0, done.output
    assert out.read_bytes() == open(result.network_path, "rb").read()


def test_a_run_that_trained_its_frames_latents_exports_the_same_bytes(tmp_path):
    _, result = small_run(tmp_path, iterations=6, latent_share=0.5)
    assert torch.load(result.checkpoint_path, weights_only=False)["model"]["frame_latent"].shape == (1200, 32)
    out = tmp_path / "exported.bin"
    done = CliRunner().invoke(main, ["export", result.checkpoint_path, "--out", str(out)])
    assert done.exit_code == 0, done.output
    assert out.read_bytes() == open(result.network_path, "rb").read()
