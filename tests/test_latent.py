"""The stand-in latent: shape, scale, decorrelation, determinism, and a user's own latent."""
import numpy as np
import pytest

from motion_matching.data import generate, latent
from motion_matching.data.synthetic import locomotion as synthetic
from motion_matching.errors import MismatchedFiles
from motion_matching.toolkit import formats


@pytest.fixture(scope="module")
def database():
    return synthetic.generate_synthetic_database(seed=1, nframes=1200)


def test_latent_shape_dtype_and_column_scale(database):
    values = latent.compute_latent(database)
    assert values.shape == (1200, 32) and values.dtype == np.float32
    stds = values.std(axis=0)
    assert stds.max() < 0.36 and stds.min() > 0.14
    np.testing.assert_allclose(stds[[0, -1]], latent.LATENT_STD, atol=1e-3)
    np.testing.assert_allclose(values.mean(axis=0), 0.0, atol=1e-4)


def test_latent_columns_are_decorrelated(database):
    correlation = np.corrcoef(latent.compute_latent(database, nlatent=16), rowvar=False)
    np.testing.assert_allclose(correlation, np.eye(16), atol=1e-3)


def test_latent_is_deterministic_and_follows_the_pose(database):
    first = latent.compute_latent(database)
    assert first.tobytes() == latent.compute_latent(database).tobytes()
    neighbours = np.linalg.norm(first[1:] - first[:-1], axis=1).mean()
    random_pairs = np.linalg.norm(first - np.roll(first, 600, axis=0), axis=1).mean()
    assert neighbours < 0.3 * random_pairs, "consecutive frames should have close latents"


def test_too_many_latent_columns_is_refused(database):
    with pytest.raises(ValueError, match="^--nlatent: must be between 1 and"):
        latent.compute_latent(database, nlatent=10_000)


def test_user_latent_frame_count_is_checked(tmp_path):
    path = tmp_path / "mine.bin"
    formats.save_latent(path, np.zeros((10, 4), np.float32))
    assert latent.load_matching_latent(path, 10).shape == (10, 4)
    with pytest.raises(MismatchedFiles, match=r"mine.bin: has 10 frames but the database has 11$"):
        latent.load_matching_latent(path, 11)


def test_write_toolkit_files_refuses_a_latent_of_other_length(database, tmp_path):
    with pytest.raises(MismatchedFiles, match="<latent>: has 5 frames but <database> has 1200"):
        generate.write_toolkit_files(tmp_path, database, latent=np.zeros((5, 32), np.float32))
    assert not any(tmp_path.iterdir())
