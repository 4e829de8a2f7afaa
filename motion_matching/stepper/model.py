"""The stepper network as the toolkit's ``train_stepper.py`` builds it: features and latent (59) -> 512 ->
512 -> their velocities (59), ReLU after the hidden layers. ``Stepper`` also holds the normalisation, so
one state dict (a checkpoint's ``model``) rebuilds the runtime's ``stepper.bin``.

Given a rank, the middle layer trains as two factors (512 -> rank -> 512, nothing between them) whose product
is the runtime's 512 x 512 layer: a rollout's matrix products shrink with the rank, and stepper.bin keeps the
toolkit's layout."""
import typing

import torch
import torch.nn.functional as F
from torch import nn

from motion_matching.toolkit.formats import Network

HIDDEN = 512  # the toolkit's hidden width
NORMALISATION = ("stepper_mean_in", "stepper_std_in", "stepper_mean_out", "stepper_std_out")


class Layer(typing.NamedTuple):
    """A linear layer's ``weight`` (out, in) and ``bias`` (out) tensors, as ``nn.Linear`` holds them."""

    weight: torch.Tensor
    bias: torch.Tensor


class Stepper(nn.Module):
    """``linear0``..``linear2`` (made in that order: the script's initial draws) and the normalisation. With
    ``middle_rank``, ``linear1`` is replaced by ``linear1_down`` (hidden -> rank, no bias) and ``linear1_up``
    (rank -> hidden), starting as the script's drawn ``linear1`` truncated to that rank."""

    def __init__(self, size, hidden=HIDDEN, middle_rank=None):
        super().__init__()
        self.linear0 = nn.Linear(size, hidden)
        self.linear1 = nn.Linear(hidden, hidden)
        self.linear2 = nn.Linear(hidden, size)
        for name in NORMALISATION:
            self.register_buffer(name, torch.zeros(size) if "mean" in name else torch.ones(size))
        self.middle_rank = middle_rank
        if middle_rank is not None:
            self._factor_middle(middle_rank)

    def _factor_middle(self, rank):
        """Replace ``linear1`` by its best rank-``rank`` factors (truncated SVD, singular values split evenly)."""
        full = self.linear1
        self.linear1_down = nn.Linear(full.in_features, rank, bias=False)
        self.linear1_up = nn.Linear(rank, full.out_features)
        with torch.no_grad():
            U, S, Vh = torch.linalg.svd(full.weight)
            root = S[:rank].sqrt()
            self.linear1_down.weight.copy_(root[:, None] * Vh[:rank])
            self.linear1_up.weight.copy_(U[:, :rank] * root)
            self.linear1_up.bias.copy_(full.bias)
        del self.linear1

    def forward(self, x):
        """Normalised (B, size) inputs -> normalised (B, size) velocities."""
        x = F.relu(self.linear0(x))
        if self.middle_rank is None:
            x = F.relu(self.linear1(x))
        else:
            x = F.relu(self.linear1_up(self.linear1_down(x)))
        return self.linear2(x)

    def set_normalisation(self, values):
        """Copy the ``NORMALISATION`` vectors from ``values`` (name -> float32 tensor)."""
        with torch.no_grad():
            for name in NORMALISATION:
                getattr(self, name).copy_(values[name])

    def layers(self):
        """The runtime's linear layers in order: ``nn.Linear``s, the factored middle one multiplied out into a
        detached ``Layer``."""
        if self.middle_rank is None:
            return [self.linear0, self.linear1, self.linear2]
        middle = Layer((self.linear1_up.weight @ self.linear1_down.weight).detach(), self.linear1_up.bias.detach())
        return [self.linear0, middle, self.linear2]


def velocities(module, X, Z, forward):
    """The velocities (B, nfeatures + nlatent) the stepper ``module`` predicts from frames ``X`` (B, nfeatures)
    and ``Z`` (B, nlatent), called through ``forward`` (a ``PrecisionForward``), in the script's arithmetic."""
    normalised = (torch.cat([X, Z], dim=-1) - module.stepper_mean_in) / module.stepper_std_in
    return forward(module, normalised) * module.stepper_std_out + module.stepper_mean_out


def stepper_from_state_dict(state_dict):
    """A ``Stepper`` (CPU, eval mode) holding ``state_dict`` (its middle layer factored where the state's is)."""
    hidden, size = state_dict["linear0.weight"].shape
    factored = "linear1_down.weight" in state_dict
    module = Stepper(size, hidden, middle_rank=state_dict["linear1_down.weight"].shape[0] if factored else None)
    module.load_state_dict(state_dict)
    return module.eval()


def stepper_from_network(network):
    """A ``Stepper`` (CPU, float32, eval mode) computing exactly the ``formats.Network`` ``network`` (a
    stepper.bin: three layers, ``size -> hidden -> hidden -> size``; the caller checks the shapes)."""
    size, hidden = network.sizes[0], network.sizes[1]
    module = Stepper(size, hidden)
    with torch.no_grad():
        for layer, (weights, bias) in zip(module.layers(), network.layers):
            # the runtime stores (in, out); torch's Linear.weight is (out, in)
            layer.weight.copy_(torch.from_numpy(weights.T.copy()))
            layer.bias.copy_(torch.from_numpy(bias.copy()))
        for name, values in zip(NORMALISATION, (network.mean_in, network.std_in, network.mean_out, network.std_out)):
            getattr(module, name).copy_(torch.from_numpy(values.copy()))
    return module.eval()


def stepper_network(module):
    """The runtime's ``stepper.bin`` contents of ``module`` (a ``Stepper``): a ``formats.Network``."""
    def array(tensor):
        return tensor.detach().cpu().numpy().astype("float32")

    layers = [(array(layer.weight.T), array(layer.bias)) for layer in module.layers()]
    return Network(*(array(getattr(module, name)) for name in NORMALISATION), layers)
