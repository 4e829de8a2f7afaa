"""Exact resume: a checkpoint's state back into a run, after checking it is this run's to continue."""
import torch

from motion_matching.errors import InvalidFile, MismatchedFiles
from motion_matching.training.checkpoint import load_checkpoint
from motion_matching.training.config import numeric_differences


def checkpoint_mismatches(payload, config, hashes):
    """What keeps a run of ``config``, on inputs of SHA-256 ``hashes`` ({name: hex digest}), from continuing
    the loaded checkpoint ``payload``: ``(saved config, names of the settings that differ, names of the
    inputs that differ)``. A garbled payload raises KeyError, TypeError or ValueError."""
    saved = type(config).from_dict(payload["config"])
    changed = [name for name, digest in hashes.items() if payload["inputs"].get(name) != digest]
    return saved, numeric_differences(saved, config), changed


def restore_checkpoint(run, path):
    """Load checkpoint ``path`` into ``run`` (a ``TrainingRun``: model, optimiser, schedule, step, rolling
    loss, RNG); raises naming the file when it is another run's or damaged."""
    payload = load_checkpoint(path)
    try:
        saved, settings, inputs = checkpoint_mismatches(payload, run.config, run.inputs.hashes)
        for name in settings:
            option = "--" + name.replace("_", "-")
            raise MismatchedFiles(path, f"was written with {option} {getattr(saved, name)}, this run has "
                                        f"{getattr(run.config, name)}", option="the same value to resume")
        for name in inputs:
            raise MismatchedFiles(path, f"was trained on another {name}.bin than "
                                        f"{getattr(run.inputs, name + '_path')}")
        run.module.load_state_dict(payload["model"])
        run.optimizer.load_state_dict(payload["optimizer"])
        run.scheduler.load_state_dict(payload["scheduler"])
        run.step, run.rolling = int(payload["step"]), payload["rolling_loss"]
        run.recorded_threads = payload.get("threads")  # checkpoints before the thread policy have none
        run.stream_state = payload["rng"].get("toolkit_stream")
        torch.set_rng_state(payload["rng"]["torch"])
        if "cuda" in payload["rng"] and run.device.type == "cuda":
            torch.cuda.set_rng_state(payload["rng"]["cuda"], run.device)
    except (KeyError, TypeError, RuntimeError, ValueError) as error:
        raise InvalidFile(path, f"is a damaged checkpoint (it lacks or garbles {error})") from None
