"""The decompressor's two networks, as the toolkit's ``train_decompressor.py`` builds them.

The compressor (ELU MLP, pose parts -> 512 -> 512 -> 512 -> 32 latent) encodes each frame's pose; the
decompressor (ReLU MLP, 27 features + 32 latent -> 512 -> 338 for 23 bones) decodes features and
latent back into the pose. Both take (batch, window, columns) tensors. ``Autoencoder`` holds the two
and the normalisation vectors, so one state dict (a checkpoint's ``model``) rebuilds everything.
"""
import torch
import torch.nn.functional as F
from torch import nn

from motion_matching.toolkit.formats import Network

HIDDEN = 512  # the toolkit's hidden width


class _WindowMLP(nn.Module):
    """Linear layers ``linear0`` ... applied to every frame of (batch, window, in) tensors."""

    activation = None

    def __init__(self, sizes):
        super().__init__()
        for index, (size_in, size_out) in enumerate(zip(sizes[:-1], sizes[1:])):
            self.add_module(f"linear{index}", nn.Linear(size_in, size_out))
        self.nlayers = len(sizes) - 1

    def layers(self):
        """The linear layers in order (list of ``nn.Linear``)."""
        return [getattr(self, f"linear{index}") for index in range(self.nlayers)]

    def forward(self, x):
        """(batch, window, in) -> (batch, window, out)."""
        nbatch, nwindow = x.shape[:2]
        x = x.reshape([nbatch * nwindow, -1])
        layers = self.layers()
        for layer in layers[:-1]:
            x = self.activation(layer(x))
        return layers[-1](x).reshape([nbatch, nwindow, -1])


class Compressor(_WindowMLP):
    """Pose parts (normalised) -> latent: three ELU hidden layers."""

    activation = staticmethod(F.elu)

    def __init__(self, size_in, size_out, hidden=HIDDEN):
        super().__init__([size_in, hidden, hidden, hidden, size_out])


class Decompressor(_WindowMLP):
    """Features and latent -> pose parts (normalised): one ReLU hidden layer."""

    activation = staticmethod(F.relu)

    def __init__(self, size_in, size_out, hidden=HIDDEN):
        super().__init__([size_in, hidden, size_out])


NORMALISATION = ("compressor_mean_in", "compressor_std_in", "decompressor_mean_in", "decompressor_std_in",
                 "decompressor_mean_out", "decompressor_std_out")


class Autoencoder(nn.Module):
    """The compressor and decompressor, created in that order (the toolkit's draws), and the normalisation."""

    def __init__(self, ncompressed, nfeatures, noutput, *, nlatent=32, hidden=HIDDEN, compressor_hidden=None,
                 nframes=None):
        super().__init__()
        self.compressor = Compressor(ncompressed, nlatent, compressor_hidden or hidden)
        self.decompressor = Decompressor(nfeatures + nlatent, noutput, hidden)
        if nframes is not None:  # each frame's latent, trained directly at a run's end (config.latent_share)
            self.frame_latent = nn.Parameter(torch.zeros(nframes, nlatent))
        self.register_buffer("compressor_mean_in", torch.zeros(ncompressed))
        self.register_buffer("compressor_std_in", torch.ones(ncompressed))
        self.register_buffer("decompressor_mean_in", torch.zeros(nfeatures + nlatent))
        self.register_buffer("decompressor_std_in", torch.ones(nfeatures + nlatent))
        self.register_buffer("decompressor_mean_out", torch.zeros(noutput))
        self.register_buffer("decompressor_std_out", torch.ones(noutput))

    def set_normalisation(self, values):
        """Copy the ``NORMALISATION`` vectors from ``values`` (name -> float32 tensor)."""
        with torch.no_grad():
            for name in NORMALISATION:
                getattr(self, name).copy_(values[name])

    def encode(self, pose):
        """Latent (batch, window, nlatent) of raw pose parts (batch, window, ncompressed)."""
        return self.compressor((pose - self.compressor_mean_in) / self.compressor_std_in)

    def decode(self, features, latent):
        """Raw pose parts (batch, window, noutput) of features and latent (the input normalisation is the
        identity, as in the toolkit, and is left out of the arithmetic as the script leaves it out)."""
        return self.decompressor(torch.cat([features, latent], dim=-1)) * self.decompressor_std_out \
            + self.decompressor_mean_out


def autoencoder_sizes(state_dict):
    """``(ncompressed, nfeatures, noutput, nlatent, hidden, compressor_hidden)`` of an ``Autoencoder`` state
    dict."""
    ncompressed, compressor_hidden = (state_dict["compressor.linear0.weight"].shape[1],
                                      state_dict["compressor.linear0.weight"].shape[0])
    nlatent = state_dict["compressor.linear3.weight"].shape[0]
    hidden = state_dict["decompressor.linear0.weight"].shape[0]
    noutput = state_dict["decompressor.linear1.weight"].shape[0]
    nfeatures = state_dict["decompressor.linear0.weight"].shape[1] - nlatent
    return ncompressed, nfeatures, noutput, nlatent, hidden, compressor_hidden


def autoencoder_from_state_dict(state_dict):
    """An ``Autoencoder`` (CPU, eval mode) holding ``state_dict``."""
    ncompressed, nfeatures, noutput, nlatent, hidden, compressor_hidden = autoencoder_sizes(state_dict)
    frames = state_dict.get("frame_latent")
    module = Autoencoder(ncompressed, nfeatures, noutput, nlatent=nlatent, hidden=hidden,
                         compressor_hidden=compressor_hidden, nframes=None if frames is None else frames.shape[0])
    module.load_state_dict(state_dict)
    return module.eval()


def decompressor_network(module):
    """The runtime's ``decompressor.bin`` contents of ``module`` (an ``Autoencoder``): a ``formats.Network``."""
    def array(tensor):
        return tensor.detach().cpu().numpy().astype("float32")

    layers = [(array(layer.weight.T), array(layer.bias)) for layer in module.decompressor.layers()]
    return Network(array(module.decompressor_mean_in), array(module.decompressor_std_in),
                   array(module.decompressor_mean_out), array(module.decompressor_std_out), layers)
