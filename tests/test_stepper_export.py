"""A stepper checkpoint exports to the runtime's .bin; tools/nnet_eval.c agrees with torch on it; the
runtime layout is the toolkit fixture's."""
import numpy as np
import pytest
import torch
from click.testing import CliRunner
from stepper_helpers import small_run

from motion_matching.cli import main
from motion_matching.projector import c_evaluator
from motion_matching.toolkit import formats
from motion_matching.training.checkpoint import load_checkpoint
from motion_matching.training.step import PrecisionForward

from conftest import shared_fixture

TOLERANCE = 1e-5


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    return small_run(tmp_path_factory.mktemp("stepper"))


def torch_velocities(checkpoint_path, X, Z):
    """The trained stepper's velocities (F, 59) float32, computed by torch from the checkpoint's model."""
    from motion_matching.stepper.model import stepper_from_state_dict, velocities
    module = stepper_from_state_dict(load_checkpoint(checkpoint_path)["model"])
    with torch.no_grad():
        return velocities(module, torch.from_numpy(X), torch.from_numpy(Z), PrecisionForward("float32", "cpu")).numpy()


def test_export_of_the_checkpoint_is_the_runs_stepper_bin(trained, tmp_path):
    _, result = trained
    out = tmp_path / "exported.bin"
    done = CliRunner().invoke(main, ["export", result.checkpoint_path, "--out", str(out)])
    assert done.exit_code == 0, done.output
    assert done.output.startswith(f"wrote {out}: bin, 59 -> 64 -> 64 -> 59, ")
    assert out.read_bytes() == open(result.network_path, "rb").read()


def test_stepper_bin_has_the_toolkit_fixtures_layout(trained):
    fixture = formats.load_network(shared_fixture("toolkit", "stepper.bin"))
    assert fixture.sizes == [59, 512, 512, 59]  # 27 features + 32 latent -> 512 -> 512 -> their velocities
    ours = formats.load_network(trained[1].network_path)
    assert ours.sizes[0] == fixture.sizes[0] and ours.sizes[-1] == fixture.sizes[-1] and len(ours.layers) == 3
    assert np.unique(ours.std_in[:27]).size == 1 and np.unique(ours.std_in[27:]).size == 1  # one scale each
    assert np.unique(fixture.std_in[:27]).size == 1 and np.unique(fixture.std_in[27:]).size == 1


def test_c_evaluator_agrees_with_torch_on_the_stepper(trained, tmp_path):
    if c_evaluator.find_compiler() is None:
        pytest.skip("no C compiler (cc or $CC) on this machine: the C reference evaluator cannot be built")
    files, result = trained
    executable = c_evaluator.build_c_evaluator(tmp_path, flags=("-std=c99", "-O2", "-Wall", "-Werror"))
    X, Z = formats.load_features_and_latent(files["features"], files["latent"])
    X = X.features
    expected = torch_velocities(result.checkpoint_path, X, Z)
    actual = c_evaluator.c_network_outputs(executable, result.network_path, np.hstack([X, Z]), workdir=tmp_path)
    scale = np.maximum(1.0, np.abs(expected).max(axis=0))
    assert actual.shape == expected.shape == (len(X), 59)
    assert np.all(np.abs(actual - expected) <= TOLERANCE * scale), np.abs(actual - expected).max()


def test_onnx_export_agrees_with_torch(trained, tmp_path):
    pytest.importorskip("onnx", reason="ONNX export needs the optional onnx package")
    pytest.importorskip("onnxruntime", reason="checking the ONNX graph needs onnxruntime")
    from motion_matching.projector.onnx_export import run_onnx
    files, result = trained
    out = tmp_path / "stepper.onnx"
    done = CliRunner().invoke(main, ["export", result.checkpoint_path, "--out", str(out)])
    assert done.exit_code == 0, done.output
    features, Z = formats.load_features_and_latent(files["features"], files["latent"])
    expected = torch_velocities(result.checkpoint_path, features.features, Z)
    (actual,) = run_onnx(out, np.hstack([features.features, Z]))
    assert np.allclose(actual, expected, rtol=1e-5, atol=1e-5)
