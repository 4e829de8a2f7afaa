"""Database building from clips (ranges, mirroring, velocities, contacts)."""
import numpy as np
import pytest

from motion_matching import database_build, quat, skeleton
from motion_matching.errors import InvalidFile

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
