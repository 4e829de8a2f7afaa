"""What the projector learns: its normalisation, initialisation, losses, and a held-out evaluation.

Names follow the toolkit's ``train_projector.py``: ``X`` features, ``Z`` latent, ``Xhat`` the noisy
query, ``Xgnd``/``Zgnd`` its searched nearest frame, ``Xtil``/``Ztil`` the network's output.
"""
import typing

import numpy as np
import torch

from motion_matching.errors import InvalidFile
from motion_matching.neighbours.queries import HELD_OUT_SEED, generate_queries
from motion_matching.neighbours.search import make_searcher
from motion_matching.projector.config import TrainConfig
from motion_matching.projector.defaults import HELD_OUT_QUERIES
from motion_matching.projector.model import NormalisedMLP, projector_sizes


class LossTerms(typing.NamedTuple):
    """Scalar tensors: the total and its three weighted terms."""

    loss: torch.Tensor
    xval: torch.Tensor
    zval: torch.Tensor
    dist: torch.Tensor


def normalisation(X, Z, *, path="features.bin"):
    """``(mean_in, std_in, mean_out, std_out)`` float32 numpy vectors, computed as the toolkit does.

    The input is centred per column and divided by the features' single global std (no epsilon is
    added); the output uses per-column mean and std of features then latent.
    """
    nfeatures = X.shape[1]
    X_scale = X.std()
    if not np.isfinite(X_scale) or X_scale == 0:
        raise InvalidFile(path, "all feature values are equal: the input cannot be normalised")
    mean_out = np.hstack([X.mean(axis=0).ravel(), Z.mean(axis=0).ravel()]).astype(np.float32)
    std_out = np.hstack([X.std(axis=0).ravel(), Z.std(axis=0).ravel()]).astype(np.float32)
    mean_in = np.hstack([X.mean(axis=0).ravel()]).astype(np.float32)
    std_in = np.hstack([X_scale.repeat(nfeatures)]).astype(np.float32)
    return mean_in, std_in, mean_out, std_out


def make_projector(X, Z, config=TrainConfig(), *, path="features.bin"):
    """A freshly initialised projector (CPU, float32) after ``torch.manual_seed(config.seed)``."""
    torch.manual_seed(config.seed)
    sizes = projector_sizes(X.shape[1], Z.shape[1], hidden=config.hidden, hidden_layers=config.hidden_layers)
    module = NormalisedMLP(sizes)
    with torch.no_grad():
        module.set_normalisation(*normalisation(X, Z, path=path))
    return module


def loss_terms(Xhat, Xgnd, Zgnd, Xtil, Ztil, config=TrainConfig()):
    """The projector's loss, as the toolkit writes it: ``LossTerms`` of scalar tensors.

    L1 on features and latent and L1 on the difference of the query's distances to output and
    neighbour, weighted by ``config``'s ``weight_*``. Xhat, Xgnd, Xtil (batch, nfeatures) and Zgnd,
    Ztil (batch, nlatent) are tensors of one floating dtype (training float32, evaluate float64).
    """
    Dgnd = torch.sqrt(torch.sum(torch.square(Xhat - Xgnd), dim=-1))
    Dtil = torch.sqrt(torch.sum(torch.square(Xhat - Xtil), dim=-1))
    loss_xval = torch.mean(config.weight_features * torch.abs(Xgnd - Xtil))
    loss_zval = torch.mean(config.weight_latent * torch.abs(Zgnd - Ztil))
    loss_dist = torch.mean(config.weight_distance * torch.abs(Dgnd - Dtil))
    return LossTerms(loss_xval + loss_zval + loss_dist, loss_xval, loss_zval, loss_dist)


def projector_losses(module, Xhat, Xgnd, Zgnd, config=TrainConfig()):
    """``loss_terms`` of ``module``'s output on one batch (``module``: the network, or any callable giving its output).

    Xhat, Xgnd (batch, nfeatures) and Zgnd (batch, nlatent) are float32 tensors on the module's device.
    """
    nfeatures = Xhat.shape[1]
    output = module(Xhat)
    return loss_terms(Xhat, Xgnd, Zgnd, output[:, :nfeatures], output[:, nfeatures:], config)


def held_out_loss(module, features, latent, *, nqueries=HELD_OUT_QUERIES, seed=HELD_OUT_SEED,
                  config=TrainConfig(), searcher=None):
    """The training loss of ``module`` on ``nqueries`` fresh queries of stream ``seed``.

    ``features`` (F, n) and ``latent`` (F, L) are float32 arrays; neighbours come from ``searcher``
    (default: a BallTree). Returns a dict of floats: ``loss``, ``xval``, ``zval``, ``dist``.
    """
    X = np.ascontiguousarray(features, dtype=np.float32)
    Z = np.ascontiguousarray(latent, dtype=np.float32)
    Xhat, _ = generate_queries(X, seed=seed, start=0, stop=nqueries)
    searcher = searcher if searcher is not None else make_searcher(X, backend="balltree")
    nearest = searcher.nearest(Xhat)
    device = module.mean_in.device
    with torch.no_grad():
        terms = projector_losses(module, torch.from_numpy(Xhat).to(device), torch.from_numpy(X[nearest]).to(device),
                                 torch.from_numpy(Z[nearest]).to(device), config)
    return {name: float(value) for name, value in terms._asdict().items()}
