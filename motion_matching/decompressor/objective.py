"""What the decompressor learns: the toolkit's whole loss, term by term, with its weights.

For a batch of windows (``batch`` (B, W) frame indices), the compressor encodes the ground-truth pose
``Zgnd = compressor(pose)``; the decompressor decodes ``Ytil = decompressor(X, Zgnd)``; the root bone is
taken from the ground truth, forward kinematics gives world and character space, and the loss is the
weighted L1 of local (``loc_*``), character-space (``chr_*``) and finite-difference velocity
(``lvel_*``, ``cvel_*``) terms plus three latent regularisers (``sreg`` L1, ``lreg`` L2, ``vreg`` L1 of
the latent's velocity). The arithmetic follows ``train_decompressor.py`` operation by operation (the
same tensors, in the same order), so its gradients are the script's to the bit.
"""
import typing

import torch

from motion_matching.decompressor import kinematics as kin
from motion_matching.decompressor.inputs import CHARACTER_PARTS, POSE_PARTS

DT = 1.0 / 60.0  # the toolkit's frame time (s)
WEIGHTS = {"loc_pos": 75.0, "loc_txy": 10.0, "loc_vel": 10.0, "loc_ang": 1.25, "loc_rvel": 2.0, "loc_rang": 2.0,
           "loc_extra": 2.0, "chr_pos": 15.0, "chr_xfm": 5.0, "chr_vel": 2.0, "chr_ang": 0.75, "lvel_pos": 10.0,
           "lvel_rot": 1.75, "cvel_pos": 2.0, "cvel_rot": 0.75, "sreg": 0.1, "lreg": 0.1, "vreg": 0.01}


class LossTerms(typing.NamedTuple):
    """Scalar tensors: the total, then the 18 weighted terms in the script's order."""

    loss: torch.Tensor
    loc_pos: torch.Tensor
    loc_txy: torch.Tensor
    loc_vel: torch.Tensor
    loc_ang: torch.Tensor
    loc_rvel: torch.Tensor
    loc_rang: torch.Tensor
    loc_extra: torch.Tensor
    chr_pos: torch.Tensor
    chr_xfm: torch.Tensor
    chr_vel: torch.Tensor
    chr_ang: torch.Tensor
    lvel_pos: torch.Tensor
    lvel_rot: torch.Tensor
    cvel_pos: torch.Tensor
    cvel_rot: torch.Tensor
    sreg: torch.Tensor
    lreg: torch.Tensor
    vreg: torch.Tensor


def compressor_input(gnd, shape):
    """The compressor's raw input (*shape, columns): every pose part of the frames in ``gnd`` (name -> tensor
    of shape (*shape, ...)), the non-root bones of the per-bone ones, side by side in the script's order."""
    parts = [gnd[name][..., 1:, :].reshape(shape + [-1]) if name.endswith("pos") or name.endswith("vel")
             or name.endswith("ang") else gnd[name][..., 1:, :, :].reshape(shape + [-1])
             for name in POSE_PARTS + CHARACTER_PARTS]
    parts += [gnd[name].reshape(shape + [-1]) for name in ("Yrvel", "Yrang", "Yextra")]
    return torch.cat(parts, dim=-1)


def split_output(Ytil, nbones):
    """The decoded pose parts of ``Ytil`` (B, W, columns): a dict of (B, W, nbones-1, ...) tensors and the
    root's (B, W, 3) velocities and (B, W, 2) contacts, sliced in the script's order."""
    nbatch, nwindow, inner = Ytil.shape[0], Ytil.shape[1], nbones - 1
    parts = {}
    for name, start, stop, shape in (("pos", 0, 3, [inner, 3]), ("txy", 3, 9, [inner, 3, 2]),
                                     ("vel", 9, 12, [inner, 3]), ("ang", 12, 15, [inner, 3])):
        parts[name] = Ytil[:, :, start * inner:stop * inner].reshape([nbatch, nwindow] + shape)
    for name, start, stop in (("rvel", 0, 3), ("rang", 3, 6), ("extra", 6, 8)):
        parts[name] = Ytil[:, :, 15 * inner + start:15 * inner + stop].reshape([nbatch, nwindow, stop - start])
    return parts


