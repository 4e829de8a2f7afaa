"""Window starts drawn as the toolkit's decompressor and stepper scripts draw them.

Both scripts list every window start ``0 .. nframes - window - 1`` (windows may straddle two clips) and
draw each batch's starts with ``torch.randint`` from torch's global generator, seeded once before the
networks are made. Every run draws this stream, so ``--exact-toolkit`` needs nothing more; resuming
restores the generator from the checkpoint (``training.resume``).
"""
import torch


class WindowDraws:
    """The frame indices of batches of ``batch_size`` windows of ``window`` frames of ``nframes`` frames;
    a network's batches subclass it and gather their tensors in ``next()``."""

    def __init__(self, *, nframes, batch_size, window, device="cpu"):
        self.batch_size = batch_size
        self.nwindows = nframes - window
        self.offsets = torch.arange(window, dtype=torch.long)
        self.device = torch.device(device)

    def seek(self, step):
        """Nothing to do: torch's generator holds the stream's position (a resumed run restored it)."""

    def indices(self, *, every_frame=False):
        """The next batch's frame indices (B, W) int64: one ``torch.randint`` draw of window starts. The scripts'
        starts never reach the last window, so the last frame is in none; ``every_frame`` draws it too."""
        starts = torch.randint(0, self.nwindows + every_frame, size=[self.batch_size])
        return starts[:, None] + self.offsets
