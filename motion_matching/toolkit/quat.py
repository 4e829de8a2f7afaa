"""Quaternion maths in the toolkit's convention: unit quaternions as (..., 4) arrays ordered w x y z.

Every function broadcasts over leading axes. Rotations compose like the toolkit's ``quat_mul``:
``mul(parent, child)`` applies ``child`` first, then ``parent``. Angles are in radians.
"""
import numpy as np


def _components(q):
    return q[..., 0], q[..., 1], q[..., 2], q[..., 3]


def mul(a, b):
    """Hamilton product ``a * b``; returns (..., 4) quaternions (w x y z)."""
    aw, ax, ay, az = _components(np.asarray(a))
    bw, bx, by, bz = _components(np.asarray(b))
    return np.stack([
        aw * bw - ax * bx - ay * by - az * bz,
        aw * bx + ax * bw + ay * bz - az * by,
        aw * by - ax * bz + ay * bw + az * bx,
        aw * bz + ax * by - ay * bx + az * bw,
    ], axis=-1)


def inv(q):
    """Inverse (conjugate) of unit quaternions; returns (..., 4)."""
    q = np.asarray(q)
    return q * np.array([1, -1, -1, -1], dtype=q.dtype)


def inv_mul(a, b):
    """``inv(a) * b``: ``b`` expressed in ``a``'s frame; returns (..., 4)."""
    return mul(inv(a), b)


def mul_inv(a, b):
    """``a * inv(b)``: the rotation taking ``b`` to ``a``; returns (..., 4)."""
    return mul(a, inv(b))


def mul_vec(q, v):
    """Rotate vectors (..., 3) by unit quaternions (..., 4); returns (..., 3)."""
    q = np.asarray(q)
    v = np.asarray(v)
    axis = q[..., 1:]
    # v + 2w (u x v) + 2 u x (u x v), the usual expansion of q v q*
    t = 2.0 * cross(axis, v)
    return v + q[..., :1] * t + cross(axis, t)


def inv_mul_vec(q, v):
    """Rotate vectors (..., 3) by the inverse of unit quaternions (..., 4); returns (..., 3)."""
    return mul_vec(inv(q), v)


def normalize(q, eps=1e-8):
    """Scale quaternions (or any vectors) to unit length along the last axis."""
    q = np.asarray(q)
    return q / np.maximum(np.linalg.norm(q, axis=-1, keepdims=True), eps)


def abs(q):  # noqa: A001 - the toolkit's name for this operation
    """Flip quaternions with negative w so each picks the shorter of its two equal rotations."""
    q = np.asarray(q)
    return np.where(q[..., :1] < 0.0, -q, q)


def from_angle_axis(angle, axis):
    """Quaternions (..., 4) rotating by ``angle`` (...) radians about unit ``axis`` (..., 3)."""
    half = 0.5 * np.asarray(angle, dtype=np.float64)[..., None]
    axis = np.asarray(axis, dtype=np.float64)
    return np.concatenate([np.cos(half) * np.ones(axis.shape[:-1] + (1,)), np.sin(half) * axis], axis=-1)


_AXES = {"x": np.array([1.0, 0.0, 0.0]), "y": np.array([0.0, 1.0, 0.0]), "z": np.array([0.0, 0.0, 1.0])}


def from_euler(angles, order="zyx"):
    """Quaternions (..., 4) from Euler angles (..., 3) radians, composed ``q0 * q1 * q2`` in ``order``.

    ``order="zyx"`` means angles[..., 0] about z, then [..., 1] about y, then [..., 2] about x, as
    the product Rz * Ry * Rx (the BVH convention for a channel order Zrotation Yrotation Xrotation).
    """
    angles = np.asarray(angles, dtype=np.float64)
    parts = [from_angle_axis(angles[..., index], _AXES[name]) for index, name in enumerate(order)]
    return mul(mul(parts[0], parts[1]), parts[2])


def log(q, eps=1e-8):
    """Quaternion logarithm: half the rotation vector; returns (..., 3) radians."""
    q = np.asarray(q)
    length = np.linalg.norm(q[..., 1:], axis=-1)
    halfangle = np.arctan2(length, q[..., 0])
    ratio = np.where(length < eps, 1.0, halfangle / np.maximum(length, eps))
    return q[..., 1:] * ratio[..., None]


def exp(v, eps=1e-8):
    """Quaternion exponential of half rotation vectors (..., 3); returns (..., 4)."""
    v = np.asarray(v)
    halfangle = np.linalg.norm(v, axis=-1)
    scale = np.where(halfangle < eps, 1.0, np.sin(halfangle) / np.maximum(halfangle, eps))
    w = np.where(halfangle < eps, 1.0, np.cos(halfangle))
    return np.concatenate([w[..., None], v * scale[..., None]], axis=-1)


def to_scaled_angle_axis(q, eps=1e-8):
    """Rotation vectors (..., 3): axis times angle in radians (twice the log)."""
    return 2.0 * log(q, eps)


def from_scaled_angle_axis(v, eps=1e-8):
    """Quaternions (..., 4) from rotation vectors (..., 3) radians."""
    return exp(0.5 * np.asarray(v), eps)


