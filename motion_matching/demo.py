"""The whole retrain pipeline on synthetic data: a synthetic database.bin, then ``pipeline.run_retrain`` on it
(features, decompressor and latent, neighbour cache, projector, stepper, verify), then the projector's ONNX
export and its evaluation on held-out queries.

Run again into the same folder, the pipeline's up-to-date stages do nothing; a database.bin of another demo
(other --frames), and files of the demo's names that it did not write, are refused before anything is written
unless ``force``.
"""
import dataclasses
import filecmp
import importlib.util
import os
import tempfile
import time
import typing

from motion_matching.atomic import check_folder_name
from motion_matching.data.synthetic import locomotion
from motion_matching.errors import MismatchedFiles
from motion_matching.pipeline.files import install
from motion_matching.pipeline.run import run_retrain
from motion_matching.pipeline.settings import DEFAULT_RECIPE, NETWORKS, RetrainSettings
from motion_matching.toolkit import formats
from motion_matching.toolkit.sniff import file_kind

# export and evaluation load torch: they are imported when the demo runs, so that --help does not

STEPS = ("generate synthetic database", "export", "evaluate on held-out queries")  # around the pipeline's stages
DATABASE_NAME, ONNX_NAME, EVALUATION_FOLDER = "database.bin", "projector.onnx", "evaluation"


@dataclasses.dataclass(frozen=True)
class DemoSettings:
    """Sizes of a demo run. The defaults: every network's ``fast`` recipe on the 50,000-frame synthetic
    database, the pipeline measured in README "Measured".

    ``recipe`` and ``iterations`` (None: each recipe's) are every network's, as retrain's ``--recipe``; the
    neighbour cache holds one query per projector training sample (16,000,000 for either recipe).
    """

    frames: int = 50_000
    recipe: str = DEFAULT_RECIPE
    iterations: typing.Optional[int] = None
    database_seed: int = 0
    evaluation_queries: int = 10_000
    threads: typing.Optional[int] = None  # None: each stage's own policy

    def retrain_settings(self):
        """The ``RetrainSettings`` the demo's pipeline runs with."""
        iterations = {} if self.iterations is None else {network: self.iterations for network in NETWORKS}
        settings = RetrainSettings(recipe=self.recipe, iterations=iterations, threads=self.threads)
        projector = settings.config("projector")
        return dataclasses.replace(settings, cache_queries=projector.iterations * projector.batch_size)


class DemoResult(typing.NamedTuple):
    """What ``run_demo`` did: ``evaluation`` (``evaluate.evaluate_files``'s report dict), ``stages`` (the
    pipeline's ``StageResult`` list) and ``seconds`` (dict: the demo's own step name -> wall seconds, float)."""

    evaluation: dict
    stages: list
    seconds: dict


def _refuse_other_demo(database_path, made_path):
    """Raise ``MismatchedFiles`` if ``database_path`` exists and differs from the database just made."""
    if os.path.exists(database_path) and not filecmp.cmp(database_path, made_path, shallow=False):
        raise MismatchedFiles(database_path, "is another demo's (other --frames?) or not a demo's; choose another "
                                             "--out, or pass --force to replace it")


def _refuse_other_outputs(out_dir):
    """Raise ``OverwriteRefused`` if the export or the evaluation would replace files the demo did not write:
    said before the pipeline runs, not after."""
    from motion_matching.projector import evaluate, export
    onnx_path = os.path.join(out_dir, ONNX_NAME)
    if _exports_onnx() and os.path.lexists(onnx_path) and file_kind(onnx_path) != "an ONNX model":
        export.check_out(None, onnx_path)
    evaluate.check_replacing(os.path.join(out_dir, EVALUATION_FOLDER))


def _exports_onnx():
    return importlib.util.find_spec("onnx") is not None  # an optional extra; the .bin is the runtime's file


def _export(network_path, out_dir, *, force):
    """The export step: the runtime .bin (written by the pipeline) and, with the optional onnx extra, ONNX."""
    from motion_matching.projector import export
    exported = {"projector (runtime .bin)": network_path}
    if _exports_onnx():
        onnx_path = os.path.join(out_dir, ONNX_NAME)
        rerun = file_kind(onnx_path) == "an ONNX model"  # a rerun exports again; another kind of file needs force
        export.export_network(network_path, onnx_path, format="onnx", force=force or rerun)
        exported["projector (ONNX)"] = onnx_path
    return exported


def _evaluate(out_dir, settings, *, force):
    """The evaluation step: the evaluation report (dict) and the files it wrote (dict label -> path or paths)."""
    from motion_matching.projector import evaluate
    projector, features, latent, folder = (os.path.join(out_dir, name) for name in (
        "projector.bin", "features.bin", "latent.bin", EVALUATION_FOLDER))
    report = evaluate.evaluate_files(projector, features, latent, folder, nqueries=settings.evaluation_queries,
                                     threads=settings.threads, force=force)
    return report, {"report": report["files"][0],
                    "plots (PNG: truth, output and query per column)": report["files"][1:]}


