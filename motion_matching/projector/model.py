"""The runtime's normalised MLP as a torch module, and its conversion to and from the network layout."""
import numpy as np
import torch
from torch import nn

from motion_matching.toolkit import recipe
from motion_matching.toolkit.formats import Network


class NormalisedMLP(nn.Module):
    """``(relu(...relu(((x - mean_in) / std_in) W0 + b0)...) Wn + bn) * std_out + mean_out``.

    Layers are ``linear0`` ... ``linearN`` as in the toolkit; the normalisation vectors are buffers,
    so a state dict alone rebuilds the network.
    """

    def __init__(self, sizes):
        super().__init__()
        self.sizes = list(sizes)
        self.nlayers = len(self.sizes) - 1
        for index in range(self.nlayers):
            setattr(self, f"linear{index}", nn.Linear(self.sizes[index], self.sizes[index + 1]))
        self.register_buffer("mean_in", torch.zeros(self.sizes[0]))
        self.register_buffer("std_in", torch.ones(self.sizes[0]))
        self.register_buffer("mean_out", torch.zeros(self.sizes[-1]))
        self.register_buffer("std_out", torch.ones(self.sizes[-1]))

    def layers(self):
        return [getattr(self, f"linear{index}") for index in range(self.nlayers)]

    def set_normalisation(self, mean_in, std_in, mean_out, std_out):
        """Copy the four normalisation vectors (array-likes) into the buffers."""
        for name, values in (("mean_in", mean_in), ("std_in", std_in), ("mean_out", mean_out), ("std_out", std_out)):
            getattr(self, name).copy_(torch.as_tensor(np.asarray(values, dtype=np.float32)))

    def forward(self, x):
        """Map raw inputs (..., sizes[0]) to raw outputs (..., sizes[-1])."""
        x = (x - self.mean_in) / self.std_in
        *hidden, last = self.layers()
        for layer in hidden:
            x = torch.relu(layer(x))
        return last(x) * self.std_out + self.mean_out


def projector_sizes(nfeatures, nlatent, *, hidden=recipe.HIDDEN, hidden_layers=recipe.HIDDEN_LAYERS):
    """Layer widths of the toolkit's projector: nfeatures -> hidden x hidden_layers -> nfeatures + nlatent."""
    return [nfeatures] + [hidden] * hidden_layers + [nfeatures + nlatent]


def network_to_module(network):
    """Build a ``NormalisedMLP`` (float32, CPU) holding exactly the values of a ``Network``."""
    module = NormalisedMLP(network.sizes)
    with torch.no_grad():
        module.set_normalisation(network.mean_in, network.std_in, network.mean_out, network.std_out)
        for layer, (weights, bias) in zip(module.layers(), network.layers):
            # the runtime stores (in, out); torch's Linear.weight is (out, in)
            layer.weight.copy_(torch.as_tensor(np.ascontiguousarray(weights.T)))
            layer.bias.copy_(torch.as_tensor(bias))
    return module


def module_to_network(module):
    """Return the ``Network`` (float32 numpy arrays) that a ``NormalisedMLP`` computes."""
    def array(tensor):
        return tensor.detach().cpu().numpy().astype(np.float32)

    layers = [(np.ascontiguousarray(array(layer.weight).T), array(layer.bias)) for layer in module.layers()]
    return Network(array(module.mean_in), array(module.std_in), array(module.mean_out), array(module.std_out), layers)


def module_from_state_dict(state_dict):
    """Rebuild a ``NormalisedMLP`` from its state dict alone (sizes are read from the weights)."""
    count = sum(1 for key in state_dict if key.startswith("linear") and key.endswith(".weight"))
    sizes = [state_dict["linear0.weight"].shape[1]] + [state_dict[f"linear{i}.weight"].shape[0] for i in range(count)]
    module = NormalisedMLP(sizes)
    module.load_state_dict(state_dict)
    return module
