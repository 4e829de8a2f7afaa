"""What a run does with the files an earlier run left in its folder: resume them, or refuse to overwrite them.

Rerunning the same command continues from the run's checkpoint (``projector_checkpoint.pt``,
``decompressor_checkpoint.pt``; as build-cache resumes its partial file); files of another run, or a
network .bin without a checkpoint, are replaced only with ``force``.
"""
import logging
import os

from motion_matching.errors import InvalidFile, MismatchedFiles, MotionMatchingError
from motion_matching.training.checkpoint import load_checkpoint
from motion_matching.training.resume import checkpoint_mismatches, restore_checkpoint
from motion_matching.training.step import with_resolved_precision

LOG = logging.getLogger(__name__)
KEEP = "choose another --out, or pass --force to replace it"


def continue_earlier_run(run, *, resume=None, force=False):
    """Restore into ``run`` the checkpoint it continues from: ``resume``, else the one in its folder.

    Returns the checkpoint path restored (str) or None for a fresh run. Raises ``MismatchedFiles`` when
    the folder holds another run's checkpoint or a network .bin without one, unless ``force``: that
    replaces them, but a checkpoint this run can continue (the same settings and inputs) is continued
    even then, so rerunning the last command line never throws the run's progress away. Previews there
    that training did not write are refused too, unless ``force`` (``run.refuse_previews``). ``force`` is
    True for the user's --force, or a str saying who else replaces them (retrain, in its own work folder),
    which the line about a replaced checkpoint gives instead of "--force".
    """
    run.refuse_previews(force=force)
    if resume is not None:
        restore_checkpoint(run, resume)
        return os.fspath(resume)
    if force and os.path.exists(run.checkpoint_path):
        # retrain (force a str) has no --lr or --batch-size of its own: its line names the settings
        problem = checkpoint_problem(run.checkpoint_path, run.config, run.inputs.hashes, as_options=force is True)
        if problem is not None:
            LOG.warning("%s: replacing it (%s): %s", run.checkpoint_path, "--force" if force is True else force,
                        problem)
            return None
    if os.path.exists(run.checkpoint_path):
        try:
            restore_checkpoint(run, run.checkpoint_path)
        except MotionMatchingError as error:
            raise _not_continued(run.checkpoint_path, error) from None
        if run.step > run.config.iterations:
            raise MismatchedFiles(run.checkpoint_path, f"holds a run of {run.step:,} iterations, more than "
                                                       f"--iterations {run.config.iterations:,}; {KEEP}")
        return run.checkpoint_path  # train says where it continues, after the cache's line
    for path in run.output_paths():
        if os.path.exists(path) and not force:
            raise MismatchedFiles(path, f"is another run's (no {os.path.basename(run.checkpoint_path)} "
                                        f"beside it to continue from); {KEEP}")
    return None


def _not_continued(path, error):
    """The refusal (a ``MotionMatchingError``) of the checkpoint at ``path`` in --out, which
    ``restore_checkpoint`` refused with ``error``: another run's when its settings or inputs differ; when it
    cannot be read, what it is (damaged, not a checkpoint), never "another run's"."""
    if isinstance(error, MismatchedFiles):
        fix = f"; pass {error.option}, or" if error.option else ";"
        return MismatchedFiles(path, f"is another run's: it {error.problem}{fix} {KEEP}")
    return InvalidFile(path, f"{error.problem}; {KEEP}")


def checkpoint_problem(path, config, hashes, *, as_options=True):
    """Why the checkpoint at ``path`` cannot be continued by a run of ``config`` on inputs of SHA-256
    ``hashes`` ({name: sha256}): a str, or None when it can (or is absent). The settings that differ are
    named as training options (``--batch-size``), or as settings (``batch size``) when not ``as_options``."""
    if not os.path.exists(path):
        return None
    try:
        payload = load_checkpoint(path)
        _, differences, changed = checkpoint_mismatches(payload, with_resolved_precision(config), hashes)
        step = int(payload["step"])
    except MotionMatchingError as error:
        return error.problem
    except (KeyError, TypeError, ValueError) as error:
        return f"is a damaged checkpoint (it lacks or garbles {error})"
    if differences:
        names = ("--" + name.replace("_", "-") if as_options else name.replace("_", " ") for name in differences)
        return "it was trained with other " + ", ".join(names)
    if changed:
        return f"it was trained on another {' and '.join(name + '.bin' for name in changed)}"
    if step > config.iterations:
        return f"it holds {step:,} iterations, more than the {config.iterations:,} asked for"
    return None
