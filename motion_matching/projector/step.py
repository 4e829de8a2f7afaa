"""One optimiser step of projector training, the toolkit's way or the fast way (``training.step``).

The fast step gathers the neighbours' rows into buffers made once; the toolkit step allocates them per
step, as the script does. Either way the online and offline sources give the same parameters bit for
bit. ``config.precision`` "bfloat16" runs the projector's forward and backward under ``torch.autocast``
(``training.step.PrecisionForward``).
"""
import torch

from motion_matching.projector.objective import LossTerms, projector_losses
from motion_matching.training.step import OptimiserStep, PrecisionForward, with_resolved_precision


class TrainStep:
    """Forward, losses, backward and AdamW on one batch; ``step(queries, nearest)`` returns its ``LossTerms``.

    ``features`` (F, n) and ``latent`` (F, L) are float32 tensors on the module's device; ``nearest``
    holds row indices into them. The fast step gathers the neighbours' rows into buffers made on
    the first call and reused (nothing keeps them past the step); the toolkit step allocates per step.
    """

    def __init__(self, module, features, latent, config):
        config = with_resolved_precision(config, features.device)
        self.module, self.config = module, config
        self.features, self.latent = features, latent
        self.update = OptimiserStep(module, config)
        self.optimizer = self.update.optimizer
        self.fast = config.step == "fast"
        self._gathered = None
        self._precision = PrecisionForward(config.precision, features.device.type)

    def _forward(self, queries):
        """The network's float32 output on ``queries``, its matrix products in ``config.precision``."""
        return self._precision(self.module, queries)

    def _gather(self, nearest):
        if not self.fast:
            return self.features.index_select(0, nearest), self.latent.index_select(0, nearest)
        if self._gathered is None or self._gathered[0].shape[0] != nearest.shape[0]:
            self._gathered = (self.features.new_empty((nearest.shape[0], self.features.shape[1])),
                              self.latent.new_empty((nearest.shape[0], self.latent.shape[1])))
        torch.index_select(self.features, 0, nearest, out=self._gathered[0])
        torch.index_select(self.latent, 0, nearest, out=self._gathered[1])
        return self._gathered

    def step(self, queries, nearest):
        """One optimiser step on ``queries`` (B, n) float32 and ``nearest`` (B,) int64; returns ``LossTerms``."""
        Xgnd, Zgnd = self._gather(nearest)
        terms = projector_losses(self._forward, queries, Xgnd, Zgnd, self.config)
        self.update(terms.loss)
        return LossTerms(*(term.detach() for term in terms))
