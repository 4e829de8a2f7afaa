"""The stepper's batches: windows of consecutive frames, drawn as ``train_stepper.py`` draws them
(``training.windows``), or only from windows inside one clip."""
import torch

from motion_matching.errors import InvalidFile
from motion_matching.stepper.inputs import clip_window_starts
from motion_matching.training.windows import WindowDraws


def clip_starts(inputs, window):
    """The first frames (int64 tensor) of every ``window``-frame window inside one clip of ``inputs``; raises
    ``InvalidFile`` (database.bin) where no clip holds one."""
    starts = torch.from_numpy(clip_window_starts(inputs.ranges, window))
    if not len(starts):
        raise InvalidFile(inputs.database_path, f"has no clip of {window} frames: --clip-windows draws only windows "
                                                "inside one clip")
    return starts


class WindowBatches(WindowDraws):
    """Batches of ``batch_size`` windows of ``window`` frames; ``next()`` returns ``(X, Z)``: the features
    (B, W, nfeatures) and latent (B, W, nlatent) of the windows, on ``device``. Given ``starts`` (``clip_starts``),
    each batch draws its windows' first frames from them (one ``torch.randint``, the same generator)."""

    def __init__(self, inputs, *, batch_size, window, device="cpu", starts=None):
        super().__init__(nframes=inputs.nframes, batch_size=batch_size, window=window, device=device)
        self.X, self.Z = inputs.X, inputs.Z
        self.starts = starts

    def indices(self, *, every_frame=False):
        """The next batch's frame indices (B, W) int64."""
        if self.starts is None:
            return super().indices(every_frame=every_frame)
        starts = self.starts[torch.randint(0, len(self.starts), size=[self.batch_size])]
        return starts[:, None] + self.offsets

    def next(self):
        """The next batch, gathered on the CPU (the draws are the CPU generator's) and moved to the device."""
        batch = self.indices()
        return self.X[batch].to(self.device), self.Z[batch].to(self.device)