def between(a, b):
    """Shortest-arc quaternions (..., 4) rotating direction ``a`` (..., 3) onto direction ``b``."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    axis = np.cross(a, b)
    w = np.sqrt(np.sum(a * a, axis=-1) * np.sum(b * b, axis=-1)) + np.sum(a * b, axis=-1)
    return normalize(np.concatenate([w[..., None], axis], axis=-1))


def to_xform(q):
    """Rotation matrices (..., 3, 3) of unit quaternions (..., 4); columns are the rotated axes."""
    q = np.asarray(q)
    w, x, y, z = _components(q)
    return np.stack([
        np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], axis=-1),
        np.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], axis=-1),
        np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], axis=-1),
    ], axis=-2)


def to_euler_zyx(rotations):
    """Euler angles (..., 3) radians (z, y, x) with R = Rz Ry Rx, the BVH Zrotation Yrotation Xrotation order
    (``from_euler``'s inverse for ``order="zyx"``)."""
    matrix = to_xform(rotations)
    z = np.arctan2(matrix[..., 1, 0], matrix[..., 0, 0])
    y = np.arcsin(np.clip(-matrix[..., 2, 0], -1.0, 1.0))
    x = np.arctan2(matrix[..., 2, 1], matrix[..., 2, 2])
    return np.stack([z, y, x], axis=-1)


def forward_kinematics(local_positions, local_rotations, parents):
    """World (global) positions (..., B, 3) and rotations (..., B, 4) from local bone states.

    ``parents`` is a (B,) sequence with -1 for the root and each parent before its children.
    """
    positions = [None] * len(parents)
    rotations = [None] * len(parents)
    for bone, parent in enumerate(parents):
        if parent < 0:
            positions[bone] = local_positions[..., bone, :]
            rotations[bone] = local_rotations[..., bone, :]
        else:
            positions[bone] = mul_vec(rotations[parent], local_positions[..., bone, :]) + positions[parent]
            rotations[bone] = mul(rotations[parent], local_rotations[..., bone, :])
    return np.stack(positions, axis=-2), np.stack(rotations, axis=-2)


def forward_kinematics_velocities(local_positions, local_velocities, local_rotations,
                                  local_angular_velocities, parents, *, bones=None):
    """World positions, velocities, rotations and angular velocities of bones, like the toolkit.

    Inputs are local (..., B, 3/4) arrays; returns four arrays of shapes (..., N, 3), (..., N, 3),
    (..., N, 4) and (..., N, 3) in metres, metres/second, quaternions and radians/second, for the
    N bones listed in ``bones`` (default: all B, in order). Only their ancestors are evaluated.
    """
    bones = list(range(len(parents))) if bones is None else list(bones)
    needed = set()
    for bone in bones:
        while bone >= 0 and bone not in needed:
            needed.add(bone)
            bone = parents[bone]
    states = {}
    for bone in sorted(needed):
        local = (local_positions[..., bone, :], local_velocities[..., bone, :],
                 local_rotations[..., bone, :], local_angular_velocities[..., bone, :])
        parent = parents[bone]
        states[bone] = local if parent < 0 else _child_state(states[parent], *local)
    return tuple(np.stack([states[bone][index] for bone in bones], axis=-2) for index in range(4))


def _child_state(parent, position, velocity, rotation, angular_velocity):
    parent_position, parent_velocity, parent_rotation, parent_angular = parent
    offset = mul_vec(parent_rotation, position)
    return (offset + parent_position,
            parent_velocity + mul_vec(parent_rotation, velocity) + cross(parent_angular, offset),
            mul(parent_rotation, rotation),
            mul_vec(parent_rotation, angular_velocity) + parent_angular)


def cross(a, b):
    """Cross products of vectors (..., 3); returns (..., 3) (faster than np.cross for small last axes)."""
    ax, ay, az = a[..., 0], a[..., 1], a[..., 2]
    bx, by, bz = b[..., 0], b[..., 1], b[..., 2]
    return np.stack([ay * bz - az * by, az * bx - ax * bz, ax * by - ay * bx], axis=-1)


def from_xform(matrices):
    """Unit quaternions (..., 4) with w >= 0 from rotation matrices (..., 3, 3) (columns = rotated axes)."""
    m = np.asarray(matrices, dtype=np.float64)
    m00, m11, m22 = m[..., 0, 0], m[..., 1, 1], m[..., 2, 2]
    # Four candidate formulas, one per largest component, so no division by a small number.
    candidates = np.stack([
        np.stack([1 + m00 + m11 + m22, m[..., 2, 1] - m[..., 1, 2], m[..., 0, 2] - m[..., 2, 0],
                  m[..., 1, 0] - m[..., 0, 1]], axis=-1),
        np.stack([m[..., 2, 1] - m[..., 1, 2], 1 + m00 - m11 - m22, m[..., 0, 1] + m[..., 1, 0],
                  m[..., 0, 2] + m[..., 2, 0]], axis=-1),
        np.stack([m[..., 0, 2] - m[..., 2, 0], m[..., 0, 1] + m[..., 1, 0], 1 - m00 + m11 - m22,
                  m[..., 1, 2] + m[..., 2, 1]], axis=-1),
        np.stack([m[..., 1, 0] - m[..., 0, 1], m[..., 0, 2] + m[..., 2, 0], m[..., 1, 2] + m[..., 2, 1],
                  1 - m00 - m11 + m22], axis=-1),
    ], axis=-2)
    best = np.argmax(np.stack([m00 + m11 + m22, m00, m11, m22], axis=-1), axis=-1)
    chosen = np.take_along_axis(candidates, best[..., None, None], axis=-2)[..., 0, :]
    return abs(normalize(chosen))
