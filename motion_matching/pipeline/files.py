"""Where retrain puts its files, and what it may replace: the checks made before any stage runs.

The output folder (the toolkit's ``resources/``, say) receives the runtime's files (``RUNTIME_FILES``) and
the state file; the stages' own work (checkpoints, the neighbour cache, the C evaluator) lives in its
``retrain/`` folder. database.bin is never written. A runtime file already there that retrain did not
write (the state file has no record of it with its hash) is replaced only with ``force``, except a
features.bin byte-identical to the one retrain computes, which is kept as it is.
"""
import filecmp
import os
import shutil

from motion_matching.atomic import atomic_write
from motion_matching.errors import OverwriteRefused
from motion_matching.fingerprint import file_sha256
from motion_matching.pipeline.state import STATE_NAME, written_by_retrain
from motion_matching.toolkit.overwrite import same_file

WORK_FOLDER = "retrain"
RUNTIME_FILES = {"features": ("features.bin",), "decompressor": ("decompressor.bin", "latent.bin", "latent.json"),
                 "projector": ("projector.bin",), "stepper": ("stepper.bin",)}
NETWORK_FILES = {"decompressor": "decompressor.bin", "projector": "projector.bin", "stepper": "stepper.bin"}


def runtime_names():
    """Every runtime file name retrain writes into the output folder (list of str), in stage order."""
    return [name for names in RUNTIME_FILES.values() for name in names]


def work_path(out_dir, *parts):
    """A path (str) inside the output folder's ``retrain/`` work folder."""
    return os.path.join(os.fspath(out_dir), WORK_FOLDER, *parts)


def refuse_writing_database(out_dir, database_path):
    """Raise ``OverwriteRefused`` if ``database_path`` is one of the files retrain writes into ``out_dir``."""
    for name in runtime_names() + [STATE_NAME]:
        if same_file(database_path, os.path.join(out_dir, name)):
            raise OverwriteRefused(database_path, f"is the --database, and retrain writes its {name}: it never "
                                                  "writes the database; choose another --out")


def foreign_files(out_dir, stages, *, features_candidate):
    """Names (list of str) of the files in ``out_dir`` that retrain would replace but did not write: runtime
    files without a record of theirs in ``stages`` and unlike the bytes retrain makes (a features.bin equal to
    ``features_candidate``, the path of the one it computes, is kept; a network equal to the one in the work
    folder was installed from there), and a ``retrain/`` folder without a state file."""
    foreign = []
    for name in runtime_names():
        path = os.path.join(out_dir, name)
        if not os.path.lexists(path):
            continue
        digest = file_sha256(path) if os.path.isfile(path) else None
        if written_by_retrain(stages, name, digest):
            continue
        made = features_candidate if name == "features.bin" else _work_copy(out_dir, name)
        if digest is not None and os.path.isfile(made) and filecmp.cmp(path, made, shallow=False):
            continue  # the bytes retrain makes (or made, in a stage that stopped before its record was written)
        foreign.append(name)
    if os.path.lexists(work_path(out_dir)) and not os.path.exists(os.path.join(out_dir, STATE_NAME)):
        foreign.append(WORK_FOLDER + "/")
    return foreign


def _work_copy(out_dir, name):
    """The file in the work folder that the runtime file ``name`` is installed from (str)."""
    network = next(network for network, names in RUNTIME_FILES.items() if name in names)
    return work_path(out_dir, network, name)


def refuse_foreign_files(out_dir, stages, *, features_candidate, force):
    """Raise ``OverwriteRefused`` naming every file ``foreign_files`` finds, unless ``force``."""
    foreign = [] if force else foreign_files(out_dir, stages, features_candidate=features_candidate)
    if not foreign:
        return
    others = foreign[1:]
    also = f", nor {'were' if len(others) > 1 else 'was'} {_listed(others)}" if others else ""
    raise OverwriteRefused(os.path.join(out_dir, foreign[0]), f"was not written by retrain{also} (the toolkit's "
                                                              "own files?), and retrain writes these names",
                           option=f"--force to replace {'them' if others else 'it'}, or choose another --out")


def _listed(names):
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


def install(made, target):
    """Copy the file ``made`` onto ``target`` atomically, unless they are byte-identical already."""
    if os.path.isfile(target) and filecmp.cmp(made, target, shallow=False):
        return
    with open(made, "rb") as source, atomic_write(target) as stream:
        shutil.copyfileobj(source, stream)
