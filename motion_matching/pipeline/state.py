"""The retrain state file: what each stage last made, from what, with which settings.

Layout of ``retrain.json`` (JSON object, written atomically after every stage that ran): ``format``
"mm-retrain-state", ``version`` 1, ``stages``: stage name -> record. A record holds ``inputs`` (file
name -> SHA-256 of the file the stage read), ``settings`` (a JSON object: its recipe and overrides,
resolved), ``outputs`` (file name, relative to the output folder -> SHA-256 of the file it left),
``quality`` (a line, or null) and ``seconds`` (the wall time of the run that made it). A stage is up to
date when all three match the files and settings of now; a file is "written by retrain" when a record
names it with the hash it still has.
"""
import json
import os

from motion_matching.atomic import atomic_write
from motion_matching.errors import InvalidFile
from motion_matching.fingerprint import file_sha256

FORMAT, VERSION, STATE_NAME = "mm-retrain-state", 1, "retrain.json"


def state_path(out_dir):
    """The state file's path (str) in ``out_dir``."""
    return os.path.join(os.fspath(out_dir), STATE_NAME)


def read_state(out_dir, *, force=False):
    """The stage records (dict name -> record) of the state file in ``out_dir``: {} when there is none, or,
    with ``force``, when it cannot be read; ``InvalidFile`` naming it otherwise."""
    path = state_path(out_dir)
    if not os.path.lexists(path):
        return {}
    try:
        with open(path, encoding="utf-8") as stream:
            state = json.load(stream)
        if state.get("format") != FORMAT or state.get("version") != VERSION or not isinstance(state["stages"], dict):
            raise ValueError("not a retrain state file")
        return state["stages"]
    except (OSError, ValueError, AttributeError, KeyError, TypeError):
        if force:
            return {}
        raise InvalidFile(path, f"is not a state file of this version of retrain ({FORMAT} {VERSION}): it would be "
                                "replaced", option="--force to replace it, or choose another --out") from None


def write_state(out_dir, stages):
    """Write ``stages`` (dict name -> record) to the state file in ``out_dir``, atomically."""
    with atomic_write(state_path(out_dir), "w") as stream:
        json.dump({"format": FORMAT, "version": VERSION, "stages": stages}, stream, indent=1, sort_keys=True)
        stream.write("\n")


def file_hashes(out_dir, names):
    """{name: SHA-256 or None when absent} of files ``names`` (relative to ``out_dir``)."""
    paths = {name: os.path.join(os.fspath(out_dir), name) for name in names}
    return {name: file_sha256(path) if os.path.isfile(path) else None for name, path in paths.items()}


def make_record(*, inputs, settings, outputs, quality, seconds):
    """A stage's record (dict), ``outputs`` a dict name -> SHA-256 of the files it left."""
    return {"inputs": dict(inputs), "settings": settings, "outputs": dict(outputs), "quality": quality,
            "seconds": round(float(seconds), 3)}


def why_stale(record, *, inputs, settings, outputs):
    """Why a stage must run (str), or None when ``record`` (or None) holds exactly these ``inputs`` (name ->
    SHA-256), ``settings`` and ``outputs`` (name -> SHA-256 now, None when absent)."""
    if record is None:
        return "never run here"
    changed = sorted(name for name in set(inputs) | set(record.get("inputs", {}))
                     if inputs.get(name) != record.get("inputs", {}).get(name))
    if changed:
        return f"{', '.join(changed)} changed"
    if json.loads(json.dumps(settings)) != record.get("settings"):
        return "its settings changed"
    missing = sorted(name for name, digest in outputs.items() if digest is None)
    if missing:
        return f"{', '.join(missing)} missing"
    replaced = sorted(name for name, digest in outputs.items() if record.get("outputs", {}).get(name) != digest)
    return f"{', '.join(replaced)} changed since" if replaced else None


def written_by_retrain(stages, name, digest):
    """True if some record of ``stages`` left the file ``name`` (relative to the output folder) with ``digest``."""
    return digest is not None and any(record.get("outputs", {}).get(name) == digest for record in stages.values())
