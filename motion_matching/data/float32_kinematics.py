"""The toolkit C++'s float32 quaternion and vector arithmetic, one rounding for one rounding.

``quat.h``, ``vec.h`` and ``database.h`` work in float32, one operation at a time, left to right;
rounding depends on the order of every sum, so each formula here keeps the C++'s order and
grouping (numpy does not fuse a multiply and an add, and neither does the toolkit's build).
Vectors are tuples ``(x, y, z)`` and quaternions ``(w, x, y, z)`` of equal-shaped float32 arrays,
one element per frame: the per-frame C++ loops become one numpy operation per C++ operation.
"""
import numpy as np

TWO = np.float32(2.0)


def components(array):
    """Tuple of the last axis's float32 components of ``array`` (..., 3 or 4)."""
    array = np.asarray(array, dtype=np.float32)
    return tuple(np.ascontiguousarray(array[..., index]) for index in range(array.shape[-1]))


def add(a, b):
    """``a + b`` of two vectors."""
    return tuple(left + right for left, right in zip(a, b))


def sub(a, b):
    """``a - b`` of two vectors."""
    return tuple(left - right for left, right in zip(a, b))


def cross(v, w):
    """Cross product ``v x w``, written as ``vec.h`` writes it."""
    return (v[1] * w[2] - v[2] * w[1], v[2] * w[0] - v[0] * w[2], v[0] * w[1] - v[1] * w[0])


def quat_inv(q):
    """The toolkit's inverse: w negated (the same rotation as the conjugate, other zero signs)."""
    return (-q[0], q[1], q[2], q[3])


def quat_mul(q, p):
    """``q * p`` (``p`` applied first), in ``quat.h``'s term order."""
    qw, qx, qy, qz = q
    pw, px, py, pz = p
    return (pw * qw - px * qx - py * qy - pz * qz,
            pw * qx + px * qw - py * qz + pz * qy,
            pw * qy + px * qz + py * qw - pz * qx,
            pw * qz - px * qy + py * qx + pz * qw)


def quat_mul_vec3(q, v):
    """Rotate ``v`` by ``q``: ``t = 2 (u x v)``, then ``(v + w t) + u x t``."""
    axis = q[1:]
    t = tuple(TWO * value for value in cross(axis, v))
    return add(add(v, tuple(q[0] * value for value in t)), cross(axis, t))


def forward_kinematics_velocity(positions, velocities, rotations, angular_velocities, parents, bone):
    """World (position, velocity, rotation, angular velocity) of ``bone``, like the C++'s recursion.

    Arguments are per-bone lists of component tuples (only ``bone`` and its ancestors are read)
    and the parent list (-1 for the root).
    """
    chain = []
    while bone >= 0:
        chain.append(bone)
        bone = parents[bone]
    root = chain.pop()
    position, velocity = positions[root], velocities[root]
    rotation, angular = rotations[root], angular_velocities[root]
    for bone in reversed(chain):
        offset = quat_mul_vec3(rotation, positions[bone])
        velocity = add(add(velocity, quat_mul_vec3(rotation, velocities[bone])), cross(angular, offset))
        angular = add(quat_mul_vec3(rotation, angular_velocities[bone]), angular)
        position = add(offset, position)
        rotation = quat_mul(rotation, rotations[bone])
    return position, velocity, rotation, angular
