"""``--exact-toolkit`` batches: the toolkit script's own numpy stream, searched with a BallTree.

The stream (``neighbours.toolkit_stream``) cannot be sliced: resuming continues from the generator
state a checkpoint carries, or, for a checkpoint without one (an offline run's), replays the draws of
the iterations done, without searching them.
"""
import logging

import numpy as np
import torch

from motion_matching.neighbours import toolkit_stream
from motion_matching.neighbours.search import make_searcher
from motion_matching.projector.batches import Batch
from motion_matching.projector.inputs import toolkit_preview_rows

LOG = logging.getLogger(__name__)


class ToolkitOnlineBatches:
    """The toolkit's batches: draw iteration ``i``'s queries (and, after a save iteration, the preview's
    noise), then find their nearest frames with one BallTree query, as ``train_projector.py`` does."""

    def __init__(self, features, *, seed, batch_size, save_every, preview_rows, device="cpu", searcher=None,
                 resume_state=None):
        self.features = np.ascontiguousarray(features, dtype=np.float32)
        self.stream = toolkit_stream.ToolkitStream(self.features, seed=seed, batch_size=batch_size,
                                                   save_every=save_every, preview_rows=preview_rows)
        self.searcher = searcher if searcher is not None else make_searcher(self.features, backend="balltree")
        self.device, self.resume_state = torch.device(device), resume_state

    def seek(self, step):
        """Make the next batch that of iteration ``step``: from the resume state if it is at ``step``, else
        by replaying the stream from the seed."""
        state = self.resume_state
        if state is not None and int(state["iteration"]) == step:
            self.stream.restore(state)
            return
        if step < self.stream.iteration:
            raise ValueError(f"the toolkit stream is already at iteration {self.stream.iteration}, not {step}")
        if step > self.stream.iteration:
            LOG.info("replaying the toolkit's random draws of %d iterations (no generator state to resume from)",
                     step - self.stream.iteration)
            self.stream.skip(step - self.stream.iteration)

    def stream_state(self):
        """The generator state before the next batch (a dict for the checkpoint)."""
        return self.stream.state()

    def preview_draws(self):
        """``(nsigma (P, 1), noise (P, n), scale (n,))`` float32 of the last save iteration's preview, or None."""
        if self.stream.preview is None:
            return None
        return (*self.stream.preview, self.stream.X_noise_std)

    def next(self):
        """The next ``Batch``; the nearest frames come from one BallTree query of the batch."""
        Xhat, _ = self.stream.next_batch()
        nearest = self.searcher.nearest(Xhat)
        return Batch(torch.from_numpy(Xhat).to(self.device), torch.from_numpy(nearest).to(self.device))


def toolkit_online_batches(run, config):
    """The ``ToolkitOnlineBatches`` of a training run (its inputs, settings and resume state)."""
    return ToolkitOnlineBatches(run.inputs.X, seed=config.seed, batch_size=config.batch_size,
                                save_every=config.save_every, preview_rows=toolkit_preview_rows(run.inputs),
                                device=run.device, resume_state=run.stream_state)