def _character_space(matrices, positions, velocities, angular):
    # the root's matrix is sliced afresh for each use, as in the script (the same autograd graph)
    return (kin.inv_compose(matrices[:, :, 0:1], matrices),
            kin.inv_rotate(matrices[:, :, 0:1], positions - positions[:, :, 0:1]),
            kin.inv_rotate(matrices[:, :, 0:1], velocities), kin.inv_rotate(matrices[:, :, 0:1], angular))


def _delta(values):
    return (values[:, 1:] - values[:, :-1]) / DT


def _l1(weight, a, b):
    return torch.mean(weight * torch.abs(a - b))


def decompressor_losses(module, gnd, X, parents, forward, *, Zgnd=None,
                        kinematics=kin.matrix_forward_kinematics):
    """The ``LossTerms`` of ``module`` (an ``Autoencoder``) on the windows ``gnd`` (name -> (B, W, ...)
    ground-truth tensors) with features ``X`` (B, W, n); ``forward(fn, *inputs)`` calls a network (its
    arithmetic's precision). ``Zgnd`` (B, W, nlatent): the latent to decode (default: the compressor's of
    ``gnd``, as in training). ``kinematics``: the forward kinematics (the script's bone-by-bone order by
    default; ``level_kinematics.level_forward_kinematics`` gives the same to float rounding; the fast step's
    loss is ``fast_objective.fast_decompressor_losses``). Also returns the latent ``Zgnd``."""
    if Zgnd is None:
        Zgnd = forward(module.encode, compressor_input(gnd, list(X.shape[:2])))
    Ytil = forward(module.decode, X, Zgnd)
    til = split_output(Ytil, len(parents))
    for name in ("pos", "txy", "vel", "ang"):  # the root bone comes from the ground truth
        root = gnd["Y" + name][:, :, 0:1]
        til[name] = torch.cat([root, til[name]], dim=2)
    world = kinematics(kin.matrix_from_two_columns(til["txy"]), til["pos"], til["vel"], til["ang"], parents)
    Qtil_xfm, Qtil_pos, Qtil_vel, Qtil_ang = _character_space(*world)
    deltas = {"Ygnd_dpos": _delta(gnd["Ypos"]), "Ygnd_drot": _delta(gnd["Ytxy"]), "Qgnd_dpos": _delta(gnd["Qpos"]),
              "Qgnd_drot": _delta(gnd["Qxfm"]), "Ytil_dpos": _delta(til["pos"]), "Ytil_drot": _delta(til["txy"]),
              "Qtil_dpos": _delta(Qtil_pos), "Qtil_drot": _delta(Qtil_xfm)}
    Zdgnd = _delta(Zgnd)
    terms = [_l1(WEIGHTS["loc_" + name], gnd["Y" + name], til[name]) for name in ("pos", "txy", "vel", "ang")]
    terms += [_l1(WEIGHTS["loc_" + name], gnd["Y" + name], til[name]) for name in ("rvel", "rang", "extra")]
    terms += [_l1(WEIGHTS["chr_pos"], gnd["Qpos"], Qtil_pos), _l1(WEIGHTS["chr_xfm"], gnd["Qxfm"], Qtil_xfm),
              _l1(WEIGHTS["chr_vel"], gnd["Qvel"], Qtil_vel), _l1(WEIGHTS["chr_ang"], gnd["Qang"], Qtil_ang)]
    terms += [_l1(WEIGHTS["lvel_pos"], deltas["Ygnd_dpos"], deltas["Ytil_dpos"]),
              _l1(WEIGHTS["lvel_rot"], deltas["Ygnd_drot"], deltas["Ytil_drot"]),
              _l1(WEIGHTS["cvel_pos"], deltas["Qgnd_dpos"], deltas["Qtil_dpos"]),
              _l1(WEIGHTS["cvel_rot"], deltas["Qgnd_drot"], deltas["Qtil_drot"])]
    terms += [torch.mean(WEIGHTS["sreg"] * torch.abs(Zgnd)), torch.mean(WEIGHTS["lreg"] * torch.square(Zgnd)),
              torch.mean(WEIGHTS["vreg"] * torch.abs(Zdgnd))]
    loss = terms[0]
    for term in terms[1:]:
        loss = loss + term
    return LossTerms(loss, *terms), Zgnd
