"""Forward kinematics one tree level at a time, for the fast step.

``kinematics.matrix_forward_kinematics`` walks the bones one by one, as the toolkit's script does, so its
roundings are the script's; each bone costs a dozen small tensor operations forward and more backward.
Here every bone of one depth is computed in the same operations (a 23-bone skeleton has 8 levels, not
22 bones), with the same formulas: the values agree to float rounding, not to the bit, so only the fast
step uses it (``--exact-toolkit`` keeps the script's order).
"""
import functools

import torch


@functools.lru_cache(maxsize=8)
def _levels(parents):
    """The bones (tuple of index tuples) of each depth after the root's, for ``parents`` (tuple of int)."""
    depth = [0] * len(parents)
    for bone in range(1, len(parents)):
        depth[bone] = depth[parents[bone]] + 1
    return tuple(tuple(bone for bone in range(len(parents)) if depth[bone] == level)
                 for level in range(1, max(depth) + 1))


def level_forward_kinematics(rotations, positions, velocities, angular, parents):
    """World matrices (..., B, 3, 3), positions, velocities, angular velocities (..., B, 3) of local ones, as
    ``kinematics.matrix_forward_kinematics`` (a bone's parent comes before it in ``parents``)."""
    parents = tuple(int(parent) for parent in parents)
    order = [0]  # the bones in the order their world values are concatenated
    world = [rotations[..., :1, :, :], positions[..., :1, :], velocities[..., :1, :], angular[..., :1, :]]
    for bones in _levels(parents):
        where = torch.tensor([order.index(parents[bone]) for bone in bones], device=positions.device)
        local = torch.tensor(bones, device=positions.device)
        rot, pos, vel, ang = (values.index_select(-3 if values.dim() == rotations.dim() else -2, where)
                              for values in world)
        local_rot = rotations.index_select(-3, local)
        local_vectors = torch.stack([positions.index_select(-2, local), velocities.index_select(-2, local),
                                     angular.index_select(-2, local)], dim=-1)
        turned = torch.matmul(rot, local_vectors)  # (..., n, 3, 3): the three local vectors, rotated, as columns
        new = [torch.matmul(rot, local_rot), turned[..., 0] + pos,
               turned[..., 1] + torch.cross(ang, turned[..., 0], dim=-1) + vel, turned[..., 2] + ang]
        world = [torch.cat([old, added], dim=-3 if old.dim() == rotations.dim() else -2)
                 for old, added in zip(world, new)]
        order.extend(bones)
    back = torch.tensor([order.index(bone) for bone in range(len(parents))], device=positions.device)
    return (world[0].index_select(-3, back), world[1].index_select(-2, back), world[2].index_select(-2, back),
            world[3].index_select(-2, back))
