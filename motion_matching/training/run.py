"""The training loop every network shares: the toolkit's loop, resumable and safe to interrupt.

A network subclasses ``TrainingRun`` and sets ``module``, ``optimizer`` (via ``start``) and its hooks:
``train_step(batch)`` (one optimiser step, returning loss terms whose first field is ``loss``),
``write_network()`` (its runtime files, atomically), ``output_paths()``, ``tensorboard_scalars(terms)``
and, optionally, ``write_previews(i)`` and ``refuse_previews(force=)``. Like the toolkit's scripts, the
loop writes the runtime files after iteration 0 and every ``save_every`` iterations after it and decays
the learning rate on the same schedule; it writes the checkpoint every ``checkpoint_every``
iterations, at the end and on Ctrl-C (``train``).
"""
import contextlib
import dataclasses
import logging
import signal
import threading
import time

import torch

from motion_matching.atomic import output_folder
from motion_matching.errors import InvalidOption, MotionMatchingError
from motion_matching.interrupts import note_stop_signal
from motion_matching.neighbours.search import torch_threads
from motion_matching.threads import RateWatch
from motion_matching.training.checkpoint import save_checkpoint
from motion_matching.training.rerun import continue_earlier_run
from motion_matching.training.schedule import LearningRateSchedule
from motion_matching.training.step import RollingLoss, run_threads, with_resolved_precision

LOG = logging.getLogger(__name__)
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
    """Ctrl-C (or SIGTERM) stopped training; ``result`` names the checkpoint and network written on the way out."""

    def __init__(self, result):
        super().__init__(f"interrupted after {result.steps} iterations")
        self.result = result


def torch_device(name):
    """The ``torch.device`` called ``name``; raises ``InvalidOption`` / ``MotionMatchingError`` naming --device."""
    try:
        device = torch.device(name)
    except RuntimeError:
        raise InvalidOption("--device", f"{name!r} is not a torch device (cpu, cuda or cuda:N)") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise MotionMatchingError("--device", f"{name} requested but torch sees no CUDA device")
    return device


class TrainingRun:
    """The state of one training run and the steps that change it (see the module's docstring)."""

    TENSORBOARD_PREFIX = "network"

    def __init__(self, config, inputs, *, out_dir, network_path, checkpoint_path, progress, tensorboard,
                 on_step=None):
        self.device = torch_device(config.device)
        config = with_resolved_precision(config, self.device)  # "auto" precision: what this device computes
        self.config, self.inputs, self.progress, self.on_step = config, inputs, progress, on_step
        self.network_path, self.checkpoint_path = network_path, checkpoint_path
        self.out_dir, self.tensorboard, self.writer = out_dir, tensorboard, None
        self.step = 0
        self.losses = RollingLoss(read_every=PROGRESS_EVERY if config.step == "fast" else 1)
        self.in_step, self.stop_requested, self.source_name = False, False, "online"
        self.seconds, self.source, self.stream_state, self.resumed_from = 0.0, None, None, 0
        self.threads = self.recorded_threads = self.watch = None
        self.steady_from = 0  # the first iteration from which all cost the same: the slowdown watch starts there
        self.module = self.optimizer = self.scheduler = None

    def start(self, module, optimizer):
        """Adopt the trained ``module`` and its ``optimizer``; the schedule follows the config."""
        self.module, self.optimizer = module, optimizer
        self.scheduler = LearningRateSchedule(optimizer, self.config)

    def use_threads(self, choice):
        """Train on ``choice.threads`` torch threads (a ``ThreadChoice``), watching the rate for slowdowns."""
        self.threads, self.watch = choice.threads, RateWatch(choice)
        torch.set_num_threads(choice.threads)

    @property
    def rolling(self):
        """The rolling loss (float, or None before the first step) as of the last read."""
        return self.losses.value

    @rolling.setter
    def rolling(self, value):
        self.losses.value = value

    def work(self, step):
        """The work (float) of iterations ``0 .. step-1`` in units of one iteration: ``step``; a network whose
        iterations cost unequal amounts (the stepper's growing windows) counts them so, for ETAs."""
        return float(step)

    def refuse_previews(self, *, force):
        """Raise when previews this run would write stand in its folder, not written by it (unless ``force``)."""

    def write_previews(self, i):
        """Write the previews of iteration ``i`` (a network with previews overrides this)."""

    def after_step(self, i, terms):
        """The toolkit's bookkeeping after iteration ``i``: rolling loss, logs, saves, schedule; then checkpoints."""
        self.step = i + 1  # before the saves: the files written now hold ``step`` iterations
        self.log_tensorboard(self.losses.add(i, terms))
        if i % self.config.save_every == 0:
            self.write_network()
            self.write_previews(i)
        self.scheduler.after_step(i)
        if self.step % self.config.checkpoint_every == 0:
            self.write_checkpoint()
        if self.step % PROGRESS_EVERY == 0 or self.step == self.config.iterations:
            self.log_tensorboard(self.losses.read())
            if self.watch is not None and self.step >= self.steady_from:
                self.watch.observe(self.step)

    def loop(self, source):
        """Run iterations ``self.step .. iterations-1``; stops at a step boundary when asked to."""
        started, first = time.perf_counter(), self.step
        for i in range(self.step, self.config.iterations):
            batch = source.next()
            self.in_step = True
            self.after_step(i, self.train_step(*batch))
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
        spent = self.work(self.step) - self.work(self.step - done)
        left = self.work(self.config.iterations) - self.work(self.step)
        eta = left * self.seconds / spent if spent > 0 and self.seconds > 0 else float("inf")
        return Progress(self.step, self.config.iterations, self.losses.last, self.rolling,
                        self.optimizer.param_groups[0]["lr"], rate, eta)

    def write_last_network(self):
        """Write the network at the end or on Ctrl-C, except in --exact-toolkit runs: the toolkit writes it
        only after save iterations, so its last one stays."""
        if not self.config.exact_toolkit:
            self.write_network()
        elif self.step and (self.step - 1) % self.config.save_every:
            LOG.info("%s holds the network after iteration %d, where the toolkit's script last wrote it; %s holds "
                     "the state after iteration %d", self.network_path, (self.step - 1) // self.config.save_every
                     * self.config.save_every, self.checkpoint_path, self.step - 1)

    def write_checkpoint(self):
        """Write the checkpoint (atomically) with everything a resume needs."""
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

    def log_tensorboard(self, folded):
        """Log the loss and its terms of each ``(iteration, terms of floats)``, as the toolkit does."""
        if self.tensorboard is None or not folded:
            return
        if self.writer is None:
            from torch.utils.tensorboard import SummaryWriter
            self.writer = SummaryWriter(self.tensorboard)
        for i, terms in folded:
            self.writer.add_scalar(f"{self.TENSORBOARD_PREFIX}/loss", terms.loss, i)
            self.writer.add_scalars(f"{self.TENSORBOARD_PREFIX}/loss_terms", self.tensorboard_scalars(terms), i)

    def tensorboard_scalars(self, terms):
        """The loss terms logged beside the loss: a dict of floats (every field but ``loss``)."""
        return {name: value for name, value in terms._asdict().items() if name != "loss"}

    def result(self, held_out=None):
        """The ``TrainResult`` of the run so far."""
        self.log_tensorboard(self.losses.read())
        return TrainResult(self.network_path, self.checkpoint_path, self.step,
                           float("nan") if self.rolling is None else self.rolling, held_out, self.seconds,
                           self.source_name, self.resumed_from, self.config.precision)

    def close(self):
        """Close the TensorBoard writer, if one was opened."""
        if self.writer is not None:
            self.writer.close()


