"""The fast step's loss: ``objective.decompressor_losses``'s terms to float rounding, in fewer operations.

The script's loss is some forty small L1 means; here they come from two reductions, each of a difference
and of the difference of its finite differences over the window:

- the local terms (``loc_*``, ``lvel_*``) compare the network's output ``Ytil`` (B, W, columns) with the
  ground truth laid out as it is (the compressor's input holds those columns), so no part is sliced out;
  the root bone, taken from the ground truth in the script, differs by zero and only counts in the means;
- the character-space terms (``chr_*``, ``cvel_*``) compare bone states (``level_kinematics``: matrix,
  position, velocity and angular velocity as the six columns of one tensor) computed by forward
  kinematics from a root of identity matrix, zero position and the root's velocities in its own frame:
  in exact arithmetic the script's ``inv_rotate(root, world)`` values, without the world ones.

Each reduction gives a sum per column, and one product by a fixed matrix of weight / count gives the terms.
"""
import functools

import torch

from motion_matching.decompressor import kinematics as kin
from motion_matching.decompressor.level_kinematics import level_plan, level_states
from motion_matching.decompressor.objective import DT, WEIGHTS, LossTerms, compressor_input

LOCAL_PARTS = (("loc_pos", 3), ("loc_txy", 6), ("loc_vel", 3), ("loc_ang", 3))  # per non-root bone, in Ytil
ROOT_PARTS = (("loc_rvel", 3), ("loc_rang", 3), ("loc_extra", 2))  # then these, once per frame
TERMS = LossTerms._fields[1:16]  # the terms made from the column sums (the latent's three follow)


@functools.lru_cache(maxsize=16)
def _term_matrix(nbones, nbatch, nwindow, device):
    """(4 sums' columns, 15) float32: what each column sum adds to each term, weight / count (and / DT for a
    finite difference); rows: local columns, their differences, state columns, their differences."""
    inner, frames, steps = nbones - 1, nbatch * nwindow, nbatch * (nwindow - 1)
    ncolumns = 15 * inner + 8
    matrix = torch.zeros(2 * ncolumns + 12, len(TERMS), dtype=torch.float64)
    start = 0
    for name, width in LOCAL_PARTS + ROOT_PARTS:
        per_frame = width * (nbones if name in dict(LOCAL_PARTS) else 1)
        stop = start + width * (inner if name in dict(LOCAL_PARTS) else 1)
        matrix[start:stop, TERMS.index(name)] = WEIGHTS[name] / (frames * per_frame)
        difference = {"loc_pos": "lvel_pos", "loc_txy": "lvel_rot"}.get(name)
        if difference:
            matrix[ncolumns + start:ncolumns + stop, TERMS.index(difference)] = WEIGHTS[difference] / (
                steps * per_frame * DT)
        start = stop
    states = 2 * ncolumns
    for name, columns, width in (("chr_xfm", slice(0, 3), 9), ("chr_pos", slice(3, 4), 3),
                                 ("chr_vel", slice(4, 5), 3), ("chr_ang", slice(5, 6), 3)):
        rows = list(range(states + columns.start, states + columns.stop))
        matrix[rows, TERMS.index(name)] = WEIGHTS[name] / (frames * nbones * width)
        difference = {"chr_xfm": "cvel_rot", "chr_pos": "cvel_pos"}.get(name)
        if difference:
            matrix[[row + 6 for row in rows], TERMS.index(difference)] = WEIGHTS[difference] / (
                steps * nbones * width * DT)
    return matrix.to(device=device, dtype=torch.float32)


def _unit(vectors):
    # the script's formula; torch.linalg.vector_norm over a middle axis is many times slower
    return vectors / torch.sqrt(torch.sum(torch.square(vectors), dim=1, keepdim=True))


