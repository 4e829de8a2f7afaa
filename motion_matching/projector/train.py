"""The projector training loop: the toolkit's ``train_projector.py``, resumable and safe to interrupt.

``train_projector`` trains from BallTree searches of the query stream (online, the toolkit's way) or
from an exact-neighbour cache (``offline_cache``); both see the same batches, so a run gives the same
parameters bit for bit either way. Like the toolkit, it writes ``projector.bin`` after iteration 0 and
every ``save_every`` iterations after it, and decays the learning rate on the same schedule. It also
writes ``projector_checkpoint.pt`` every ``checkpoint_every`` iterations, at the end and on Ctrl-C.
The loop, checkpoints, resume and Ctrl-C are ``training.run``'s; this module holds the projector's parts.
"""
import os

import torch

from motion_matching.atomic import check_folder_name
from motion_matching.neighbours.search import make_searcher
from motion_matching.projector.batches import OfflineBatches, OnlineBatches
from motion_matching.projector.config import TrainConfig
from motion_matching.projector.inputs import load_inputs, open_cache_reader
from motion_matching.projector.model import module_to_network
from motion_matching.projector.notes import log_latent_status, log_run_notes
from motion_matching.projector.objective import HELD_OUT_QUERIES, held_out_loss, make_projector
from motion_matching.projector.step import TrainStep
from motion_matching.projector.toolkit_batches import toolkit_online_batches
from motion_matching.threads import Sample
from motion_matching.toolkit import formats
from motion_matching.toolkit.overwrite import png_writer, refuse_existing, writer_tag
from motion_matching.training.run import (  # noqa: F401
    Progress,
    TrainingInterrupted,
    TrainingRun,
    TrainResult,
    prepare,
    torch_device,
    train,
    training_folder,
)

NETWORK_NAME = "projector.bin"
CHECKPOINT_NAME = "projector_checkpoint.pt"


class _Run(TrainingRun):
    """A projector training run: its network, batches of (queries, nearest frames), projector.bin, plots."""

    TENSORBOARD_PREFIX = "projector"

    def __init__(self, config, inputs, *, out_dir, progress, plots, tensorboard, on_step=None):
        super().__init__(config, inputs, out_dir=out_dir, network_path=os.path.join(out_dir, NETWORK_NAME),
                         checkpoint_path=os.path.join(out_dir, CHECKPOINT_NAME), progress=progress,
                         tensorboard=tensorboard, on_step=on_step)
        config = self.config
        module = make_projector(inputs.X, inputs.Z, config, path=inputs.features_path).to(self.device)
        self.X = torch.from_numpy(inputs.X).to(self.device)
        self.Z = torch.from_numpy(inputs.Z).to(self.device)
        self.trainer = TrainStep(module, self.X, self.Z, config)
        self.start(module, self.trainer.optimizer)
        self.plots, self.searcher = plots, None

    def train_step(self, Xhat, nearest):
        """One optimiser step on a batch; returns its ``LossTerms`` (detached tensors)."""
        return self.trainer.step(Xhat, nearest)

    def output_paths(self):
        """The runtime files a run writes into its folder: projector.bin."""
        return [self.network_path]

    def write_network(self):
        """Write projector.bin (runtime layout, atomically)."""
        formats.save_network(self.network_path, module_to_network(self.module))

    def refuse_previews(self, *, force):
        """With plots, refuse a projector_X.png or projector_Z.png in the folder that train did not write."""
        if self.plots:
            from motion_matching.projector.plots import PLOT_NAMES
            refuse_existing([os.path.join(self.out_dir, name) for name in PLOT_NAMES], force=force,
                            ours=lambda path: png_writer(path) == writer_tag("train"), why=" (not written by train)")

    def write_previews(self, i):
        """With plots, write projector_X.png and projector_Z.png."""
        if not self.plots:
            return
        from motion_matching.projector.plots import write_prediction_plots  # matplotlib only when asked for
        draws = self.source.preview_draws() if hasattr(self.source, "preview_draws") else None
        write_prediction_plots(self.module, self.inputs.X, self.inputs.Z, out_dir=self.out_dir,
                               searcher=self.nearest_searcher(), ranges=self.inputs.ranges, seed=i, draws=draws)

    def nearest_searcher(self):
        """The run's BallTree (the online source's, or one built on first use)."""
        if self.searcher is None:
            self.searcher = make_searcher(self.inputs.X, backend="balltree")
        return self.searcher

    def tensorboard_scalars(self, terms):
        """The toolkit's logged terms: xval, zval, dist."""
        return {"xval": terms.xval, "zval": terms.zval, "dist": terms.dist}


def _open_source(stack, run, config, *, offline_cache, preload):
    if offline_cache is None:
        if config.exact_toolkit:
            source = toolkit_online_batches(run, config)
        else:
            source = OnlineBatches(run.inputs.X, seed=config.seed, batch_size=config.batch_size, device=run.device)
        run.searcher = source.searcher
        return source
    reader = stack.enter_context(open_cache_reader(offline_cache, config, run.inputs))
    run.source_name = "offline"
    source = OfflineBatches(reader, batch_size=config.batch_size, path=offline_cache, device=run.device,
                            preload=preload)
    stack.callback(source.close)  # before the reader closes: the read-ahead thread may be using it
    return source


def train_projector(config=TrainConfig(), *, features_path, latent_path, database_path=None, offline_cache=None,
                    out_dir=".", progress=None, resume=None, force=False, preload=False, plots=False,
                    tensorboard=None, held_out_queries=HELD_OUT_QUERIES, on_step=None):
    """Train the projector; returns a ``TrainResult``. Raises ``TrainingInterrupted`` after saving on Ctrl-C.

    ``progress(Progress)`` is called every 10 iterations and after the last one; ``on_step(step, module)``
    after every iteration (``step`` iterations done; benchmarks evaluate the module there). ``resume`` names a
    checkpoint to continue from (same inputs and numeric settings; ``iterations`` may grow); without it,
    the checkpoint in ``out_dir`` is continued, and files of another run there are refused unless ``force``
    (which replaces them; this run's own checkpoint is continued even then). A finished run, rerun, trains
    nothing and rewrites nothing.
    ``held_out_queries`` fresh queries (0: none) give ``result.held_out``.
    """
    check_folder_name(out_dir)
    sample = Sample()  # other processes' load, measured while the run sets up
    inputs = load_inputs(features_path, latent_path, database_path)
    with training_folder(out_dir) as stack:
        run = _Run(config, inputs, out_dir=out_dir, progress=progress, plots=plots, tensorboard=tensorboard,
                   on_step=on_step)
        continued = prepare(run, resume=resume, force=force, sample=sample)
        run.source = source = _open_source(stack, run, config, offline_cache=offline_cache, preload=preload)
        log_run_notes(run, source, continued=continued)
        if run.step < config.iterations:  # a finished run trains nothing and says nothing
            log_latent_status(inputs)
        source.seek(run.step)
        stack.callback(run.close)
        train(run, source)
        held_out = None
        if held_out_queries:
            held_out = held_out_loss(run.module, inputs.X, inputs.Z, nqueries=held_out_queries, config=config,
                                     searcher=run.nearest_searcher())
        return run.result(held_out)
