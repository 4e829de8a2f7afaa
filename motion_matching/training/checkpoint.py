"""Training checkpoints (``projector_checkpoint.pt``, ``decompressor_checkpoint.pt``): one torch file with
everything a resume needs, the same layout for every network.

Layout: a dict saved with ``torch.save`` (a zip archive), one key each in ``CHECKPOINT_KEYS``:

- ``format``: ``CHECKPOINT_FORMAT`` ("mm-projector-checkpoint"); ``version``: ``CHECKPOINT_VERSION`` (1);
- ``model``: the network's state dict, so it alone rebuilds the network (the projector's ``NormalisedMLP``:
  ``linear0.weight`` ... and the ``mean_in``, ``std_in``, ``mean_out``, ``std_out`` buffers; the
  decompressor's ``Autoencoder``: ``compressor.*`` and ``decompressor.*`` with their normalisation, and
  ``frame_latent`` (frames, 32) in a run with ``latent_share``);
- ``optimizer``: the AdamW state dict; ``scheduler``: the ExponentialLR state dict;
- ``step``: int, iterations done (the next one to run);
- ``config``: the config's ``to_dict()``, the run's settings (resume refuses other numeric settings;
  ``evaluate`` takes its loss weights from it);
- ``rng``: ``{"torch": torch.get_rng_state()}``, plus ``"cuda"`` (that device's state) on a CUDA run and
  ``"toolkit_stream"`` on an online ``--exact-toolkit`` run: the numpy generator state before iteration
  ``step`` (``{"iteration", "keys" (624,) uint32, "pos", "has_gauss", "cached_gaussian"}``,
  ``neighbours.toolkit_stream.ToolkitStream.state()``);
- ``inputs``: ``{name: sha256}`` hex digests of the files trained on (the projector: features, latent;
  the decompressor: database, features);
- ``rolling_loss``: float, the toolkit's rolling loss at ``step`` (None before the first iteration);
- ``source``: "online" (BallTree searches) or "offline" (an exact-neighbour cache).
- ``threads``: int, the torch threads the run trains on (``step.run_threads``); a resumed run without
  ``--threads`` keeps it, since the fast step's results at batch 1,024 depend on the thread count.

``run.TrainingRun.write_checkpoint`` writes it; ``resume.restore_checkpoint`` reads it back.
"""
import zipfile

import torch

from motion_matching.atomic import atomic_write
from motion_matching.errors import InvalidFile
from motion_matching.toolkit.binary_io import open_for_reading
from motion_matching.toolkit.sniff import ZIP_SIGNATURE, another_kind

CHECKPOINT_FORMAT = "mm-projector-checkpoint"
CHECKPOINT_VERSION = 1
CHECKPOINT_KIND = "a training checkpoint (.pt)"  # as errors name it: "x.bin: is a ..., not a training checkpoint"
CHECKPOINT_KEYS = ("format", "version", "model", "optimizer", "scheduler", "step", "config", "rng", "inputs",
                   "rolling_loss", "source", "threads")


def save_checkpoint(path, **contents):
    """Write ``contents`` (the ``CHECKPOINT_KEYS`` after ``format`` and ``version``) atomically to ``path``."""
    payload = {"format": CHECKPOINT_FORMAT, "version": CHECKPOINT_VERSION, **contents}
    with atomic_write(path) as stream:
        torch.save(payload, stream)


def load_checkpoint(path):
    """Read a checkpoint written by ``save_checkpoint``; returns its dict, or raises naming the file: what
    it is when it is another kind of file, "damaged" when it is a checkpoint that cannot be read."""
    problem = checkpoint_kind_problem(path)
    if problem is not None:
        raise InvalidFile(path, problem)
    try:
        payload = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as error:  # torch raises many types for damaged files
        raise InvalidFile(path, f"is a damaged checkpoint ({_first_words(error)})") from None
    if not isinstance(payload, dict) or payload.get("format") != CHECKPOINT_FORMAT:
        raise InvalidFile(path, "not an mm-projector checkpoint")
    if payload.get("version") != CHECKPOINT_VERSION:
        raise InvalidFile(path, f"checkpoint version {payload.get('version')} is not {CHECKPOINT_VERSION}; "
                                "upgrade mm-projector")
    return payload


def checkpoint_kind_problem(path):
    """Why the file at ``path`` is no training checkpoint at all, or cannot hold one whole (str), or None
    when it is a complete zip archive with a pickle inside, as ``torch.save`` writes. Raises ``MissingFile``
    for a missing file, a folder or an unreadable file."""
    with open_for_reading(path) as stream:
        head = stream.read(len(ZIP_SIGNATURE))
    if head != ZIP_SIGNATURE:
        return another_kind(path, CHECKPOINT_KIND) or f"is not {CHECKPOINT_KIND}"
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError):
        return "is a damaged checkpoint (its zip archive is incomplete: cut short?)"
    if not any(name.endswith("/data.pkl") or name == "data.pkl" for name in names):
        return f"is a zip archive, not {CHECKPOINT_KIND}"
    return None


def _first_words(error):
    text = str(error).splitlines()[0] if str(error) else ""
    text = text if len(text) <= 80 else text[:77] + "..."
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def model_state_with(path, marker):
    """The model state dict of the checkpoint at ``path`` when it holds the key ``marker`` (a key only one
    network's state dict has), else None: ``path`` is not a zip (a network .bin) or is another network's
    checkpoint. Raises ``InvalidFile`` as ``load_checkpoint`` for a damaged checkpoint."""
    with open_for_reading(path) as stream:
        if stream.read(len(ZIP_SIGNATURE)) != ZIP_SIGNATURE:
            return None
    model = load_checkpoint(path).get("model")
    return model if isinstance(model, dict) and marker in model else None
