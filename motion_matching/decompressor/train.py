"""The decompressor training loop: the toolkit's ``train_decompressor.py``, resumable and safe to interrupt.

Like the script, a run writes ``latent.bin`` (the compressor over every frame) and ``decompressor.bin``
(the runtime layout) after iteration 0 and every ``save_every`` iterations after it, and decays the
learning rate on the same schedule; ``decompressor_checkpoint.pt`` follows every ``checkpoint_every``
iterations, at the end and on Ctrl-C (the loop, resume and Ctrl-C are ``training.run``'s). Beside
``latent.bin``, ``latent.json`` records what it was made from (``toolkit.provenance``).
With ``latent_share`` (the fast recipe's) the last iterations train each frame's latent directly, beside the
decompressor, the compressor frozen; ``latent.bin`` then holds those latents.
"""
import os

import torch

from motion_matching.atomic import check_folder_name
from motion_matching.decompressor.batches import WindowBatches
from motion_matching.decompressor.config import DecompressorConfig
from motion_matching.decompressor.fast_objective import fast_decompressor_losses
from motion_matching.decompressor.inputs import load_inputs
from motion_matching.decompressor.model import Autoencoder, decompressor_network
from motion_matching.decompressor.objective import LossTerms, compressor_input, decompressor_losses
from motion_matching.decompressor.previews import preview_paths, write_bvh_previews, written_by_training
from motion_matching.threads import Sample
from motion_matching.toolkit import formats
from motion_matching.toolkit.overwrite import png_writer, refuse_existing, writer_tag
from motion_matching.toolkit.provenance import provenance_path, write_record
from motion_matching.training.notes import log_run_notes
from motion_matching.training.run import TrainingRun, prepare, train, training_folder
from motion_matching.training.step import OptimiserStep, PrecisionForward

PREVIEW_NAMES = ("decompressor_X.png", "decompressor_Z.png")
NETWORK_NAME = "decompressor.bin"
LATENT_NAME = "latent.bin"
CHECKPOINT_NAME = "decompressor_checkpoint.pt"
# a window of a latent iteration (no compressor) against one of a compressor iteration, for ETAs (measured
# 0.42-0.55 at batch 2048 against 128, bfloat16: the loss, not the compressor, is most of a step)
LATENT_WINDOW_COST = 0.5


def make_autoencoder(inputs, config):
    """A freshly initialised ``Autoencoder`` (CPU, float32) after ``torch.manual_seed(config.seed)``, its
    normalisation the database's: the compressor's initial draws first, then the decompressor's, as the
    script makes them."""
    torch.manual_seed(config.seed)
    stats = inputs.normalisation
    module = Autoencoder(stats["compressor_mean_in"].shape[0], inputs.X.shape[1],
                         stats["decompressor_mean_out"].shape[0], hidden=config.hidden,
                         compressor_hidden=config.compressor_hidden,
                         nframes=inputs.nframes if config.latent_share else None)
    module.set_normalisation(stats)
    return module


