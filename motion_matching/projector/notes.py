"""What a projector training run says before its first step, in this order: that it reads its cache's rows
more than once (the first line, a warning), then what every run says (``training.notes``)."""
from motion_matching.projector.batches import OfflineBatches
from motion_matching.training import notes


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
