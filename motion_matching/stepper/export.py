"""Export a trained stepper: its checkpoint's network in the runtime's layout.

The runtime's ``stepper.bin`` is a network ``.bin`` like the projector's (ReLU after every layer but the
last, input and output normalisation), so once a checkpoint is turned into that ``formats.Network``,
``export`` writes it as ``.bin`` or ONNX the way it writes any network.
"""
from motion_matching.errors import InvalidFile
from motion_matching.stepper.model import stepper_from_state_dict, stepper_network
from motion_matching.training.checkpoint import model_state_with

MARKER = "stepper_mean_in"  # a key only a Stepper's state dict holds


def checkpoint_network(path):
    """The stepper network (a ``formats.Network``) of the stepper checkpoint at ``path``, or None when ``path``
    is not one (a network .bin, another network's checkpoint). Raises ``InvalidFile`` for a stepper
    checkpoint whose model cannot be rebuilt."""
    model = model_state_with(path, MARKER)
    if model is None:
        return None
    try:
        return stepper_network(stepper_from_state_dict(model))
    except (KeyError, IndexError, RuntimeError, TypeError, ValueError) as error:
        raise InvalidFile(path, f"checkpoint holds no usable stepper state ({type(error).__name__})") from None
