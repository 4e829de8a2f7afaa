"""Forward kinematics as the toolkit's decompressor script computes it, to the last bit.

Two halves, each in the term order of the toolkit's Python modules (``quat.py`` for the database's
quaternions in numpy float32, ``txform.py`` for the network's rotation matrices in torch), because
``decompressor.bin`` and ``latent.bin`` are only byte-identical to the script's when every rounding
is: ``toolkit/quat.py`` (this project's general quaternion module) sums some terms in another order.
Quaternions are (..., 4) w x y z; matrices (..., 3, 3) with the rotated axes as columns.
"""
import numpy as np
import torch

_CONJUGATE = np.array([1, -1, -1, -1], dtype=np.float32)


def _cross(a, b):
    """``a x b`` over the last axis (numpy), component by component as ``quat._fast_cross``."""
    a0, a1, a2 = a[..., 0:1], a[..., 1:2], a[..., 2:3]
    b0, b1, b2 = b[..., 0:1], b[..., 1:2], b[..., 2:3]
    return np.concatenate([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], axis=-1)


def quat_inv(q):
    """Conjugates of unit quaternions (..., 4)."""
    return _CONJUGATE * q


def quat_mul(a, b):
    """``a * b`` (..., 4), each component summed in the toolkit's order (``b``'s terms lead)."""
    a0, a1, a2, a3 = a[..., 0:1], a[..., 1:2], a[..., 2:3], a[..., 3:4]
    b0, b1, b2, b3 = b[..., 0:1], b[..., 1:2], b[..., 2:3], b[..., 3:4]
    return np.concatenate([b0 * a0 - b1 * a1 - b2 * a2 - b3 * a3,
                           b0 * a1 + b1 * a0 - b2 * a3 + b3 * a2,
                           b0 * a2 + b1 * a3 + b2 * a0 - b3 * a1,
                           b0 * a3 - b1 * a2 + b2 * a1 + b3 * a0], axis=-1)


def quat_mul_vec(q, v):
    """Vectors (..., 3) rotated by quaternions (..., 4): ``v + w t + u x t`` with ``t = 2 u x v``."""
    axis = q[..., 1:]
    twice = 2.0 * _cross(axis, v)
    return v + q[..., 0][..., np.newaxis] * twice + _cross(axis, twice)


def quat_inv_mul(a, b):
    """``inv(a) * b`` (..., 4)."""
    return quat_mul(quat_inv(a), b)


def quat_inv_mul_vec(q, v):
    """Vectors (..., 3) rotated by the inverse of ``q``."""
    return quat_mul_vec(quat_inv(q), v)


def _matrix_terms(q):
    w, x, y, z = q[..., 0:1], q[..., 1:2], q[..., 2:3], q[..., 3:4]
    x2, y2, z2 = x + x, y + y, z + z
    return {"xx": x * x2, "yy": y * y2, "zz": z * z2, "xy": x * y2, "xz": x * z2, "yz": y * z2,
            "wx": w * x2, "wy": w * y2, "wz": w * z2}


def quat_to_matrix(q, *, columns=3):
    """Rotation matrices (..., 3, ``columns``) of unit quaternions (..., 4): 3 for the whole matrix,
    2 for its first two columns (the network's rotation encoding)."""
    t = _matrix_terms(q)
    rows = [[1.0 - (t["yy"] + t["zz"]), t["xy"] - t["wz"], t["xz"] + t["wy"]],
            [t["xy"] + t["wz"], 1.0 - (t["xx"] + t["zz"]), t["yz"] - t["wx"]],
            [t["xz"] - t["wy"], t["yz"] + t["wx"], 1.0 - (t["xx"] + t["yy"])]]
    return np.concatenate([np.concatenate(row[:columns], axis=-1)[..., np.newaxis, :] for row in rows], axis=-2)


def quat_forward_kinematics(rotations, positions, velocities, angular, parents):
    """World rotations, positions, velocities and angular velocities (F, B, 4 / 3) of local bone states."""
    world = {"rot": [rotations[..., :1, :]], "pos": [positions[..., :1, :]], "vel": [velocities[..., :1, :]],
             "ang": [angular[..., :1, :]]}
    for bone in range(1, len(parents)):
        parent, rot, pos, vel, ang = (int(parents[bone]), world["rot"], world["pos"], world["vel"], world["ang"])
        local = slice(bone, bone + 1)
        pos.append(quat_mul_vec(rot[parent], positions[..., local, :]) + pos[parent])
        rot.append(quat_mul(rot[parent], rotations[..., local, :]))
        vel.append(quat_mul_vec(rot[parent], velocities[..., local, :])
                   + _cross(ang[parent], quat_mul_vec(rot[parent], positions[..., local, :])) + vel[parent])
        ang.append(quat_mul_vec(rot[parent], angular[..., local, :]) + ang[parent])
    return tuple(np.concatenate(world[name], axis=-2) for name in ("rot", "pos", "vel", "ang"))


def _torch_cross(a, b):
    # every component slices its operands afresh, as the script does: the autograd graph, and with it the
    # order in which gradients are summed, is then the script's
    return torch.cat([a[..., 1:2] * b[..., 2:3] - a[..., 2:3] * b[..., 1:2],
                      a[..., 2:3] * b[..., 0:1] - a[..., 0:1] * b[..., 2:3],
                      a[..., 0:1] * b[..., 1:2] - a[..., 1:2] * b[..., 0:1]], dim=-1)


def _unit(v):
    return v / torch.sqrt(torch.sum(torch.square(v), dim=-1))[..., None]


def matrix_from_two_columns(xy):
    """Rotation matrices (..., 3, 3) from their first two columns (..., 3, 2), made orthonormal
    (Gram-Schmidt by cross products, the first column kept; each use of a column is its own slice)."""
    third = _unit(_torch_cross(xy[..., 0], xy[..., 1]))
    second = _unit(_torch_cross(third, xy[..., 0]))
    return torch.cat([xy[..., 0][..., None], second[..., None], third[..., None]], dim=-1)


def rotate(matrix, v):
    """Vectors (..., 3) rotated by matrices (..., 3, 3)."""
    return torch.matmul(matrix, v[..., None])[..., 0]


def inv_rotate(matrix, v):
    """Vectors (..., 3) rotated by the inverse (transpose) of matrices (..., 3, 3)."""
    return torch.matmul(matrix.transpose(-1, -2), v[..., None])[..., 0]


def inv_compose(a, b):
    """``a^T b`` (..., 3, 3): ``b`` in ``a``'s frame."""
    return torch.matmul(a.transpose(-1, -2), b)


def matrix_forward_kinematics(rotations, positions, velocities, angular, parents):
    """World matrices (..., B, 3, 3), positions, velocities, angular velocities (..., B, 3) in torch."""
    rot, pos, vel, ang = ([rotations[..., :1, :, :]], [positions[..., :1, :]], [velocities[..., :1, :]],
                          [angular[..., :1, :]])
    for bone in range(1, len(parents)):
        parent, local = int(parents[bone]), slice(bone, bone + 1)
        pos.append(rotate(rot[parent], positions[..., local, :]) + pos[parent])
        rot.append(torch.matmul(rot[parent], rotations[..., local, :, :]))
        vel.append(rotate(rot[parent], velocities[..., local, :])
                   + torch.cross(ang[parent], rotate(rot[parent], positions[..., local, :]), dim=-1) + vel[parent])
        ang.append(rotate(rot[parent], angular[..., local, :]) + ang[parent])
    return torch.cat(rot, dim=-3), torch.cat(pos, dim=-2), torch.cat(vel, dim=-2), torch.cat(ang, dim=-2)
