"""The stepper network as the toolkit's ``train_stepper.py`` builds it: features and latent (59) -> 512 ->
512 -> their velocities (59), ReLU after the hidden layers. ``Stepper`` also holds the normalisation, so
one state dict (a checkpoint's ``model``) rebuilds the runtime's ``stepper.bin``."""
import torch
import torch.nn.functional as F
from torch import nn

from motion_matching.toolkit.formats import Network

HIDDEN = 512  # the toolkit's hidden width
NORMALISATION = ("stepper_mean_in", "stepper_std_in", "stepper_mean_out", "stepper_std_out")


class Stepper(nn.Module):
    """``linear0``..``linear2`` (made in that order: the script's initial draws) and the normalisation."""

    def __init__(self, size, hidden=HIDDEN):
        super().__init__()
        self.linear0 = nn.Linear(size, hidden)
        self.linear1 = nn.Linear(hidden, hidden)
        self.linear2 = nn.Linear(hidden, size)
        for name in NORMALISATION:
            self.register_buffer(name, torch.zeros(size) if "mean" in name else torch.ones(size))

    def forward(self, x):
        """Normalised (B, size) inputs -> normalised (B, size) velocities."""
        x = F.relu(self.linear0(x))
        x = F.relu(self.linear1(x))
        return self.linear2(x)

    def set_normalisation(self, values):
        """Copy the ``NORMALISATION`` vectors from ``values`` (name -> float32 tensor)."""
        with torch.no_grad():
            for name in NORMALISATION:
                getattr(self, name).copy_(values[name])

    def layers(self):
        """The linear layers in order (list of ``nn.Linear``)."""
        return [self.linear0, self.linear1, self.linear2]


def velocities(module, X, Z, forward):
    """The velocities (B, nfeatures + nlatent) the stepper ``module`` predicts from frames ``X`` (B, nfeatures)
    and ``Z`` (B, nlatent), called through ``forward`` (a ``PrecisionForward``), in the script's arithmetic."""
    normalised = (torch.cat([X, Z], dim=-1) - module.stepper_mean_in) / module.stepper_std_in
    return forward(module, normalised) * module.stepper_std_out + module.stepper_mean_out


def stepper_from_state_dict(state_dict):
    """A ``Stepper`` (CPU, eval mode) holding ``state_dict``."""
    hidden, size = state_dict["linear0.weight"].shape
    module = Stepper(size, hidden)
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
