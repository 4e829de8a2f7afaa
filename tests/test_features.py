"""Matching features against the toolkit's C++ output on real motion capture, and their rules."""
import dataclasses

import numpy as np
import pytest

from motion_matching.data import database_build, features
from motion_matching.errors import InvalidFile
from motion_matching.toolkit import formats

from conftest import shared_fixture

TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def reference():
    """(database, features) of the reference fixture: real mocap and the toolkit's C++ features."""
    folder = shared_fixture("reference-features")
    return (formats.load_database(folder / "database.bin"), formats.load_features(folder / "features.bin"))


@pytest.mark.parametrize("field", ["features", "offset", "scale"])
def test_features_match_toolkit_cpp(reference, field):
    database, expected = reference
    computed = features.compute_features(database)
    error = np.abs(getattr(computed, field) - getattr(expected, field)).max()
    assert error < TOLERANCE, f"{field} differs from the toolkit's by {error}"


def test_scale_uses_population_std(reference):
    database, expected = reference
    raw = features.raw_features(database)
    feet = raw[:, 0:3]
    population = feet.std(axis=0, ddof=0).mean() / 0.75
    sample = feet.std(axis=0, ddof=1).mean() / 0.75
    assert abs(expected.scale[0] - population) < 1e-5
    assert abs(expected.scale[0] - sample) > 1e-4


def test_build_database_reproduces_reference_velocities(reference):
    database, _ = reference
    clips = [(database.bone_positions[start:stop], database.bone_rotations[start:stop])
             for start, stop in zip(database.range_starts, database.range_stops)]
    rebuilt = database_build.build_database(clips, mirror=False)
    np.testing.assert_allclose(rebuilt.bone_velocities, database.bone_velocities, atol=1e-4)
    np.testing.assert_allclose(rebuilt.bone_angular_velocities, database.bone_angular_velocities, atol=1e-3)


def test_trajectory_indices_clamp_to_range_end(reference):
    database, _ = reference
    indices = features.trajectory_indices(database, 60)
    first_stop = int(database.range_stops[0])
    assert indices[0] == min(60, first_stop - 1)
    assert indices[first_stop - 1] == first_stop - 1
    assert indices[first_stop] == min(first_stop + 60, int(database.range_stops[1]) - 1)


def test_weights_change_only_scale_of_their_group(reference):
    database, _ = reference
    default = features.compute_features(database)
    heavier = features.compute_features(database, weights=dataclasses.replace(
        features.DEFAULT_WEIGHTS, hip_velocity=2.0))
    np.testing.assert_allclose(heavier.scale[12:15], default.scale[12:15] / 2, rtol=1e-6)
    np.testing.assert_allclose(np.delete(heavier.features, range(12, 15), 1),
                               np.delete(default.features, range(12, 15), 1))


def test_feature_names_and_groups_cover_27_columns():
    assert len(features.FEATURE_NAMES) == 27
    covered = sorted(column for _, first, width in features.GROUPS for column in range(first, first + width))
    assert covered == list(range(27))


def test_parse_weights_reads_five_numbers_and_refuses_others():
    assert features.parse_weights("1,2,3,4,5") == features.FeatureWeights(1, 2, 3, 4, 5)
    with pytest.raises(ValueError, match="expected 5 comma-separated numbers"):
        features.parse_weights("1,2")
    with pytest.raises(ValueError, match="above zero"):
        features.parse_weights("1,2,0,4,5")


def test_constant_group_raises_naming_the_source(reference):
    database, _ = reference
    raw = features.raw_features(database)
    raw[:, 12:15] = 1.0
    with pytest.raises(InvalidFile, match="db.bin: feature group.s. hip_velocity do not vary"):
        features.normalise(raw, source="db.bin")