class _Run(TrainingRun):
    """A decompressor training run: its two networks, window batches, decompressor.bin and latent.bin."""

    TENSORBOARD_PREFIX = "decompressor"

    def __init__(self, config, inputs, *, out_dir, progress, tensorboard, on_step=None, plots=False):
        super().__init__(config, inputs, out_dir=out_dir, network_path=os.path.join(out_dir, NETWORK_NAME),
                         checkpoint_path=os.path.join(out_dir, CHECKPOINT_NAME), progress=progress,
                         tensorboard=tensorboard, on_step=on_step)
        config = self.config
        module = make_autoencoder(inputs, config).to(self.device)
        self.networks = list(module.compressor.parameters()) + list(module.decompressor.parameters())
        if config.latent_share:
            # the last iterations train the decompressor and each frame's latent, at their own rate
            self.tuned = list(module.decompressor.parameters()) + [module.frame_latent]
            latents = {"params": [module.frame_latent], "weight_decay": 0.0, "lr_scale": config.latent_lr_scale}
            self.update = OptimiserStep([{"params": self.networks}, latents], config)
        else:
            self.tuned, self.update = None, OptimiserStep(module, config)
        self.start(module, self.update.optimizer)
        self.latent_path = os.path.join(out_dir, LATENT_NAME)
        self.forward = PrecisionForward(config.precision, self.device.type)
        self.latent_forward = PrecisionForward(config.latent_precision or config.precision, self.device.type)
        # the fast step's loss computes all bones of a tree level at once; the toolkit step keeps the script's order
        self.objective = fast_decompressor_losses if config.step == "fast" else decompressor_losses
        self.whole_database = None  # the compressor's input for every frame, made at the first save
        self.plots, self.latent = plots, None

    def tuning_latents(self):
        """Whether the iteration about to run (``self.step``) trains each frame's latent, not the compressor."""
        return self.step >= self.config.latent_start

    def work(self, step):
        """Iterations ``0 .. step-1`` in compressor iterations: a latent iteration's windows cost less each."""
        config, start = self.config, self.config.latent_start
        scale = LATENT_WINDOW_COST * (config.latent_batch_size or config.batch_size) / config.batch_size
        return float(min(step, start)) + max(step - start, 0) * scale

    def train_step(self, gnd, X, frames):
        """One optimiser step on a batch of windows (``frames`` their frame indices); returns its ``LossTerms``
        (detached tensors)."""
        if not self.tuning_latents():
            terms, _ = self.objective(self.module, gnd, X, self.inputs.parents, self.forward)
            self.update(terms.loss, self.networks if self.tuned else None)
            return LossTerms(*(term.detach() for term in terms))
        if self.step == self.config.latent_start:  # the compressor's last latent is where each frame's starts
            with torch.no_grad():
                self.module.frame_latent.copy_(torch.from_numpy(self.encode_database()))
            if self.watch is not None:
                self.watch.new_pace()
        latent = self.module.frame_latent[frames.to(self.device)]
        terms, _ = self.objective(self.module, gnd, X, self.inputs.parents, self.latent_forward, Zgnd=latent)
        self.update(terms.loss, self.tuned)
        return LossTerms(*(term.detach() for term in terms))

    def output_paths(self):
        """The runtime files a run writes into its folder: decompressor.bin, latent.bin and its latent.json."""
        return [self.network_path, self.latent_path, provenance_path(self.latent_path)]

    def encode_database(self):
        """The latent of every frame (F, nlatent) float32 numpy: the compressor over the whole database in one
        batch, in float32, as the script computes it for latent.bin; once the frames' latents train, those."""
        if self.step > self.config.latent_start:
            return self.module.frame_latent.detach().cpu().numpy().copy()
        if self.whole_database is None:
            self.whole_database = compressor_input(self.inputs.arrays, [1, self.inputs.nframes]).to(self.device)
        with torch.no_grad():
            return self.module.encode(self.whole_database)[0].cpu().numpy()

    def write_network(self):
        """Write latent.bin, its latent.json and decompressor.bin (atomically, in the script's order)."""
        self.latent = self.encode_database()
        formats.save_latent(self.latent_path, self.latent)
        write_record(self.latent_path, made_by="decompressor", hashes=self.inputs.hashes, iterations=self.step,
                     seed=int(self.config.seed), recipe=self.config.recipe)
        formats.save_network(self.network_path, decompressor_network(self.module))

    def refuse_previews(self, *, force):
        """With plots, refuse the previews' files (decompressor_X.png, decompressor_Z.png, the two BVHs and their
        record) in the folder that training did not write."""
        if self.plots:
            paths = [os.path.join(self.out_dir, name) for name in PREVIEW_NAMES] + preview_paths(self.out_dir)
            refuse_existing(paths, force=force, ours=_written_by_training, why=" (not written by train-decompressor)")

    def write_previews(self, i):
        """With plots, write decompressor_X.png and decompressor_Z.png, the features and the latent just written
        of the first frames of clip 2, as the toolkit's previews show them, and the clip and its reconstruction
        as decompressor_Ygnd.bvh and decompressor_Ytil.bvh (``previews``)."""
        if not self.plots:
            return
        write_bvh_previews(self.module, self.inputs, self.latent, self.out_dir, iteration=i)
        from motion_matching.decompressor.plots import plot_columns, preview_frames  # matplotlib only when asked
        frames = preview_frames(self.inputs.ranges)
        for name, values, what in ((PREVIEW_NAMES[0], self.inputs.X.numpy(), "features"),
                                   (PREVIEW_NAMES[1], self.latent, "latent")):
            plot_columns(values[frames], os.path.join(self.out_dir, name), writer=writer_tag("train-decompressor"),
                         title=f"{what} of frames {frames.start}-{frames.stop - 1} after iteration {i:,}")


def _written_by_training(path):
    if path.endswith(".png"):
        return png_writer(path) == writer_tag("train-decompressor")
    return written_by_training(path)


def train_decompressor(config=DecompressorConfig(), *, database_path, features_path, out_dir=".", progress=None,
                       resume=None, force=False, tensorboard=None, on_step=None, plots=False):
    """Train the compressor and decompressor; returns a ``TrainResult`` (its ``network_path`` is
    decompressor.bin). Raises ``TrainingInterrupted`` after saving on Ctrl-C.

    ``resume``, ``force``, ``progress`` and ``on_step`` work as ``projector.train.train_projector``'s: the
    checkpoint in ``out_dir`` is continued; files of another run there (decompressor.bin, latent.bin) are
    refused unless ``force``; a finished run, rerun, trains nothing and rewrites nothing. ``plots`` writes
    decompressor_X.png and decompressor_Z.png (features and latent of clip 2) with every save, and the clip and
    its reconstruction as decompressor_Ygnd.bvh and decompressor_Ytil.bvh (``previews``).
    """
    check_folder_name(out_dir)
    sample = Sample()  # other processes' load, measured while the run sets up
    inputs = load_inputs(database_path, features_path)
    with training_folder(out_dir) as stack:
        run = _Run(config, inputs, out_dir=out_dir, progress=progress, tensorboard=tensorboard, on_step=on_step,
                   plots=plots)
        continued = prepare(run, resume=resume, force=force, sample=sample)
        config = run.config
        run.source = source = WindowBatches(inputs, batch_size=config.batch_size, device=run.device,
                                            later_from=config.latent_start, later_batch_size=config.latent_batch_size)
        source.seek(run.step)
        log_run_notes(run, continued=continued)
        stack.callback(run.close)
        train(run, source)
        return run.result()