def _local_states(Ytil, nbones):
    """The non-root bones' local states (nbones - 1, 3, 6, B * W) of the network's output ``Ytil`` (B, W, columns)."""
    inner = nbones - 1
    columns = Ytil.reshape(-1, Ytil.shape[-1]).t().contiguous()  # the poses last, as level_states computes
    pos, txy, vel, ang, _ = columns.split([3 * inner, 6 * inner, 3 * inner, 3 * inner, 8])
    first, last = txy.reshape(inner, 3, 2, -1).unbind(2)
    third = _unit(torch.linalg.cross(first, last, dim=1))
    second = _unit(torch.linalg.cross(third, first, dim=1))
    vectors = [part.reshape(inner, 3, -1) for part in (pos, vel, ang)]
    return torch.stack([first, second, third] + vectors, dim=2)


def _root_states(gnd):
    """The root's character-space state (1, 3, 6, B * W): identity matrix, zero position, and its velocity and
    angular velocity turned into its own frame (its matrix made from its two columns, as the script does)."""
    root = kin.matrix_from_two_columns(gnd["Ytxy"][:, :, 0])
    spins = torch.stack([gnd["Yvel"][:, :, 0], gnd["Yang"][:, :, 0]], dim=-1)
    fixed = torch.eye(3, 4, dtype=spins.dtype, device=spins.device).expand(list(spins.shape[:2]) + [3, 4])
    states = torch.cat([fixed, torch.matmul(root.transpose(-1, -2), spins)], dim=-1)
    return states.reshape(-1, 3, 6).permute(1, 2, 0)[None]


def _character_truth(gnd, order):
    """The ground truth's character-space states (nbones, 3, 6, B * W), bones in ``order``."""
    truth = torch.cat([gnd["Qxfm"], gnd["Qpos"][..., None], gnd["Qvel"][..., None], gnd["Qang"][..., None]], dim=-1)
    return truth.reshape([-1] + list(truth.shape[2:])).permute(1, 2, 3, 0).index_select(0, order)


def _column_sums(truth, estimate, dims, window):
    """Sums over ``dims`` of ``|truth - estimate|`` and of the difference of their finite differences along
    axis ``window`` (differenced apart, as the script does, so a constant truth keeps its exact zeros)."""
    steps = torch.diff(truth, dim=window) - torch.diff(estimate, dim=window)
    return torch.cat([(truth - estimate).abs().sum(dims), steps.abs().sum(dims)])


def fast_decompressor_losses(module, gnd, X, parents, forward, *, Zgnd=None):
    """The ``LossTerms`` of ``module`` on the windows ``gnd`` with features ``X``, as
    ``objective.decompressor_losses`` computes them (same arguments) to float rounding; also returns ``Zgnd``."""
    nbones, (nbatch, nwindow) = len(parents), X.shape[:2]
    plan = level_plan(tuple(int(parent) for parent in parents), str(X.device))
    pose = compressor_input(gnd, [nbatch, nwindow])
    if Zgnd is None:
        Zgnd = forward(module.encode, pose)
    Ytil = forward(module.decode, X, Zgnd)
    Ygnd = torch.cat([pose[..., :15 * (nbones - 1)], pose[..., -8:]], dim=-1)  # the output's columns
    inner = _local_states(Ytil, nbones).index_select(0, plan.order[1:] - 1)
    states = level_states(_root_states(gnd), inner, plan)
    windows = (nbatch, nwindow)
    sums = torch.cat([_column_sums(Ygnd, Ytil, (0, 1), 1),
                      _column_sums(_character_truth(gnd, plan.order).unflatten(-1, windows),
                                   states.unflatten(-1, windows), (0, 1, 3, 4), -1)])
    terms = torch.matmul(sums, _term_matrix(nbones, nbatch, nwindow, str(X.device)))
    regularisers = [torch.mean(WEIGHTS["sreg"] * torch.abs(Zgnd)), torch.mean(WEIGHTS["lreg"] * torch.square(Zgnd)),
                    torch.mean(WEIGHTS["vreg"] * torch.abs(torch.diff(Zgnd, dim=1) / DT))]
    loss = terms.sum() + regularisers[0] + regularisers[1] + regularisers[2]
    return LossTerms(loss, *terms.unbind(), *regularisers), Zgnd
