"""The decompressor's batches: windows of 2 consecutive frames, drawn as ``train_decompressor.py`` draws
them (``training.windows``)."""
from motion_matching.training.windows import WindowDraws

WINDOW = 2  # frames per window, the toolkit's
TRAINED_ON = ("Ypos", "Ytxy", "Yvel", "Yang", "Qpos", "Qxfm", "Qtxy", "Qvel", "Qang", "Yrvel", "Yrang", "Yextra")


class WindowBatches(WindowDraws):
    """Batches of ``batch_size`` windows; ``next()`` returns ``(gnd, X)``: name -> (B, W, ...) tensors of the
    ground truth and the features (B, W, n), on ``device``."""

    def __init__(self, inputs, *, batch_size, device="cpu", window=WINDOW):
        super().__init__(nframes=inputs.nframes, batch_size=batch_size, window=window, device=device)
        self.arrays = {name: inputs.arrays[name] for name in TRAINED_ON}
        self.X = inputs.X

    def next(self):
        """The next batch, gathered on the CPU (the draws are the CPU generator's) and moved to the device."""
        batch = self.indices()
        rows = batch.reshape(-1)  # index_select of rows gathers the same values as values[batch], faster
        gnd = {name: values.index_select(0, rows).unflatten(0, batch.shape).to(self.device)
               for name, values in self.arrays.items()}
        return gnd, self.X.index_select(0, rows).unflatten(0, batch.shape).to(self.device)
