"""The runtime's network shapes: what a new decompressor.bin, projector.bin or stepper.bin will be, and the
refusal to replace a network .bin of other input or output sizes or another layer count.

The toolkit's runtime reads the three files into code written for their shapes (the shared fixtures: a
decompressor 59 -> 512 -> 338 for 23 bones, a stepper 59 -> 512 -> 512 -> 59, a projector
27 -> 512 x4 -> 59), so a file of other sizes would break it; the width of the hidden layers is free.
"""
import typing

from motion_matching.errors import MotionMatchingError, OverwriteRefused
from motion_matching.toolkit import formats

NLATENT = 32  # the toolkit's latent width (decompressor.inputs.NLATENT, without loading torch)
LOCAL_PARTS = 3 + 6 + 3 + 3  # per bone but the simulation bone: position, two rotation columns, velocities
ROOT_AND_CONTACTS = 3 + 3 + 2  # the simulation bone's velocity and angular velocity, two contacts
STEPPER_LAYERS = 3  # 59 -> 512 -> 512 -> 59
DECOMPRESSOR_LAYERS = 2  # 59 -> 512 -> pose


class Shape(typing.NamedTuple):
    """What the runtime checks of a network: input and output sizes and layer count (ints)."""

    inputs: int
    outputs: int
    layers: int

    def describe(self):
        """"59 -> 338, 2 layers" (str)."""
        return f"{self.inputs} -> {self.outputs}, {self.layers} layers"


def expected_shapes(configs, *, nfeatures, nbones):
    """{file name: ``Shape``} of the three networks a run with ``configs`` (network name -> training config)
    trains for a database of ``nbones`` bones and features of ``nfeatures`` columns."""
    both = nfeatures + NLATENT
    return {"decompressor.bin": Shape(both, LOCAL_PARTS * (nbones - 1) + ROOT_AND_CONTACTS, DECOMPRESSOR_LAYERS),
            "projector.bin": Shape(nfeatures, both, configs["projector"].hidden_layers + 1),
            "stepper.bin": Shape(both, both, STEPPER_LAYERS)}


def network_shape(path):
    """The ``Shape`` of the network .bin at ``path``, or None when it is not a readable network .bin."""
    try:
        sizes = formats.load_network(path).sizes
    except MotionMatchingError:
        return None
    return Shape(sizes[0], sizes[-1], len(sizes) - 1)


def check_replaceable(path, new):
    """Raise ``OverwriteRefused`` if ``path`` is a network .bin whose ``Shape`` differs from ``new`` (a
    ``Shape``): the runtime that loads it expects its shape. A missing or unreadable file passes."""
    old = network_shape(path)
    if old is not None and old != new:
        raise OverwriteRefused(path, f"is a network of {old.describe()}, and the new one would be {new.describe()}: "
                                     "the runtime that loads it expects its shape, so nothing was replaced (choose "
                                     "another --out, or delete it if the runtime now expects the new shape)")
