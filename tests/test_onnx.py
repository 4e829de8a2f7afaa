"""ONNX export: the graph maps raw queries to raw outputs, agreeing with torch and onnxruntime to 1e-5."""
import sys

import numpy as np
import pytest

from motion_matching.errors import InvalidFile, MotionMatchingError
from motion_matching.projector.export import export_network, load_projector_module
from motion_matching.projector.onnx_export import export_onnx, run_onnx
from motion_matching.toolkit import formats

from conftest import TOOLKIT_NETWORKS
from export_helpers import random_projector, realistic_queries, torch_outputs, write_checkpoint

pytest.importorskip("onnx", reason="ONNX export needs the optional [onnx] extra (onnx)")
pytest.importorskip("onnxruntime", reason="checking ONNX files needs the optional [onnx] extra (onnxruntime)")

TOLERANCE = 1e-5


def assert_close(actual, expected):
    """Within TOLERANCE relative to each output column's largest magnitude (at least 1)."""
    scale = np.maximum(1.0, np.abs(expected).max(axis=0))
    assert np.all(np.abs(actual - expected) <= TOLERANCE * scale), np.abs(actual - expected).max()


@pytest.mark.parametrize("batch", [1, 37])
def test_checkpoint_to_onnx_matches_torch_for_any_batch(tmp_path, batch):
    module = random_projector(seed=batch)
    source = write_checkpoint(tmp_path / "run.pt", module)
    result = export_network(source, tmp_path / "projector.onnx", format="onnx")
    queries = np.random.default_rng(batch).standard_normal((batch, 27)).astype(np.float32) * 2
    (output,) = run_onnx(tmp_path / "projector.onnx", queries)
    assert output.shape == (batch, 59)
    assert_close(output, torch_outputs(module, queries))
    assert result["outputs"] == ["output"] and result["sizes"] == [27, 512, 512, 512, 512, 59]


def test_graph_contains_the_normalisation(tmp_path):
    rng = np.random.default_rng(2)
    mean_in, std_in = rng.normal(size=4), rng.uniform(0.5, 2, 4)
    mean_out, std_out = rng.normal(size=4), rng.uniform(0.5, 2, 4)
    identity = formats.Network(*(v.astype(np.float32) for v in (mean_in, std_in, mean_out, std_out)),
                               [(np.eye(4, dtype=np.float32), np.zeros(4, np.float32))])
    formats.save_network(tmp_path / "identity.bin", identity)
    export_network(tmp_path / "identity.bin", tmp_path / "identity.onnx", format="onnx")
    queries = rng.normal(size=(5, 4)).astype(np.float32)
    (output,) = run_onnx(tmp_path / "identity.onnx", queries)
    assert_close(output, (queries - mean_in) / std_in * std_out + mean_out)


def test_split_names_features_and_latent(tmp_path):
    network = formats.load_network(TOOLKIT_NETWORKS / "projector.bin")
    result = export_network(TOOLKIT_NETWORKS / "projector.bin", tmp_path / "p.onnx", format="onnx", split=True)
    queries = realistic_queries(network, 50)
    features, latent = run_onnx(tmp_path / "p.onnx", queries)
    expected = torch_outputs(load_projector_module(TOOLKIT_NETWORKS / "projector.bin"), queries)
    assert result["outputs"] == ["features", "latent"]
    assert features.shape == (50, 27) and latent.shape == (50, 32)
    assert_close(np.hstack([features, latent]), expected)


def test_split_needs_more_outputs_than_inputs(tmp_path):
    with pytest.raises(InvalidFile, match="cannot split 59 outputs into 59 features and a latent"):
        export_network(TOOLKIT_NETWORKS / "stepper.bin", tmp_path / "s.onnx", format="onnx", split=True)
    assert not (tmp_path / "s.onnx").exists()


def test_missing_onnx_package_gives_install_hint(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "onnx", None)  # makes `import onnx` raise ImportError
    with pytest.raises(MotionMatchingError, match=r"optional package 'onnx': pip install"):
        export_onnx(random_projector(hidden=8), tmp_path / "p.onnx")
    assert not (tmp_path / "p.onnx").exists()
