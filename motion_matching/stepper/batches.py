"""The stepper's batches: windows of consecutive frames drawn as the toolkit's script draws them.

``train_stepper.py`` lists every window start ``0 .. nframes - window - 1`` (windows may straddle two
clips, as there) and draws each batch's starts with ``torch.randint`` from torch's global generator,
seeded once before the network is made. Every run draws this stream, so ``--exact-toolkit`` needs
nothing more; resuming restores the generator from the checkpoint (``training.resume``).
"""
import torch


class WindowBatches:
    """Batches of ``batch_size`` windows of ``window`` frames; ``next()`` returns ``(X, Z)``: the features
    (B, W, nfeatures) and latent (B, W, nlatent) of the windows, on ``device``."""

    def __init__(self, inputs, *, batch_size, window, device="cpu"):
        self.X, self.Z, self.batch_size = inputs.X, inputs.Z, batch_size
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
        return self.X[batch].to(self.device), self.Z[batch].to(self.device)
