"""The projector training loop: the toolkit's ``train_projector.py``, resumable and safe to interrupt.

``train_projector`` trains from BallTree searches of the query stream (online, the toolkit's way) or
from an exact-neighbour cache (``offline_cache``); both see the same batches, so a run gives the same
parameters bit for bit either way. Like the toolkit, it writes ``projector.bin`` after iteration 0 and
every ``save_every`` iterations after it, and decays the learning rate on the same schedule. It also
writes ``projector_checkpoint.pt`` every ``checkpoint_every`` iterations, at the end and on Ctrl-C.
"""
import contextlib
import dataclasses
import logging
import os
import signal
import threading
import time

import torch

from motion_matching.atomic import check_folder_name, output_folder
from motion_matching.errors import InvalidOption, MotionMatchingError
from motion_matching.neighbours.search import make_searcher, torch_threads
from motion_matching.projector.batches import OfflineBatches, OnlineBatches
from motion_matching.projector.checkpoint import save_checkpoint
from motion_matching.projector.config import TrainConfig
from motion_matching.projector.inputs import load_inputs, open_cache_reader
from motion_matching.projector.model import module_to_network
from motion_matching.projector.notes import log_run_notes
from motion_matching.projector.objective import HELD_OUT_QUERIES, held_out_loss, make_projector
from motion_matching.projector.rerun import continue_earlier_run
from motion_matching.projector.schedule import LearningRateSchedule
from motion_matching.projector.step import RollingLoss, TrainStep, run_threads, with_resolved_precision
from motion_matching.projector.toolkit_batches import toolkit_online_batches
from motion_matching.threads import RateWatch, Sample
from motion_matching.toolkit import formats

LOG = logging.getLogger(__name__)
NETWORK_NAME = "projector.bin"
CHECKPOINT_NAME = "projector_checkpoint.pt"
PROGRESS_EVERY = 10  # iterations between progress reports (and fast-step loss reads), as the toolkit prints


@dataclasses.dataclass(frozen=True)
class Progress:
    """A progress report: ``step`` iterations of ``iterations`` done, losses, rate (it/s), ETA (s)."""

    step: int
    iterations: int
    loss: float
    rolling_loss: float
    lr: float
    rate: float
    eta: float


@dataclasses.dataclass(frozen=True)
class TrainResult:
    """What a run left: file paths, iterations done, final rolling loss, held-out loss dict, loop seconds."""

    network_path: str
    checkpoint_path: str
    steps: int
    final_loss: float
    held_out: dict
    seconds: float
    source: str
    resumed_from: int = 0  # iterations already done when this call started
    precision: str = "float32"  # the matrix products' arithmetic, "auto" resolved


class TrainingInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped training; ``result`` names the checkpoint and projector.bin written on the way out."""

    def __init__(self, result):
        super().__init__(f"interrupted after {result.steps} iterations")
        self.result = result


def _device(name):
    try:
        device = torch.device(name)
    except RuntimeError:
        raise InvalidOption("--device", f"{name!r} is not a torch device (cpu, cuda or cuda:N)") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise MotionMatchingError("--device", f"{name} requested but torch sees no CUDA device")
    return device


class _Run:
    """The state of one training run and the steps that change it."""

    def __init__(self, config, inputs, *, out_dir, progress, plots, tensorboard, on_step=None):
        self.device = _device(config.device)
        config = with_resolved_precision(config, self.device)
        self.config, self.inputs, self.progress, self.on_step = config, inputs, progress, on_step
        self.module = make_projector(inputs.X, inputs.Z, config, path=inputs.features_path).to(self.device)
        self.X = torch.from_numpy(inputs.X).to(self.device)
        self.Z = torch.from_numpy(inputs.Z).to(self.device)
        self.trainer = TrainStep(self.module, self.X, self.Z, config)
        self.optimizer = self.trainer.optimizer
        self.scheduler = LearningRateSchedule(self.optimizer, config)
        self.network_path = os.path.join(out_dir, NETWORK_NAME)
        self.checkpoint_path = os.path.join(out_dir, CHECKPOINT_NAME)
        self.out_dir, self.plots, self.writer = out_dir, plots, None
        self.tensorboard = tensorboard
        self.step = 0
        self.losses = RollingLoss(read_every=PROGRESS_EVERY if config.step == "fast" else 1)
        self.in_step, self.stop_requested, self.searcher, self.source_name = False, False, None, "online"
        self.seconds, self.source, self.stream_state, self.resumed_from = 0.0, None, None, 0
        self.threads = self.recorded_threads = self.watch = None

    @property
    def rolling(self):
        """The rolling loss (float, or None before the first step) as of the last read."""
        return self.losses.value

    @rolling.setter
    def rolling(self, value):
        self.losses.value = value

    def train_step(self, Xhat, nearest):
        """One optimiser step on a batch; returns its ``LossTerms`` (detached tensors)."""
        return self.trainer.step(Xhat, nearest)

    def after_step(self, i, terms):
        """The toolkit's bookkeeping after iteration ``i``: rolling loss, logs, saves, schedule; then checkpoints."""
        self.log_tensorboard(self.losses.add(i, terms))
        if i % self.config.save_every == 0:
            self.write_network()
            if self.plots:
                self.write_plots(i)
        self.scheduler.after_step(i)
        self.step = i + 1
        if self.step % self.config.checkpoint_every == 0:
            self.write_checkpoint()
        if self.step % PROGRESS_EVERY == 0 or self.step == self.config.iterations:
            self.log_tensorboard(self.losses.read())
            if self.watch is not None:
                self.watch.observe(self.step)

    def loop(self, source):
        """Run iterations ``self.step .. iterations-1``; stops at a step boundary when asked to."""
        started, first = time.perf_counter(), self.step
        for i in range(self.step, self.config.iterations):
            Xhat, nearest = source.next()
            self.in_step = True
            self.after_step(i, self.train_step(Xhat, nearest))
            self.in_step = False
            if self.on_step is not None:
                self.on_step(self.step, self.module)
            self.seconds = time.perf_counter() - started
            if self.stop_requested:
                raise KeyboardInterrupt
            if self.progress is not None and (self.step % PROGRESS_EVERY == 0 or self.step == self.config.iterations):
                self.progress(self.report(self.step - first))

    def report(self, done):
        """A ``Progress`` after ``done`` iterations in this session."""
        rate = done / self.seconds if self.seconds > 0 else 0.0
        eta = (self.config.iterations - self.step) / rate if rate > 0 else float("inf")
        return Progress(self.step, self.config.iterations, self.losses.last, self.rolling,
                        self.optimizer.param_groups[0]["lr"], rate, eta)

    def write_network(self):
        """Write projector.bin (runtime layout, atomically)."""
        formats.save_network(self.network_path, module_to_network(self.module))

    def write_last_network(self):
        """Write projector.bin at the end or on Ctrl-C, except in --exact-toolkit runs: the toolkit writes it
        only after save iterations, so its last one stays."""
        if not self.config.exact_toolkit:
            self.write_network()
        elif self.step and (self.step - 1) % self.config.save_every:
            LOG.info("%s holds the network after iteration %d, where the toolkit's script last wrote it; %s holds "
                     "the state after iteration %d", self.network_path, (self.step - 1) // self.config.save_every
                     * self.config.save_every, self.checkpoint_path, self.step - 1)

    def write_checkpoint(self):
        """Write projector_checkpoint.pt (atomically) with everything a resume needs."""
        self.log_tensorboard(self.losses.read())
        rng = {"torch": torch.get_rng_state()}
        if hasattr(self.source, "stream_state"):
            rng["toolkit_stream"] = self.source.stream_state()
        if self.device.type == "cuda":
            rng["cuda"] = torch.cuda.get_rng_state(self.device)
        save_checkpoint(self.checkpoint_path, model=self.module.state_dict(), optimizer=self.optimizer.state_dict(),
                        scheduler=self.scheduler.state_dict(), step=self.step, config=self.config.to_dict(),
                        rng=rng, inputs=self.inputs.hashes, rolling_loss=self.rolling, source=self.source_name,
                        threads=self.threads)
        LOG.debug("checkpoint after %d iterations written to %s", self.step, self.checkpoint_path)

    def nearest_searcher(self):
        """The run's BallTree (the online source's, or one built on first use)."""
        if self.searcher is None:
            self.searcher = make_searcher(self.inputs.X, backend="balltree")
        return self.searcher

    def write_plots(self, i):
        """Write projector_X.png and projector_Z.png."""
        from motion_matching.projector.plots import write_prediction_plots  # matplotlib only when asked for
        draws = self.source.preview_draws() if hasattr(self.source, "preview_draws") else None
        write_prediction_plots(self.module, self.inputs.X, self.inputs.Z, out_dir=self.out_dir,
                               searcher=self.nearest_searcher(), ranges=self.inputs.ranges, seed=i, draws=draws)

    def log_tensorboard(self, folded):
        """Log the loss and its terms of each ``(iteration, LossTerms of floats)``, as the toolkit does."""
        if self.tensorboard is None or not folded:
            return
        if self.writer is None:
            from torch.utils.tensorboard import SummaryWriter
            self.writer = SummaryWriter(self.tensorboard)
        for i, terms in folded:
            self.writer.add_scalar("projector/loss", terms.loss, i)
            self.writer.add_scalars("projector/loss_terms", {"xval": terms.xval, "zval": terms.zval,
                                                             "dist": terms.dist}, i)

    def result(self, held_out=None):
        """The ``TrainResult`` of the run so far."""
        self.log_tensorboard(self.losses.read())
        return TrainResult(self.network_path, self.checkpoint_path, self.step,
                           float("nan") if self.rolling is None else self.rolling, held_out, self.seconds,
                           self.source_name, self.resumed_from, self.config.precision)


