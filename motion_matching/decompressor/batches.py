"""The decompressor's batches: windows of 2 consecutive frames, drawn as ``train_decompressor.py`` draws
them (``training.windows``)."""
import math

import torch

from motion_matching.training.windows import WindowDraws

WINDOW = 2  # frames per window, the toolkit's
TRAINED_ON = ("Ypos", "Ytxy", "Yvel", "Yang", "Qpos", "Qxfm", "Qtxy", "Qvel", "Qang", "Yrvel", "Yrang", "Yextra")


class WindowBatches(WindowDraws):
    """Batches of ``batch_size`` windows (``later_batch_size`` from iteration ``later_from`` on, drawn from every
    window, the last one too: each frame's latent trains only on the windows it is in); ``next()`` returns
    ``(gnd, X, frames)``: name -> (B, W, ...) tensors of the ground truth, the features (B, W, n), on ``device``,
    and the frame indices (B, W) int64 on the CPU."""

    def __init__(self, inputs, *, batch_size, device="cpu", window=WINDOW, later_from=None, later_batch_size=None):
        super().__init__(nframes=inputs.nframes, batch_size=batch_size, window=window, device=device)
        self.sizes, self.later_from, self.drawn = (batch_size, later_batch_size or batch_size), later_from, 0
        arrays = [inputs.arrays[name] for name in TRAINED_ON] + [inputs.X]
        self.shapes = [tuple(values.shape[1:]) for values in arrays]
        # one row per frame: a batch is one gather of long rows, not 13 of short ones scattered over memory
        # (twice as fast between training steps, which leave the caches cold)
        self.frames = torch.cat([values.reshape(len(values), -1) for values in arrays], dim=1)

    def seek(self, step):
        """Continue at iteration ``step`` (torch's generator, restored by a resume, holds the draws)."""
        self.drawn = step

    def next(self):
        """The next batch, gathered on the CPU (the draws are the CPU generator's) and moved to the device."""
        later = self.later_from is not None and self.drawn >= self.later_from
        self.batch_size, self.drawn = self.sizes[later], self.drawn + 1
        batch = self.indices(every_frame=later)
        rows = self.frames.index_select(0, batch.reshape(-1)).to(self.device)
        parts = rows.split([math.prod(shape) for shape in self.shapes], dim=1)
        # contiguous, as a gather of each array gives them: later reductions then sum in the same order
        tensors = [part.reshape(tuple(batch.shape) + shape).contiguous() for part, shape in zip(parts, self.shapes)]
        return dict(zip(TRAINED_ON, tensors[:-1])), tensors[-1], batch