@contextlib.contextmanager
def deferred_interrupts(run):
    """Turn Ctrl-C and SIGTERM into a request honoured at the next step boundary, so no state is half-updated
    and the checkpoint holds the step reached.

    A signal the process ignores (SIGINT in a job started in the background) stays ignored.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def request_stop(signum, frame):
        note_stop_signal(signum)
        run.stop_requested = True

    deferred = [number for number in (signal.SIGINT, signal.SIGTERM) if signal.getsignal(number) is not signal.SIG_IGN]
    previous = {number: signal.signal(number, request_stop) for number in deferred}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def train(run, source):
    """Train ``run`` on batches of ``source`` to its last iteration, then write its network and checkpoint;
    on Ctrl-C write them (at a step boundary) and raise ``TrainingInterrupted``. A finished run, rerun,
    trains nothing and rewrites nothing."""
    with deferred_interrupts(run):
        _train(run, source)


def _train(run, source):
    if run.step >= run.config.iterations:
        return
    try:
        run.loop(source)
    except KeyboardInterrupt:
        if run.in_step:  # stopped inside a step: the last checkpoint and network stay the good ones
            raise
        run.write_last_network()
        run.write_checkpoint()
        LOG.debug("interrupted after %d iterations; checkpoint %s", run.step, run.checkpoint_path)
        raise TrainingInterrupted(run.result()) from None
    run.write_last_network()
    run.write_checkpoint()


@contextlib.contextmanager
def training_folder(out_dir):
    """The context of a run writing into ``out_dir`` (an ``ExitStack``): the folder made (and removed again
    when a refused run leaves it empty), torch's thread count restored at the end."""
    with contextlib.ExitStack() as stack:
        stack.enter_context(output_folder(out_dir))
        stack.enter_context(torch_threads(None))  # the previous count comes back at the end
        yield stack


def prepare(run, *, resume, force, sample):
    """Continue what ``run``'s folder (or ``resume``) holds and choose its threads (``run_threads`` with the
    load ``sample`` taken at the start); returns the checkpoint of the folder it continues, or None."""
    continued = continue_earlier_run(run, resume=resume, force=force)
    run.resumed_from = run.step
    run.use_threads(run_threads(run.config, sample=sample, recorded=run.recorded_threads))
    return continued if resume is None else None
