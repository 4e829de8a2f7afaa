"""Large arrays are memory-mapped; the result and the checks are the same as for small ones."""
import numpy as np
import pytest

from motion_matching import errors
from motion_matching.toolkit import binary_io, formats


@pytest.fixture
def tiny_map_threshold(monkeypatch):
    monkeypatch.setattr(binary_io, "MAP_BYTES", 64)


def test_mapped_reading_gives_the_same_array(tmp_path, tiny_map_threshold):
    latent = np.random.default_rng(0).standard_normal((37, 5)).astype(np.float32)
    formats.save_latent(tmp_path / "latent.bin", latent)
    assert np.array_equal(formats.load_latent(tmp_path / "latent.bin"), latent)


def test_mapped_reading_names_the_first_nan_element(tmp_path, tiny_map_threshold):
    latent = np.zeros((37, 5), np.float32)
    latent[30, 2] = np.nan
    formats.save_latent(tmp_path / "latent.bin", latent)
    with pytest.raises(errors.InvalidFile, match=r"latent holds NaN or Inf \(first at element 152\)"):
        formats.load_latent(tmp_path / "latent.bin")


def test_mapped_arrays_are_private_and_writable(tmp_path, tiny_map_threshold):
    latent = np.ones((37, 5), np.float32)
    formats.save_latent(tmp_path / "latent.bin", latent)
    before = (tmp_path / "latent.bin").read_bytes()
    loaded = formats.load_latent(tmp_path / "latent.bin")
    loaded[:] = 7.0
    assert (tmp_path / "latent.bin").read_bytes() == before
    assert type(loaded) is np.ndarray


def test_mapped_file_replaced_atomically_keeps_the_loaded_values(tmp_path, tiny_map_threshold):
    formats.save_latent(tmp_path / "latent.bin", np.ones((37, 5), np.float32))
    loaded = formats.load_latent(tmp_path / "latent.bin")
    formats.save_latent(tmp_path / "latent.bin", np.zeros((37, 5), np.float32))
    assert (loaded == 1.0).all()
