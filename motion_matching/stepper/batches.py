"""The stepper's batches: windows of consecutive frames, drawn as ``train_stepper.py`` draws them
(``training.windows``)."""
from motion_matching.training.windows import WindowDraws


class WindowBatches(WindowDraws):
    """Batches of ``batch_size`` windows of ``window`` frames; ``next()`` returns ``(X, Z)``: the features
    (B, W, nfeatures) and latent (B, W, nlatent) of the windows, on ``device``."""

    def __init__(self, inputs, *, batch_size, window, device="cpu"):
        super().__init__(nframes=inputs.nframes, batch_size=batch_size, window=window, device=device)
        self.X, self.Z = inputs.X, inputs.Z

    def next(self):
        """The next batch, gathered on the CPU (the draws are the CPU generator's) and moved to the device."""
        batch = self.indices()
        return self.X[batch].to(self.device), self.Z[batch].to(self.device)
