"""Large arrays are read slab by slab; the result and the checks are the same as for small ones."""
import numpy as np
import pytest

from motion_matching import binary_io, errors, formats


@pytest.fixture
def tiny_slabs(monkeypatch):
    monkeypatch.setattr(binary_io, "SLAB_BYTES", 64)


def test_slab_reading_gives_the_same_array(tmp_path, tiny_slabs):
    latent = np.random.default_rng(0).standard_normal((37, 5)).astype(np.float32)
    formats.save_latent(tmp_path / "latent.bin", latent)
    assert np.array_equal(formats.load_latent(tmp_path / "latent.bin"), latent)


def test_slab_reading_names_the_first_nan_element(tmp_path, tiny_slabs):
    latent = np.zeros((37, 5), np.float32)
    latent[30, 2] = np.nan
    formats.save_latent(tmp_path / "latent.bin", latent)
    with pytest.raises(errors.InvalidFile, match=r"latent holds NaN or Inf \(first at element 152\)"):
        formats.load_latent(tmp_path / "latent.bin")
