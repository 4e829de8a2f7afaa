"""Database building from clips, and the synthetic locomotion database's properties."""
import pathlib

import numpy as np
import pytest

from motion_matching.data import database_build, features, generate
from motion_matching.data.synthetic import locomotion as synthetic
from motion_matching.errors import InvalidFile
from motion_matching.toolkit import formats, quat, skeleton

NBONES = len(skeleton.BONE_NAMES)


def moving_clip(nframes, *, speed=1.0, seed=0):
    """A clip whose simulation bone walks along +z at ``speed`` m/s while the other bones wobble."""
    rng = np.random.default_rng(seed)
    time = np.arange(nframes) / 60.0
    positions = np.tile(rng.uniform(-0.2, 0.2, (1, NBONES, 3)), (nframes, 1, 1))
    positions[:, 0] = np.stack([np.zeros(nframes), np.zeros(nframes), speed * time], axis=-1)
    angles = 0.3 * np.sin(time[:, None, None] * rng.uniform(1, 3, (1, NBONES, 3)))
    rotations = quat.from_euler(angles + rng.uniform(-1, 1, (1, NBONES, 3)))
    return positions, rotations


def test_build_database_ranges_and_mirrors():
    clips = [moving_clip(30, seed=1), moving_clip(20, seed=2)]
    database = database_build.build_database(clips, mirror=True)
    assert database.range_starts.tolist() == [0, 30, 50, 80]
    assert database.range_stops.tolist() == [30, 50, 80, 100]
    assert database.bone_positions.dtype == np.float32 and database.contact_states.shape == (100, 2)
    left, right = skeleton.LEFT_FOOT, skeleton.RIGHT_FOOT
    np.testing.assert_allclose(database.bone_positions[50:80, right, 0], -clips[0][0][:, left, 0], atol=1e-6)
    expected = clips[0][1][:, left] * np.array([1, 1, -1, -1])
    np.testing.assert_allclose(database.bone_rotations[50:80, right], expected, atol=1e-6)


def test_mirrored_world_positions_are_reflected():
    positions, rotations = moving_clip(10, seed=3)
    mirrored = database_build.mirror_clip(positions, rotations)
    world, _ = quat.forward_kinematics(positions, rotations, skeleton.BONE_PARENTS)
    world_mirrored, _ = quat.forward_kinematics(*mirrored, skeleton.BONE_PARENTS)
    expected = world[:, list(skeleton.MIRROR_INDICES)] * np.array([-1, 1, 1])
    np.testing.assert_allclose(world_mirrored, expected, atol=1e-9)


def test_velocities_are_central_differences_per_range():
    database = database_build.build_database([moving_clip(40, speed=1.5)], mirror=False)
    np.testing.assert_allclose(database.bone_velocities[:, 0, 2], 1.5, atol=1e-5)
    assert not database.contact_states[:, :].all()


def test_contacts_follow_toe_speed_with_majority_filter():
    states = np.array([0, 0, 1, 0, 0, 0, 0, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 0, 0, 0], bool)[:, None]
    filtered = database_build.majority_filter(states, window=6)[:, 0]
    assert not filtered[:5].any()
    assert filtered[9:15].all()


def test_bad_clips_raise_invalid_file_naming_the_clip():
    positions, rotations = moving_clip(10)
    with pytest.raises(InvalidFile, match="walk.bvh: clip has 1 frame"):
        database_build.build_database([(positions[:1], rotations[:1])], names=["walk.bvh"])
    with pytest.raises(InvalidFile, match="clip 0: positions have shape"):
        database_build.build_database([(positions[:, :5], rotations)])
    positions[3, 2, 1] = np.nan
    with pytest.raises(InvalidFile, match="NaN"):
        database_build.build_database([(positions, rotations)])


# --- the synthetic locomotion database --------------------------------------------------------

SMALL_FRAMES = 4000


@pytest.fixture(scope="module")
def small():
    """(database, raw features, normalised features) of a small synthetic database."""
    database = synthetic.generate_synthetic_database(seed=3, nframes=SMALL_FRAMES)
    return database, features.raw_features(database), features.compute_features(database)


