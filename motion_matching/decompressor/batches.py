"""The decompressor's batches: windows of consecutive frames drawn as the toolkit's script draws them.

``train_decompressor.py`` lists every window start ``0 .. nframes - window - 1`` (windows may straddle
two clips, as there) and draws each batch's starts with ``torch.randint`` from torch's global generator,
seeded once before the networks are made. Every run draws this stream, so ``--exact-toolkit`` needs
nothing more; resuming restores the generator from the checkpoint (``training.resume``).
"""
import torch

WINDOW = 2  # frames per window, the toolkit's
TRAINED_ON = ("Ypos", "Ytxy", "Yvel", "Yang", "Qpos", "Qxfm", "Qtxy", "Qvel", "Qang", "Yrvel", "Yrang", "Yextra")


class WindowBatches:
    """Batches of ``batch_size`` windows; ``next()`` returns ``(gnd, X)``: name -> (B, W, ...) tensors of the
    ground truth and the features (B, W, n), on ``device``."""

    def __init__(self, inputs, *, batch_size, device="cpu", window=WINDOW):
        self.arrays = {name: inputs.arrays[name] for name in TRAINED_ON}
        self.X, self.batch_size = inputs.X, batch_size
        self.nwindows = inputs.nframes - window
        self.offsets = torch.arange(window, dtype=torch.long)
        self.device = torch.device(device)

    def seek(self, step):
        """Nothing to do: torch's generator holds the stream's position (a resumed run restored it)."""

    def indices(self):
        """The next batch's frame indices (B, W) int64: one ``torch.randint`` draw of window starts."""
        starts = torch.randint(0, self.nwindows, size=[self.batch_size])
        return starts[:, None] + self.offsets

    def next(self):
        """The next batch, gathered on the CPU (the draws are the CPU generator's) and moved to the device."""
        batch = self.indices()
        gnd = {name: values[batch].to(self.device) for name, values in self.arrays.items()}
        return gnd, self.X[batch].to(self.device)
