"""Forward kinematics one tree level at a time, for the fast step.

``kinematics.matrix_forward_kinematics`` walks the bones one by one, as the toolkit's script does, so its
roundings are the script's; each bone costs a dozen small tensor operations forward and more backward.
Here every bone of one depth is computed in the same few operations (a 23-bone skeleton has 8 levels, not
22 bones), with the same formulas: the values agree to float rounding, not to the bit, so only the fast
step uses it (``--exact-toolkit`` keeps the script's order).

A bone's state is one (3, 6) matrix, its rotation's three columns then its position, velocity and
angular velocity as columns, so that one product by the parent's rotation turns all six at once. A level's
parents are all in the level before it, so each level gathers from its predecessor alone and the levels
are concatenated once, at the end, in level order (``LevelPlan.order``).
"""
import functools
import typing

import torch


class LevelPlan(typing.NamedTuple):
    """The levels of a skeleton: ``sizes`` (bones per level after the root's), ``parents`` (per level, the
    index of each bone's parent within the level before, or None where that is every bone of it in order),
    ``order`` (int64 tensor: the bones in level order, root first) and ``back`` (its inverse permutation)."""

    sizes: tuple
    parents: tuple
    order: torch.Tensor
    back: torch.Tensor


@functools.lru_cache(maxsize=16)
def level_plan(parents, device="cpu"):
    """The ``LevelPlan`` of ``parents`` (tuple of int, a bone's parent before it) with tensors on ``device``."""
    depth = [0] * len(parents)
    for bone in range(1, len(parents)):
        depth[bone] = depth[parents[bone]] + 1
    levels = [[bone for bone in range(len(parents)) if depth[bone] == level] for level in range(max(depth) + 1)]
    gathers = []
    for previous, bones in zip(levels, levels[1:]):
        where = [previous.index(parents[bone]) for bone in bones]
        gathers.append(None if where == list(range(len(previous))) else torch.tensor(where, device=device))
    order = [bone for level in levels for bone in level]
    return LevelPlan(tuple(len(bones) for bones in levels[1:]), tuple(gathers),
                     torch.tensor(order, device=device), torch.tensor([order.index(bone) for bone in
                                                                        range(len(parents))], device=device))


@functools.lru_cache(maxsize=8)
def _vector_columns(device):
    """(6, 1) float32 on ``device``: 1 for the state columns a parent's own values add to (made once, so a
    GPU step copies nothing from the host)."""
    return torch.tensor([0.0, 0.0, 0.0, 1.0, 1.0, 1.0], device=device)[:, None]


def child_states(parent, local):
    """World states (n, 3, 6, N) of bones with local states ``local`` under parents' world states ``parent``
    (both (n, 3, 6, N))."""
    matrix, _, _, spin_axis = parent.split([3, 1, 1, 1], dim=2)  # splits, not slices: one cat backward
    turned = (matrix[:, :, :, None] * local[:, None]).sum(2)  # every local column in the parent's frame
    offset = turned.split([3, 1, 2], dim=2)[1]
    spin = torch.linalg.cross(spin_axis, offset, dim=1)  # the parent's turning moves the offset
    return turned + parent * _vector_columns(str(parent.device)) + torch.nn.functional.pad(spin, (0, 0, 4, 1))


def level_states(root, inner, plan):
    """World states (B, 3, 6, N) in ``plan.order`` of the root's world state ``root`` (1, 3, 6, N) and the other
    bones' local states ``inner`` (B - 1, 3, 6, N), in ``plan.order`` too. The N poses are the last axis, so
    that every operation runs along contiguous rows of N values rather than over 3 or 6."""
    world = [root]
    for local, where in zip(inner.split(plan.sizes, dim=0), plan.parents):
        world.append(child_states(world[-1] if where is None else world[-1].index_select(0, where), local))
    return torch.cat(world, dim=0)


def level_forward_kinematics(rotations, positions, velocities, angular, parents):
    """World matrices (..., B, 3, 3), positions, velocities, angular velocities (..., B, 3) of local ones, as
    ``kinematics.matrix_forward_kinematics`` (a bone's parent comes before it in ``parents``)."""
    plan = level_plan(tuple(int(parent) for parent in parents), str(positions.device))
    local = torch.cat([rotations, positions[..., None], velocities[..., None], angular[..., None]], dim=-1)
    shape = local.shape
    ordered = local.reshape([-1] + list(shape[-3:])).permute(1, 2, 3, 0).index_select(0, plan.order)
    world = level_states(*ordered.split([1, len(parents) - 1]), plan).index_select(0, plan.back)
    world = world.permute(3, 0, 1, 2).reshape(shape)
    return world[..., :3], world[..., 3], world[..., 4], world[..., 5]