def _retrain(out_dir, settings, made_path, *, force, placed, stages):
    """Run the pipeline from the database at ``made_path``; ``placed()`` once its refusals are made (the database
    is then installed into ``out_dir``). Returns its ``StageResult`` list."""
    database_path = os.path.join(out_dir, DATABASE_NAME)

    def place_database():
        install(made_path, database_path)
        placed()
    return run_retrain(out_dir, database_path=made_path, settings=settings.retrain_settings(), force=force,
                       before_stages=place_database, **stages)


def run_demo(out_dir, settings=DemoSettings(), *, force=False, announce=lambda step: None,
             report=lambda step, paths, seconds: None, stages=None):
    """Run every step into ``out_dir``: ``announce(step name)`` before each of the demo's own steps,
    ``report(step name, {label: path or list of paths}, seconds)`` after it; ``stages`` (dict) goes to
    ``run_retrain`` as its hooks (``announce``, ``done``, ``cache_progress``, ``train_progress``). Files the demo
    did not write, or another demo's database.bin, are replaced only with ``force``. Returns a ``DemoResult``.
    """
    out_dir = os.fspath(out_dir)
    check_folder_name(out_dir)
    seconds, database_path = {}, os.path.join(out_dir, DATABASE_NAME)

    def timed(step, started, paths):
        seconds[step] = time.monotonic() - started
        report(step, paths, seconds[step])

    started = time.monotonic()
    announce(STEPS[0])
    with tempfile.TemporaryDirectory(prefix="mm-demo-") as made_dir:
        made_path = os.path.join(made_dir, DATABASE_NAME)
        formats.save_database(made_path, locomotion.generate_synthetic_database(seed=settings.database_seed,
                                                                                nframes=settings.frames))
        if not force:
            _refuse_other_demo(database_path, made_path)
            _refuse_other_outputs(out_dir)
        results = _retrain(out_dir, settings, made_path, force=force, stages=stages or {},
                           placed=lambda: timed(STEPS[0], started, {"database": database_path}))
    started = time.monotonic()
    announce(STEPS[1])
    timed(STEPS[1], started, _export(os.path.join(out_dir, "projector.bin"), out_dir, force=force))
    started = time.monotonic()
    announce(STEPS[2])
    evaluation, files = _evaluate(out_dir, settings, force=force)
    timed(STEPS[2], started, files)
    return DemoResult(evaluation, results, seconds)


# Measured by benchmarks/bench_quality.py on the default demo database (50,000 synthetic frames, database
# seed 0), 10,000 held-out queries of seed 271828, as the demo's evaluation: see BENCHMARKS.md, "Training
# recipes". Those projectors were trained on the stand-in latent.bin, not on a decompressor's.
REFERENCE_SOURCE = "BENCHMARKS.md, bench_quality on the 50,000-frame synthetic database, 2-core CPU"
REFERENCE = (  # (recipe name, what ran, held-out top-1, training time on the 2-core machine)
    ("toolkit", "toolkit recipe (batch 32, 500,000 iterations)", 0.3177, "34 min 42 s (1 thread, its fastest)"),
    ("seed", "seed's recipe (batch 1,024, 50,000 iterations)", 0.3237, "30 min 19 s (2 threads)"),
    ("fast", "fast recipe (batch 1,024, 15,625 iterations, bfloat16)", 0.3313, "4 min 46 s (2 threads)"),
)
LIKE_FOR_LIKE = ("   (those projectors learnt the stand-in latent.bin, this one the decompressor's: top-1, which "
                 "matches the features alone, and the time compare; the held-out loss, which weighs the latent, "
                 "does not)")


def describe_duration(seconds):
    """``seconds`` (float) in words: ``"52 s"``, ``"2 min 21 s"``, ``"1 h 02 min"``."""
    seconds = max(int(round(seconds)), 0)
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60} s"
    return f"{seconds // 3600} h {seconds // 60 % 60:02d} min"


def describe_projector_stage(stage):
    """What this run's projector stage did and how long it took (str), for ``stage`` (its ``StageResult``)."""
    if stage.status != "ran":
        return "no training (the projector stage was up to date: an earlier run trained it)"
    return f"the projector stage took {describe_duration(stage.seconds)}"


def compare_with_reference(result, settings):
    """Lines (str) putting the demo's held-out top-1 and projector training time (``result``: a ``DemoResult``)
    beside the projector recipes' measured results, saying what compares."""
    if not REFERENCE:
        return []
    default = DemoSettings()
    differs = [name for name in ("frames", "recipe", "iterations", "database_seed")
               if getattr(settings, name) != getattr(default, name)]
    lines = [f"compared with the measured projector recipes ({REFERENCE_SOURCE}):"]
    lines += [f"   {what}: top-1 {top1:.1%}, {wall} of training" for _, what, top1, wall in REFERENCE]
    walls = {recipe: wall for recipe, _, _, wall in REFERENCE}
    reference = f" (the {settings.recipe} recipe's reference: {walls[settings.recipe]})" \
        if settings.recipe in walls else ""
    note = f" (settings differ from the measured demo: {', '.join(differs)})" if differs else ""
    projector = next(stage for stage in result.stages if stage.name == "projector")
    lines.append(f"   this run: top-1 {result.evaluation['match']['top1']:.1%}, "
                 f"{describe_projector_stage(projector)}{reference}{note}")
    return lines + [LIKE_FOR_LIKE]
