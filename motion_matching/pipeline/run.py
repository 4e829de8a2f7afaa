"""``run_retrain``: the stages in order, each run only when the state file says it is not up to date.

Before any stage runs, every refusal is made: a database.bin that cannot be read, an output folder whose
files retrain did not write (without ``force``), a network .bin there of another shape than the new one
will have. A stage is up to date when the state file records the SHA-256 of its inputs as they are now,
its settings as they are now, and outputs that are still there unchanged; a stage that ran is recorded at
once, so an interrupted run keeps what it finished and the stage it stopped in continues on the next run.
"""
import dataclasses
import functools
import os
import tempfile
import time
import typing

from motion_matching.atomic import check_folder_name, output_folder
from motion_matching.cache.targets import check_out as check_cache_out
from motion_matching.fingerprint import file_sha256
from motion_matching.pipeline import stages as work
from motion_matching.pipeline.files import WORK_FOLDER, refuse_foreign_files, refuse_writing_database, work_path
from motion_matching.pipeline.settings import RetrainSettings, recorded_settings
from motion_matching.pipeline.shapes import check_replaceable, expected_shapes
from motion_matching.pipeline.state import make_record, read_state, why_stale, write_state
from motion_matching.pipeline.verify import FRAMES, TOLERANCE, Skipped, verify_networks
from motion_matching.toolkit import formats

STAGES = ("features", "decompressor", "cache", "projector", "stepper", "verify")
CACHE_FILE = f"{WORK_FOLDER}/{work.CACHE_NAME}"  # the cache, as the state file names it


class Stage(typing.NamedTuple):
    """One stage to consider: ``inputs`` (file name -> path), ``settings`` (JSON-able), ``outputs`` (file
    names in the output folder), ``run()`` (does the work; returns its quality line or None), ``note`` (a line
    on the recipe it trains when that is not the asked one, or None)."""

    name: str
    inputs: dict
    settings: typing.Any
    outputs: list
    run: typing.Callable
    note: typing.Optional[str] = None


class StageResult(typing.NamedTuple):
    """What one stage did: ``status`` "ran", "up to date" or "skipped", ``seconds`` (float), ``quality`` (str
    or None), ``files`` (paths it made or keeps, list of str) and ``reason`` (why it ran or was skipped)."""

    name: str
    status: str
    seconds: float
    quality: typing.Optional[str]
    files: list
    reason: str = ""


def _checkpoints():
    from motion_matching.decompressor.train import CHECKPOINT_NAME as DECOMPRESSOR
    from motion_matching.projector.train import CHECKPOINT_NAME as PROJECTOR
    from motion_matching.stepper.train import CHECKPOINT_NAME as STEPPER
    return {"decompressor": DECOMPRESSOR, "projector": PROJECTOR, "stepper": STEPPER}


def _verify(context):
    checkpoints = {network: work_path(context.out_dir, network, name) for network, name in _checkpoints().items()}
    return verify_networks(context.out_dir, checkpoints=checkpoints)


def plan(context, candidate):
    """The six ``Stage``s of a run in ``context`` (a ``stages.Context``), the features computed into ``candidate``."""
    path, settings = context.path, context.settings
    database = {"database.bin": context.database_path}
    features = {"features.bin": path("features.bin")}
    latent = {"latent.bin": path("latent.bin")}
    networks = {name: path(name) for name in ("decompressor.bin", "projector.bin", "stepper.bin")}
    config = functools.partial(_settings_of, settings)
    stages = [
        Stage("features", database, {"builder": "C++-exact", "weights": "default"}, ["features.bin"],
              functools.partial(work.run_features, context, candidate)),
        Stage("decompressor", {**database, **features}, config("decompressor"),
              ["decompressor.bin", "latent.bin", "latent.json"], functools.partial(work.run_decompressor, context)),
        Stage("cache", features, work.cache_settings(settings), [CACHE_FILE],
              functools.partial(work.run_cache, context)),
        Stage("projector", {**database, **features, **latent, CACHE_FILE: context.cache_path}, config("projector"),
              ["projector.bin"], functools.partial(work.run_projector, context)),
        Stage("stepper", {**database, **features, **latent}, config("stepper"), ["stepper.bin"],
              functools.partial(work.run_stepper, context)),
        Stage("verify", {**features, **latent, **networks}, {"tolerance": TOLERANCE, "frames": FRAMES}, [],
              functools.partial(_verify, context)),
    ]
    return [stage._replace(note=settings.note(stage.name)) for stage in stages]


