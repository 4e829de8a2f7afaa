"""Matching features against the toolkit's C++ output on real motion capture (bit for bit), and their rules."""
import dataclasses

import numpy as np
import pytest

from motion_matching.data import database_build, features
from motion_matching.data.synthetic import locomotion as synthetic
from motion_matching.errors import InvalidFile
from motion_matching.toolkit import formats, quat, skeleton

from conftest import shared_fixture


@pytest.fixture(scope="module")
def reference():
    """(database, features) of the reference fixture: real mocap and the toolkit's C++ features."""
    folder = shared_fixture("reference-features")
    return (formats.load_database(folder / "database.bin"), formats.load_features(folder / "features.bin"))


@pytest.mark.parametrize("field", ["features", "offset", "scale"])
def test_features_are_the_toolkit_cpps_bit_for_bit(reference, field):
    database, expected = reference
    computed = getattr(features.compute_features(database), field)
    wanted = getattr(expected, field)
    assert computed.dtype == np.float32 and computed.shape == wanted.shape
    assert np.array_equal(computed, wanted), (
        f"{field}: {(computed != wanted).sum()} values differ, by up to {np.abs(computed - wanted).max()}")


def test_written_features_bin_is_the_toolkit_cpps_byte_for_byte(reference, tmp_path):
    database, _ = reference
    formats.save_features(tmp_path / "features.bin", features.compute_features(database))
    expected = shared_fixture("reference-features", "features.bin").read_bytes()
    assert (tmp_path / "features.bin").read_bytes() == expected


def float32_loop_sum(column, rows):
    """``acc += x / rows`` one frame at a time in float32, as the C++ ``normalize_feature`` adds."""
    total = np.float32(0.0)
    for value in column:
        total = np.float32(total + np.float32(value / np.float32(rows)))
    return total


@pytest.fixture(scope="module")
def small_synthetic():
    """(database, raw features, normalised features) of a 3,000-frame synthetic database."""
    database = synthetic.generate_synthetic_database(seed=5, nframes=3000)
    return database, features.raw_features(database), features.compute_features(database)


def test_offset_is_summed_frame_after_frame_in_float32(small_synthetic):
    _, raw, computed = small_synthetic
    rows = len(raw)
    looped = np.array([float32_loop_sum(raw[:, column], rows) for column in range(27)])
    assert np.array_equal(computed.offset, looped)
    # Other orders round otherwise: numpy's pairwise sum (along a contiguous axis) and a float64 mean.
    pairwise = np.sum(np.ascontiguousarray((raw / np.float32(rows)).T), axis=1, dtype=np.float32)
    assert not np.array_equal(computed.offset, pairwise)
    assert not np.array_equal(computed.offset, raw.astype(np.float64).mean(axis=0).astype(np.float32))


def test_scale_is_the_running_float32_mean_of_column_stds(small_synthetic):
    _, raw, computed = small_synthetic
    rows = len(raw)
    variance = [float32_loop_sum(np.square(raw[:, column] - computed.offset[column]), rows) for column in range(27)]
    for name, first, width in features.GROUPS:
        std = np.float32(0.0)
        for column in range(first, first + width):
            std = np.float32(std + np.float32(np.sqrt(variance[column]) / np.float32(width)))
        weight = np.float32(getattr(features.DEFAULT_WEIGHTS, name))
        assert (computed.scale[first:first + width] == np.float32(std / weight)).all(), name
    assert np.array_equal(computed.features, (raw - computed.offset) / computed.scale)


def test_float32_features_agree_with_float64_kinematics(small_synthetic):
    database, raw, _ = small_synthetic
    assert raw.dtype == np.float32
    arrays = [getattr(database, name).astype(np.float64) for name in
              ("bone_positions", "bone_velocities", "bone_rotations", "bone_angular_velocities")]
    bones = (skeleton.LEFT_FOOT, skeleton.RIGHT_FOOT, skeleton.HIPS)
    positions, velocities, _, _ = quat.forward_kinematics_velocities(
        *arrays, [int(parent) for parent in database.bone_parents], bones=bones)
    inverse = quat.inv(arrays[2][:, skeleton.SIMULATION])
    expected = np.concatenate(
        [quat.mul_vec(inverse, positions[:, index] - arrays[0][:, skeleton.SIMULATION]) for index in (0, 1)]
        + [quat.mul_vec(inverse, velocities[:, index]) for index in (0, 1, 2)], axis=1)
    np.testing.assert_allclose(raw[:, :15], expected, rtol=1e-5, atol=1e-5)


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
