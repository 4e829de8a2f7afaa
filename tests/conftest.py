"""Shared fixtures: the read-only fixtures beside the project, and small valid toolkit files."""
import pathlib

import numpy as np
import pytest

from motion_matching.toolkit import formats

TESTS = pathlib.Path(__file__).parent
SHARED = TESTS.parent.parent / "shared" / "fixtures"
TOOLKIT_NETWORKS = TESTS / "data" / "toolkit"


def shared_fixture(*parts):
    """Path of a file under ../shared/fixtures, or skip the test saying it is absent."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} is absent: ../shared/fixtures is only beside the project in CI and sessions")
    return path


def random_features(nframes=2000, nfeatures=27, seed=0):
    """Clustered, correlated random features (nframes, nfeatures) float32, shaped like matching features."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((max(nframes // 100, 1), nfeatures))
    walk = np.cumsum(rng.standard_normal((nframes, nfeatures)) * 0.05, axis=0)
    values = centres[rng.integers(0, len(centres), nframes)] + walk - walk.mean(0)
    return values.astype(np.float32)


def write_small_toolkit_files(folder, *, nframes=2000, nlatent=32, seed=0):
    """Write features.bin and latent.bin of ``nframes`` frames into ``folder``; returns their paths."""
    folder = pathlib.Path(folder)
    rng = np.random.default_rng(seed + 1)
    features = random_features(nframes, seed=seed)
    latent = (rng.standard_normal((nframes, nlatent)) * 0.25).astype(np.float32)
    zeros = np.zeros(features.shape[1], np.float32)
    formats.save_features(folder / "features.bin", formats.Features(features, zeros, zeros + 1))
    formats.save_latent(folder / "latent.bin", latent)
    return folder / "features.bin", folder / "latent.bin"


@pytest.fixture
def small_files(tmp_path):
    """(features.bin, latent.bin) paths of 2,000 random frames in a temporary folder."""
    return write_small_toolkit_files(tmp_path)
