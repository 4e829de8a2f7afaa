"""The stepper's batches: windows of consecutive frames, drawn as ``train_stepper.py`` draws them
(``training.windows``), or only from windows inside one clip."""
import torch

from motion_matching.errors import InvalidFile
from motion_matching.stepper.inputs import clip_window_starts
from motion_matching.training.windows import WindowDraws


def clip_starts(inputs, config):
    """For each window length iteration ``i`` of ``config`` trains on (``config.window_at``), the first frames
    (int64 tensor) of every window of that length inside one clip of ``inputs``: a dict length -> tensor.
    Raises ``InvalidFile`` (database.bin) where no clip holds a window of ``config.window`` frames."""
    lengths = {config.window_at(step) for step in range(config.iterations)} | {config.window}
    starts = {length: torch.from_numpy(clip_window_starts(inputs.ranges, length)) for length in sorted(lengths)}
    if not len(starts[config.window]):
        raise InvalidFile(inputs.database_path, f"has no clip of {config.window} frames: --clip-windows draws only "
                                                "windows inside one clip")
    return starts


class WindowBatches(WindowDraws):
    """Batches of ``batch_size`` windows of ``window`` frames; ``next()`` returns ``(X, Z)``: the features
    (B, W, nfeatures) and latent (B, W, nlatent) of the windows, on ``device``. Given ``starts``
    (``clip_starts``) and ``window_at`` (the config's), iteration ``i`` draws windows of ``window_at(i)`` frames
    from the starts of that length (one ``torch.randint``, the same generator): a growing window reaches each
    clip's last frames too."""

    def __init__(self, inputs, *, batch_size, window, device="cpu", starts=None, window_at=None):
        super().__init__(nframes=inputs.nframes, batch_size=batch_size, window=window, device=device)
        self.X, self.Z = inputs.X, inputs.Z
        self.starts, self.window_at, self.drawn = starts, window_at, 0

    def seek(self, step):
        """Continue at iteration ``step`` (torch's generator, restored by a resume, holds the draws)."""
        self.drawn = step

    def indices(self, *, every_frame=False):
        """The next batch's frame indices (B, W) int64."""
        if self.starts is None:
            return super().indices(every_frame=every_frame)
        frames = self.window_at(self.drawn)
        starts = self.starts[frames][torch.randint(0, len(self.starts[frames]), size=[self.batch_size])]
        return starts[:, None] + self.offsets[:frames]

    def next(self):
        """The next batch, gathered on the CPU (the draws are the CPU generator's) and moved to the device."""
        batch = self.indices()
        self.drawn += 1
        return self.X[batch].to(self.device), self.Z[batch].to(self.device)
