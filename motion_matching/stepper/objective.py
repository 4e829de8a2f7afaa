"""The stepper's rollout and losses, as the toolkit's ``train_stepper.py`` computes them.

From each window's first frame the stepper predicts velocities, integrates them over one frame (``DT``)
and steps again from its own output, for the window's remaining frames. The loss compares the rollout
with the database: L1 of the values and of the velocities (frame differences / ``DT``) of features and
latent, weighted as the script weights them.
"""
import typing

import torch

from motion_matching.stepper.inputs import DT
from motion_matching.stepper.model import velocities

WEIGHTS = {"xval": 2.0, "zval": 7.5, "xvel": 0.2, "zvel": 0.5}  # the toolkit's


class LossTerms(typing.NamedTuple):
    """The weighted loss terms (0-d tensors) of one batch; ``loss`` is their sum."""

    loss: torch.Tensor
    xval: torch.Tensor
    zval: torch.Tensor
    xvel: torch.Tensor
    zvel: torch.Tensor


def next_frame(module, X, Z, forward):
    """``(X, Z)`` one frame on: frames ``X`` (B, nfeatures) and ``Z`` (B, nlatent) plus the velocities
    ``module`` predicts from them, integrated over ``DT``."""
    output = velocities(module, X, Z, forward)
    return X + DT * output[:, :X.shape[-1]], Z + DT * output[:, X.shape[-1]:]


def rollout(module, X0, Z0, *, frames, forward, advance=next_frame):
    """Step ``module`` from ``X0`` (B, nfeatures) and ``Z0`` (B, nlatent) for ``frames - 1`` frames with
    ``advance`` (``next_frame`` or a compiled form of it); returns ``(Xtil, Ztil)`` (B, frames, ...), the
    first frame ``X0``/``Z0`` themselves."""
    Xtil, Ztil = [X0], [Z0]
    for _ in range(1, frames):
        X, Z = advance(module, Xtil[-1], Ztil[-1], forward)
        Xtil.append(X)
        Ztil.append(Z)
    return torch.stack(Xtil, dim=1), torch.stack(Ztil, dim=1)


def frame_velocities(values):
    """(B, W - 1, n) changes per second between consecutive frames of ``values`` (B, W, n)."""
    return (values[:, 1:] - values[:, :-1]) / DT


def stepper_losses(module, Xgnd, Zgnd, forward, advance=next_frame):
    """``(LossTerms, (Xtil, Ztil))`` of the rollout (frames stepped by ``advance``) over windows ``Xgnd``
    (B, W, nfeatures) and ``Zgnd`` (B, W, nlatent)."""
    # the first frames copied out of the windows: one memory layout whatever the window, for a compiled advance
    X0, Z0 = Xgnd[:, 0].contiguous(), Zgnd[:, 0].contiguous()
    Xtil, Ztil = rollout(module, X0, Z0, frames=Xgnd.shape[1], forward=forward, advance=advance)
    # every velocity before any loss term: autograd sums the gradients reaching Xtil and Ztil in the order
    # of the operations that made them, so this order gives the script's gradients to the last bit
    Xgnd_vel, Zgnd_vel, Xtil_vel, Ztil_vel = (frame_velocities(values) for values in (Xgnd, Zgnd, Xtil, Ztil))
    xval = torch.mean(WEIGHTS["xval"] * torch.abs(Xgnd - Xtil))
    zval = torch.mean(WEIGHTS["zval"] * torch.abs(Zgnd - Ztil))
    xvel = torch.mean(WEIGHTS["xvel"] * torch.abs(Xgnd_vel - Xtil_vel))
    zvel = torch.mean(WEIGHTS["zvel"] * torch.abs(Zgnd_vel - Ztil_vel))
    return LossTerms(xval + zval + xvel + zvel, xval, zval, xvel, zvel), (Xtil, Ztil)
