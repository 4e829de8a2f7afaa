"""The stepper training loop: the toolkit's ``train_stepper.py``, resumable and safe to interrupt.

Like the script, a run writes ``stepper.bin`` (the runtime layout) after iteration 0 and every
``save_every`` iterations after it and decays the learning rate on the same schedule;
``stepper_checkpoint.pt`` follows every ``checkpoint_every`` iterations, at the end and on Ctrl-C (the
loop, resume and Ctrl-C are ``training.run``'s).
"""
import os

import numpy as np
import torch

from motion_matching.atomic import check_folder_name
from motion_matching.stepper.batches import WindowBatches, clip_starts
from motion_matching.stepper.config import StepperConfig, recipe_note
from motion_matching.stepper.inputs import load_inputs
from motion_matching.stepper.model import Stepper, stepper_network
from motion_matching.stepper.objective import LossTerms, next_frame, stepper_losses
from motion_matching.threads import Sample
from motion_matching.toolkit import formats
from motion_matching.toolkit.overwrite import png_writer, refuse_existing, writer_tag
from motion_matching.training.compiled import compile_note, compiled, with_resolved_compile
from motion_matching.training.notes import log_run_notes
from motion_matching.training.run import TrainingRun, prepare, train, training_folder
from motion_matching.training.step import OptimiserStep, PrecisionForward

PREVIEW_NAMES = ("stepper_X.png", "stepper_Z.png")
NETWORK_NAME = "stepper.bin"
CHECKPOINT_NAME = "stepper_checkpoint.pt"
WRITER = "train-stepper"


def make_stepper(inputs, config):
    """A freshly initialised ``Stepper`` (CPU, float32) after ``torch.manual_seed(config.seed)``, its
    normalisation the database's, as the script makes it."""
    torch.manual_seed(config.seed)
    module = Stepper(inputs.X.shape[1] + inputs.Z.shape[1], hidden=config.hidden)
    module.set_normalisation(inputs.normalisation)
    return module


class _Run(TrainingRun):
    """A stepper training run: its network, window batches and rollout, stepper.bin."""

    TENSORBOARD_PREFIX = "stepper"

    def __init__(self, config, inputs, *, out_dir, progress, tensorboard, on_step=None, plots=False):
        requested_compile = config.compiled_rollout
        super().__init__(config, inputs, out_dir=out_dir, network_path=os.path.join(out_dir, NETWORK_NAME),
                         checkpoint_path=os.path.join(out_dir, CHECKPOINT_NAME), progress=progress,
                         tensorboard=tensorboard, on_step=on_step)
        # "auto": what this device can compile; resolved before a checkpoint's settings are compared with it
        self.config = config = with_resolved_compile(self.config, "compiled_rollout", self.device)
        self.compile_note = compile_note(requested_compile, config.compiled_rollout, "--compiled-rollout")
        self.advance = compiled(next_frame, "--compiled-rollout") if config.compiled_rollout == "on" else next_frame
        module = make_stepper(inputs, config).to(self.device)
        self.update = OptimiserStep(module, config)
        self.start(module, self.update.optimizer)
        self.forwards = {precision: PrecisionForward(precision, self.device.type)
                         for precision in {config.precision, "float32"}}
        self.plots = plots
        self.cumulative_work = None
        if config.first_window is not None:  # a rollout costs its stepped frames: the work before each iteration
            frames = np.array([config.window_at(step) - 1 for step in range(config.iterations)], dtype=np.float64)
            self.cumulative_work = np.concatenate([[0.0], np.cumsum(frames)]) / (config.window - 1)
            # a short window's step time is not in proportion to its frames (at batch 512: 4 ms at 2 frames, 37 at
            # 10, 53 at 20), so rates are compared only once the windows are whole
            full = np.flatnonzero(frames == config.window - 1)
            self.steady_from = int(full[0]) if full.size else config.iterations

    def work(self, step):
        """Iterations ``0 .. step-1`` counted in full windows (a growing window's cost less)."""
        if self.cumulative_work is None:
            return super().work(step)
        return float(self.cumulative_work[min(step, self.config.iterations)])

    def train_step(self, Xgnd, Zgnd):
        """One optimiser step on a batch of windows (its first ``config.window_at`` frames while the windows
        grow); returns its ``LossTerms`` (detached tensors)."""
        frames = self.config.window_at(self.step)
        if frames < Xgnd.shape[1]:
            Xgnd, Zgnd = Xgnd[:, :frames].contiguous(), Zgnd[:, :frames].contiguous()
        forward = self.forwards[self.config.precision_at(self.step)]
        terms, _ = stepper_losses(self.module, Xgnd, Zgnd, forward, self.advance)
        self.update(terms.loss)
        return LossTerms(*(term.detach() for term in terms))

    def output_paths(self):
        """The runtime file a run writes into its folder: stepper.bin."""
        return [self.network_path]

    def write_network(self):
        """Write stepper.bin (atomically)."""
        formats.save_network(self.network_path, stepper_network(self.module))

    def refuse_previews(self, *, force):
        """With plots, refuse a stepper_X.png or stepper_Z.png in the folder that training did not write."""
        if self.plots:
            refuse_existing([os.path.join(self.out_dir, name) for name in PREVIEW_NAMES], force=force,
                            ours=lambda path: png_writer(path) == writer_tag(WRITER),
                            why=f" (not written by {WRITER})")

    def write_previews(self, i):
        """With plots, write stepper_X.png and stepper_Z.png: the database against the stepper's rollout
        (restarted from the database every window) over the first frames of clip 2, as the toolkit's show."""
        if not self.plots:
            return
        from motion_matching.stepper.plots import write_previews  # matplotlib only when asked
        write_previews(self.module, self.inputs, self.out_dir, names=PREVIEW_NAMES, window=self.config.window,
                       writer=writer_tag(WRITER), title=f"after iteration {i:,}")


def train_stepper(config=None, *, database_path, features_path, latent_path, out_dir=".",
                  progress=None, resume=None, force=False, tensorboard=None, on_step=None, plots=False):
    """Train the stepper (``config``: a ``StepperConfig``, default the toolkit's); returns a ``TrainResult``
    (its ``network_path`` is stepper.bin). Raises ``TrainingInterrupted`` after saving on Ctrl-C.

    ``resume``, ``force``, ``progress`` and ``on_step`` work as ``projector.train.train_projector``'s: the
    checkpoint in ``out_dir`` is continued; a stepper.bin of another run there is refused unless ``force``;
    a finished run, rerun, trains nothing and rewrites nothing. ``plots`` writes stepper_X.png and
    stepper_Z.png (features and latent of clip 2, database against rollout) with every save.
    """
    config = StepperConfig() if config is None else config
    check_folder_name(out_dir)
    sample = Sample()  # other processes' load, measured while the run sets up
    inputs = load_inputs(database_path, features_path, latent_path, window=config.window)
    starts = clip_starts(inputs, config) if config.clip_windows else None  # refused before the folder is made
    with training_folder(out_dir) as stack:
        run = _Run(config, inputs, out_dir=out_dir, progress=progress, tensorboard=tensorboard, on_step=on_step,
                   plots=plots)
        continued = prepare(run, resume=resume, force=force, sample=sample)
        run.source = source = WindowBatches(inputs, batch_size=config.batch_size, window=config.window,
                                            device=run.device, starts=starts, window_at=config.window_at)
        source.seek(run.step)
        log_run_notes(run, continued=continued,
                      notes=(recipe_note(config, inputs.database_path, inputs.nframes), run.compile_note))
        stack.callback(run.close)
        train(run, source)
        return run.result()