@contextlib.contextmanager
def _deferred_interrupts(run):
    """Turn Ctrl-C into a request honoured at the next step boundary, so no state is half-updated.

    A process that ignores SIGINT (a job started in the background) keeps ignoring it.
    """
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        yield
        return

    def request_stop(signum, frame):
        run.stop_requested = True

    previous = signal.signal(signal.SIGINT, request_stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


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


def _train(run, source):
    if run.step >= run.config.iterations:  # a finished run, rerun: its files stay as they are
        return
    try:
        run.loop(source)
    except KeyboardInterrupt:
        if run.in_step:  # stopped inside a step: the last checkpoint and projector.bin stay the good ones
            raise
        run.write_last_network()
        run.write_checkpoint()
        LOG.debug("interrupted after %d iterations; checkpoint %s", run.step, run.checkpoint_path)
        raise TrainingInterrupted(run.result()) from None
    run.write_last_network()
    run.write_checkpoint()


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
    with contextlib.ExitStack() as stack:
        stack.enter_context(output_folder(out_dir))
        stack.enter_context(torch_threads(None))  # the previous count comes back at the end
        run = _Run(config, inputs, out_dir=out_dir, progress=progress, plots=plots, tensorboard=tensorboard,
                   on_step=on_step)
        continued = continue_earlier_run(run, resume=resume, force=force)
        run.resumed_from = run.step
        choice = run_threads(config, sample=sample, recorded=run.recorded_threads)
        run.threads, run.watch = choice.threads, RateWatch(choice)  # fixed for the run: results depend on it
        torch.set_num_threads(choice.threads)
        run.source = source = _open_source(stack, run, config, offline_cache=offline_cache, preload=preload)
        log_run_notes(run, source, continued=continued if resume is None else None)
        source.seek(run.step)
        stack.callback(lambda: run.writer is not None and run.writer.close())
        with _deferred_interrupts(run):
            _train(run, source)
        held_out = None
        if held_out_queries:
            held_out = held_out_loss(run.module, inputs.X, inputs.Z, nqueries=held_out_queries, config=config,
                                     searcher=run.nearest_searcher())
        return run.result(held_out)
