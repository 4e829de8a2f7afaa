"""Round trips, runtime equivalence and strict validation of the toolkit's binary files."""
import numpy as np
import pytest
import torch

from motion_matching.errors import WriteFailed
from motion_matching.projector.model import module_to_network, network_to_module
from motion_matching.toolkit import formats

from conftest import TOOLKIT_NETWORKS, shared_fixture

NETWORK_NAMES = ["projector.bin", "stepper.bin", "decompressor.bin"]


def assert_rewrite_identical(path, load, save, tmp_path):
    copy = tmp_path / path.name
    save(copy, load(path))
    assert copy.read_bytes() == path.read_bytes()


@pytest.mark.parametrize("name", NETWORK_NAMES)
def test_toolkit_network_round_trip_is_byte_identical(name, tmp_path):
    assert_rewrite_identical(TOOLKIT_NETWORKS / name, formats.load_network, formats.save_network, tmp_path)


@pytest.mark.parametrize("name", NETWORK_NAMES)
def test_shared_toolkit_network_round_trip_through_torch_is_byte_identical(name, tmp_path):
    path = shared_fixture("toolkit", name)
    copy = tmp_path / name
    formats.save_network(copy, module_to_network(network_to_module(formats.load_network(path))))
    assert copy.read_bytes() == path.read_bytes()


def test_reference_database_round_trip_is_byte_identical(tmp_path):
    path = shared_fixture("reference-features", "database.bin")
    assert_rewrite_identical(path, formats.load_database, formats.save_database, tmp_path)


def test_reference_features_round_trip_is_byte_identical(tmp_path):
    path = shared_fixture("reference-features", "features.bin")
    assert_rewrite_identical(path, formats.load_features, formats.save_features, tmp_path)


def test_latent_round_trip(tmp_path):
    latent = np.random.default_rng(0).standard_normal((7, 32)).astype(np.float32)
    formats.save_latent(tmp_path / "latent.bin", latent)
    assert np.array_equal(formats.load_latent(tmp_path / "latent.bin"), latent)
    assert (tmp_path / "latent.bin").stat().st_size == 8 + latent.size * 4


def runtime_evaluate(network, inputs):
    """The runtime's procedure in float64 numpy: normalise, linear+ReLU layers, last linear, de-normalise."""
    x = (inputs.astype(np.float64) - network.mean_in) / network.std_in
    for index, (weights, bias) in enumerate(network.layers):
        x = x @ weights.astype(np.float64) + bias
        if index < len(network.layers) - 1:
            x = np.maximum(x, 0.0)
    return x * network.std_out + network.mean_out


@pytest.mark.parametrize("name", NETWORK_NAMES)
def test_torch_module_matches_runtime_procedure(name):
    network = formats.load_network(TOOLKIT_NETWORKS / name)
    inputs = (np.random.default_rng(1).standard_normal((64, network.sizes[0])) * network.std_in
              + network.mean_in).astype(np.float32)
    with torch.no_grad():
        outputs = network_to_module(network)(torch.from_numpy(inputs)).numpy()
    expected = runtime_evaluate(network, inputs)
    assert np.abs(outputs - expected).max() <= 1e-5 * max(1.0, np.abs(expected).max())


def test_writes_are_atomic_and_keep_the_old_file_on_failure(tmp_path, monkeypatch):
    path = tmp_path / "latent.bin"
    formats.save_latent(path, np.ones((2, 3), np.float32))
    before = path.read_bytes()

    def write_half_then_fail(stream, header, values, dtype):
        stream.write(b"half a header")
        raise OSError("disk full")

    monkeypatch.setattr(formats, "write_array", write_half_then_fail)
    with pytest.raises(WriteFailed) as raised:
        formats.save_latent(path, np.zeros((5, 3), np.float32))
    assert str(raised.value) == (f"{path}: cannot write it (disk full); the previous file, if any, is untouched")
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["latent.bin"]


def test_written_files_get_ordinary_permissions(tmp_path):
    import os
    mask = os.umask(0o022)
    try:
        formats.save_latent(tmp_path / "latent.bin", np.ones((2, 3), np.float32))
    finally:
        os.umask(mask)
    assert (tmp_path / "latent.bin").stat().st_mode & 0o777 == 0o644
