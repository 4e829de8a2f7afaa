"""What a training run says before its first step: its network's own notes (warnings), that its warm-up
does not fit its iterations, where it continues."""
import logging

from motion_matching.training.schedule import schedule_note

LOG = logging.getLogger(__name__)


def log_run_notes(run, *, continued=None, notes=()):
    """Log the notes of ``run`` (a ``TrainingRun`` about to train): none for a finished run, which trains
    nothing. ``notes`` are the network's own lines (str or None) said first; ``continued`` names the
    checkpoint of its folder it resumes, if any."""
    if run.step >= run.config.iterations:
        return
    for note in (*notes, schedule_note(run.config)):
        if note is not None:
            LOG.warning("%s", note)
    if continued is not None:
        LOG.info("%s: continuing the run it holds at iteration %s (another --out starts a new run)", continued,
                 f"{run.step:,}")