def _settings_of(settings, network):
    return recorded_settings(settings.config(network))


class _Hashes:
    """SHA-256 of files, each read once per run while its size and modification time stay the same."""

    def __init__(self):
        self.known = {}

    def __call__(self, path):
        if not os.path.isfile(path):
            return None
        status = os.stat(path)
        key = (os.path.abspath(path), status.st_size, status.st_mtime_ns)
        if key not in self.known:
            self.known[key] = file_sha256(path)
        return self.known[key]


def run_stage(stage, records, *, out_dir, hashes, announce):
    """Run ``stage`` unless ``records`` (the state's, updated and written when it runs) say it is up to
    date; ``announce(name, reason or None, note or None)`` first. Returns a ``StageResult``."""
    inputs = {name: hashes(path) for name, path in stage.inputs.items()}
    outputs = {name: hashes(os.path.join(out_dir, name)) for name in stage.outputs}
    files = [os.path.join(out_dir, name) for name in stage.outputs]
    reason = why_stale(records.get(stage.name), inputs=inputs, settings=stage.settings, outputs=outputs)
    announce(stage.name, reason, None if reason is None else stage.note)
    if reason is None:
        return StageResult(stage.name, "up to date", 0.0, records[stage.name].get("quality"), files)
    started = time.monotonic()
    try:
        quality = stage.run()
    except Skipped as why:
        return StageResult(stage.name, "skipped", time.monotonic() - started, None, [], str(why))
    seconds, before = time.monotonic() - started, outputs
    outputs = {name: hashes(os.path.join(out_dir, name)) for name in stage.outputs}
    records[stage.name] = make_record(inputs=inputs, settings=stage.settings, outputs=outputs, quality=quality,
                                      seconds=seconds)
    write_state(out_dir, records)
    # files that were already what the stage makes (a features.bin of the same bytes) were up to date
    kept = bool(stage.outputs) and None not in before.values() and before == outputs
    return StageResult(stage.name, "up to date" if kept else "ran", seconds, quality, files, reason)


def _check_before_running(context, records, candidate, *, force):
    """Every refusal, before any stage runs: database.bin never written, files retrain did not write (unless
    ``force``), a file in the cache's place that cannot be a cache (even with ``force``), network .bin files
    of another shape than the new ones. Returns the frames (int) of database.bin."""
    refuse_writing_database(context.out_dir, context.database_path)
    refuse_foreign_files(context.out_dir, records, features_candidate=candidate, force=force)
    check_cache_out(context.cache_path, features_path=context.path("features.bin"))
    database = formats.load_database(context.database_path)
    nfeatures = formats.load_features(candidate).features.shape[1]
    shapes = expected_shapes({"projector": context.settings.config("projector")}, nfeatures=nfeatures,
                             nbones=database.nbones)
    for name, shape in shapes.items():
        check_replaceable(context.path(name), shape)
    return database.nframes


def run_retrain(out_dir=".", *, database_path="database.bin", settings=None, force=False,
                announce=lambda name, reason, note: None, done=lambda result: None, cache_progress=None,
                train_progress=None, on_step=None, before_stages=lambda: None):
    """Run the stages into ``out_dir`` from ``database_path``; returns the ``StageResult`` of each (list).

    ``before_stages()`` once every refusal is made and ``out_dir`` exists, before the first stage;
    ``announce(stage name, why it runs or None when up to date, a note on its recipe or None)`` before each
    stage, ``done(StageResult)`` after it. ``force`` replaces files in ``out_dir`` that retrain did not write
    (never database.bin, never a network of another shape). Ctrl-C raises
    ``KeyboardInterrupt``; the finished stages are recorded.
    """
    out_dir, settings = os.fspath(out_dir), RetrainSettings() if settings is None else settings
    check_folder_name(out_dir)
    context = work.Context(out_dir, os.fspath(database_path), settings, cache_progress=cache_progress,
                           train_progress=train_progress, on_step=on_step)
    records = read_state(out_dir, force=force)
    with tempfile.TemporaryDirectory(prefix="mm-retrain-") as temporary:
        candidate = os.path.join(temporary, "features.bin")
        work.write_features_candidate(context.database_path, candidate)
        frames = _check_before_running(context, records, candidate, force=force)
        context = dataclasses.replace(context, settings=settings.for_database(frames))
        results, hashes = [], _Hashes()
        with output_folder(out_dir):
            before_stages()
            for stage in plan(context, candidate):
                results.append(run_stage(stage, records, out_dir=out_dir, hashes=hashes, announce=announce))
                done(results[-1])
        return results
