"""What a projector training run says before its first step, in this order: that it reads its cache's rows
more than once (the first line, a warning), then what every run says (``training.notes``)."""
import logging

from motion_matching.projector.batches import OfflineBatches
from motion_matching.toolkit.provenance import latent_status
from motion_matching.training import notes

LOG = logging.getLogger(__name__)


def cache_reuse_note(source, config):
    """A line (str) saying the run of ``config`` reads rows of the cache behind ``source`` more than once, or
    None (an online source, or a cache of at least as many queries as the run draws)."""
    draws = config.iterations * config.batch_size
    if not isinstance(source, OfflineBatches) or draws <= source.nqueries:
        return None
    return (f"{source.path} holds {source.nqueries:,} queries and this run draws {draws:,} "
            f"({draws / source.nqueries:.1f} passes): rows are read more than once, after the first pass in a "
            "shuffled chunk order")


def log_run_notes(run, source, *, continued=None):
    """Log the notes of ``run`` (a ``train._Run`` about to train from ``source``): the cache's first, then
    ``training.notes``'s. ``continued`` names the checkpoint of its folder it resumes, if any."""
    notes.log_run_notes(run, continued=continued, notes=(cache_reuse_note(source, run.config),))


def log_latent_status(inputs):
    """Say in one line where the run's latent.bin comes from (``inputs``: ``projector.inputs.Inputs``):
    train-decompressor's for these files, stale (a warning: trained from another database.bin or
    features.bin), the synthetic stand-in, or unrecorded (the toolkit's own)."""
    state, line = latent_status(inputs.latent_path, database_path=inputs.database_path,
                                features_path=inputs.features_path)
    (LOG.warning if state == "stale" else LOG.info)("%s", line)
