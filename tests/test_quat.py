"""Quaternion maths against rotation matrices and known rotations."""
import numpy as np
import pytest

from motion_matching.toolkit import quat


def random_quats(count, seed=0):
    rng = np.random.default_rng(seed)
    return quat.normalize(rng.standard_normal((count, 4)))


def test_mul_matches_matrix_product():
    a, b = random_quats(50, 1), random_quats(50, 2)
    np.testing.assert_allclose(quat.to_xform(quat.mul(a, b)), quat.to_xform(a) @ quat.to_xform(b), atol=1e-12)


def test_mul_vec_matches_matrix_and_inverse_undoes_it():
    q = random_quats(50)
    v = np.random.default_rng(3).standard_normal((50, 3))
    rotated = quat.mul_vec(q, v)
    np.testing.assert_allclose(rotated, np.einsum("nij,nj->ni", quat.to_xform(q), v), atol=1e-12)
    np.testing.assert_allclose(quat.inv_mul_vec(q, rotated), v, atol=1e-12)


def test_inv_mul_and_mul_inv_give_relative_rotations():
    a, b = random_quats(20, 4), random_quats(20, 5)
    np.testing.assert_allclose(quat.mul(a, quat.inv_mul(a, b)), b, atol=1e-12)
    np.testing.assert_allclose(quat.mul(quat.mul_inv(a, b), b), a, atol=1e-12)


def test_from_angle_axis_quarter_turn_about_y_takes_z_to_x():
    q = quat.from_angle_axis(np.pi / 2, np.array([0.0, 1.0, 0.0]))
    np.testing.assert_allclose(quat.mul_vec(q, np.array([0.0, 0.0, 1.0])), [1.0, 0.0, 0.0], atol=1e-12)


def test_from_euler_composes_in_order():
    angles = np.array([0.3, -0.7, 1.1])
    expected = quat.mul(quat.mul(quat.from_angle_axis(0.3, [0, 0, 1.0]), quat.from_angle_axis(-0.7, [0, 1.0, 0])),
                        quat.from_angle_axis(1.1, [1.0, 0, 0]))
    np.testing.assert_allclose(quat.from_euler(angles, order="zyx"), expected, atol=1e-12)


@pytest.mark.parametrize("angle", [0.0, 1e-9, 0.5, 3.0])
def test_scaled_angle_axis_round_trip(angle):
    axis = np.array([0.6, 0.0, 0.8])
    q = quat.from_angle_axis(angle, axis)
    np.testing.assert_allclose(quat.to_scaled_angle_axis(q), angle * axis, atol=1e-12)
    np.testing.assert_allclose(quat.from_scaled_angle_axis(angle * axis), q, atol=1e-12)


def test_abs_picks_positive_w_and_between_maps_directions():
    q = random_quats(30, 6)
    assert (quat.abs(q)[:, 0] >= 0).all()
    rng = np.random.default_rng(7)
    a, b = quat.normalize(rng.standard_normal((30, 3))), quat.normalize(rng.standard_normal((30, 3)))
    np.testing.assert_allclose(quat.mul_vec(quat.between(a, b), a), b, atol=1e-12)


def test_forward_kinematics_velocities_match_finite_differences():
    parents = (-1, 0, 1)
    rng = np.random.default_rng(8)
    times = np.array([0.5 - 1e-5, 0.5, 0.5 + 1e-5])
    rates = rng.standard_normal((3, 3))
    offsets = rng.standard_normal((3, 3))
    rotations = quat.from_scaled_angle_axis(times[:, None, None] * rates + offsets)
    positions = np.sin(times[:, None, None] * rates * 2 + offsets)
    global_positions, _ = quat.forward_kinematics(positions, rotations, parents)
    velocities = (positions[2] - positions[0]) / 2e-5
    angular = quat.to_scaled_angle_axis(quat.mul_inv(rotations[2], rotations[0])) / 2e-5
    _, global_velocities, _, _ = quat.forward_kinematics_velocities(
        positions[1], velocities, rotations[1], angular, parents)
    np.testing.assert_allclose(global_velocities, (global_positions[2] - global_positions[0]) / 2e-5, atol=1e-5)


def test_from_xform_inverts_to_xform():
    q = quat.abs(random_quats(200, 9))
    q[:4] = [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]
    np.testing.assert_allclose(quat.from_xform(quat.to_xform(q)), q, atol=1e-12)