def test_synthetic_database_is_valid_and_mirrored(small):
    database, _, _ = small
    formats.validate_database(database, "<synthetic>")
    assert database.nframes == SMALL_FRAMES and database.nbones == NBONES
    nranges = len(database.range_starts)
    assert nranges >= 4 and nranges % 2 == 0
    lengths = database.range_stops - database.range_starts
    np.testing.assert_array_equal(lengths[: nranges // 2], lengths[nranges // 2:])


def test_every_feature_column_varies(small):
    _, _, normalised = small
    stds = normalised.features.std(axis=0)
    assert (stds > 0.1).all(), dict(zip(features.FEATURE_NAMES, stds.round(3)))


def walking(raw):
    return (raw[:, 14] > 1.1) & (raw[:, 14] < 1.9)


def test_contacts_alternate_while_walking(small):
    database, raw, _ = small
    contacts = database.contact_states.astype(bool)
    walk = walking(raw)
    assert walk.sum() > 300
    left, right = contacts[walk, 0], contacts[walk, 1]
    assert 0.4 < left.mean() < 0.75 and 0.4 < right.mean() < 0.75
    assert (left & ~right).mean() > 0.15 and (right & ~left).mean() > 0.15
    onsets = np.count_nonzero(np.diff(contacts[:, 0].astype(np.int8)) == 1)
    assert onsets > SMALL_FRAMES / 60 * 0.4, "too few left-toe plants for a walking and running database"


def test_planted_toes_stand_still(small):
    database, _, _ = small
    world, _ = quat.forward_kinematics(database.bone_positions.astype(np.float64),
                                       database.bone_rotations.astype(np.float64), skeleton.BONE_PARENTS)
    toes = world[:, list(skeleton.CONTACT_BONES)]
    speed = np.linalg.norm(np.diff(toes, axis=0), axis=-1) * 60
    assert np.median(speed[database.contact_states[1:].astype(bool)]) < 0.05
    assert toes[..., 1].min() > -0.01, "toes go through the floor"


def test_trajectory_features_turn_both_ways(small):
    _, raw, _ = small
    direction_x = raw[:, features.FEATURE_NAMES.index("trajectory_direction_60_x")]
    position_x = raw[:, features.FEATURE_NAMES.index("trajectory_position_60_x")]
    assert direction_x.min() < -0.5 and direction_x.max() > 0.5
    assert position_x.min() < -0.5 and position_x.max() > 0.5


def test_walking_and_running_separate_in_hip_velocity(small):
    database, raw, _ = small
    path_speed = np.linalg.norm(database.bone_velocities[:, 0], axis=1)
    hip_speed = np.linalg.norm(raw[:, 12:15], axis=1)
    walk, run, idle = (path_speed > 1.1) & (path_speed < 1.9), path_speed > 3.3, path_speed < 0.05
    assert walk.mean() > 0.1 and run.mean() > 0.05 and idle.mean() > 0.01
    assert np.percentile(hip_speed[walk], 99) < np.percentile(hip_speed[run], 1)
    assert np.percentile(hip_speed[idle], 99) < np.percentile(hip_speed[walk], 1)


def test_same_seed_same_bytes_and_other_seed_differs(tmp_path):
    first = generate.write_toolkit_files(tmp_path / "a", synthetic.generate_synthetic_database(seed=5, nframes=600))
    second = generate.write_toolkit_files(tmp_path / "b", synthetic.generate_synthetic_database(seed=5, nframes=600))
    third = generate.write_toolkit_files(tmp_path / "c", synthetic.generate_synthetic_database(seed=6, nframes=600))
    for name in ("database", "features", "latent"):
        assert pathlib.Path(first[name]).read_bytes() == pathlib.Path(second[name]).read_bytes(), name
        assert pathlib.Path(first[name]).read_bytes() != pathlib.Path(third[name]).read_bytes(), name


def test_too_few_frames_is_refused():
    with pytest.raises(ValueError, match="at least 240 frames"):
        synthetic.generate_synthetic_database(nframes=100)


def test_mirrored_ranges_have_mirrored_features(small):
    database, raw, _ = small
    half = len(database.range_starts) // 2
    original = slice(int(database.range_starts[0]), int(database.range_stops[0]))
    mirrored = slice(int(database.range_starts[half]), int(database.range_stops[half]))
    flip_x = np.array([-1.0, 1.0, 1.0])
    expected = np.concatenate([
        raw[original, 3:6] * flip_x, raw[original, 0:3] * flip_x,     # feet swap sides
        raw[original, 9:12] * flip_x, raw[original, 6:9] * flip_x,
        raw[original, 12:15] * flip_x,
        raw[original, 15:27] * np.tile([-1.0, 1.0], 6),               # (x, z) pairs
    ], axis=1)
    np.testing.assert_allclose(raw[mirrored], expected, atol=2e-4)


def _largest_angular_acceleration(database):
    """Largest frame-to-frame change of any bone's angular velocity within a range, rad/s^2."""
    angular = database.bone_angular_velocities.astype(np.float64)
    return max(np.linalg.norm(np.diff(angular[start:stop], axis=0), axis=-1).max() * 60.0
               for start, stop in zip(database.range_starts, database.range_stops))


def test_synthetic_motion_stays_inside_the_real_envelope():
    """The default synthetic database moves no faster, and spikes no more, than real motion capture.

    Margins: the synthetic set runs faster and turns more sharply than the reference's short loops, so
    10% above its angular speed and acceleration and 25% above its largest feature; the knee flips this
    guards against were single frames at 14 times the reference's angular speed.
    """
    from conftest import shared_fixture
    reference = formats.load_database(shared_fixture("reference-features", "database.bin"))
    reference_features = formats.load_features(shared_fixture("reference-features", "features.bin")).features
    database = synthetic.generate_synthetic_database(seed=0)
    angular_speed = np.linalg.norm(database.bone_angular_velocities, axis=-1)
    reference_speed = np.linalg.norm(reference.bone_angular_velocities, axis=-1).max()
    assert angular_speed.max() <= 1.1 * reference_speed, np.unravel_index(angular_speed.argmax(), angular_speed.shape)
    assert _largest_angular_acceleration(database) <= 1.1 * _largest_angular_acceleration(reference)
    matching = features.compute_features(database).features
    assert np.abs(matching).max() <= 1.25 * np.abs(reference_features).max()
