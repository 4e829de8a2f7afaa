"""Export a trained decompressor: its checkpoint's decompressor network in the runtime's layout.

The runtime's ``decompressor.bin`` is a network ``.bin`` like the projector's (ReLU after every layer
but the last; its input normalisation the identity), so once a checkpoint is turned into that
``formats.Network``, ``export`` writes it as ``.bin`` or ONNX the way it writes any network.
"""
from motion_matching.decompressor.model import autoencoder_from_state_dict, decompressor_network
from motion_matching.errors import InvalidFile
from motion_matching.training.checkpoint import model_state_with

MARKER = "decompressor.linear0.weight"  # a key only an Autoencoder's state dict holds


def checkpoint_network(path):
    """The decompressor network (a ``formats.Network``) of the decompressor checkpoint at ``path``, or None
    when ``path`` is not one (a network .bin, a projector checkpoint). Raises ``InvalidFile`` for a
    decompressor checkpoint whose model cannot be rebuilt."""
    model = model_state_with(path, MARKER)
    if model is None:
        return None
    try:
        return decompressor_network(autoencoder_from_state_dict(model))
    except (KeyError, IndexError, RuntimeError, TypeError) as error:
        raise InvalidFile(path, f"checkpoint holds no usable decompressor state ({type(error).__name__})") from None
