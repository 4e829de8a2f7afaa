"""The whole pipeline on synthetic data: database -> exact-neighbour cache -> offline training -> export -> evaluate.

Run again into the same folder, the demo reuses what fits (identical database files, the cache's rows,
the training checkpoint) and refuses, before writing anything, files of another demo unless ``force``.
"""
import contextlib
import dataclasses
import filecmp
import functools
import importlib.util
import os
import shutil
import tempfile
import time
import typing

import h5py

from motion_matching.atomic import check_folder_name, output_folder
from motion_matching.cache import build_cache
from motion_matching.cache.targets import check_out as check_cache_out
from motion_matching.data import generate
from motion_matching.errors import CorruptCache, MismatchedFiles
from motion_matching.fingerprint import file_sha256
from motion_matching.projector.recipes import recipe_config
from motion_matching.toolkit import recipe as toolkit_recipe
from motion_matching.toolkit.sniff import file_kind

# training, export and evaluation load torch: they are imported when the demo runs, so that --help does not

STEPS = ("generate synthetic database", "build exact-neighbour cache", "train offline", "export",
         "evaluate on held-out queries")
TOOLKIT_FILES = ("database.bin", "features.bin", "latent.bin")
ONNX_NAME, EVALUATION_FOLDER, CACHE_NAME = "projector.onnx", "evaluation", "projector_cache.h5"


@dataclasses.dataclass(frozen=True)
class DemoSettings:
    """Sizes of a demo run; the defaults (the ``fast`` recipe as it is, on the 50,000-frame synthetic database
    that ``REFERENCE`` was measured on); on 2 idle cores the cache and the training take 71 s and 4 min 46 s in
    the recorded benchmark runs, 52 s and 2 min 21 s in a fresh-clone run (README, "Measured").

    ``iterations`` and ``batch_size`` None: the recipe's.
    """

    frames: int = 50_000
    recipe: str = "fast"
    iterations: typing.Optional[int] = None
    batch_size: typing.Optional[int] = None
    seed: int = toolkit_recipe.SEED
    database_seed: int = 0
    evaluation_queries: int = 10_000
    threads: typing.Optional[int] = None  # None: every core, for the searches and for training

    def train_config(self):
        """The demo's ``TrainConfig``: the recipe, with the sizes given here."""
        sizes = {name: getattr(self, name) for name in ("iterations", "batch_size", "threads")
                 if getattr(self, name) is not None}
        config = recipe_config(self.recipe, seed=self.seed, **sizes)
        return dataclasses.replace(config, checkpoint_every=config.iterations)

    @property
    def cache_queries(self):
        """One cached query per training sample, so the demo never reuses a query."""
        config = self.train_config()
        return config.iterations * config.batch_size


def _differing(out_dir, made_dir):
    """Names of the toolkit files in ``out_dir`` that differ from those just made in ``made_dir``."""
    return [name for name in TOOLKIT_FILES if os.path.exists(os.path.join(out_dir, name))
            and not filecmp.cmp(os.path.join(out_dir, name), os.path.join(made_dir, name), shallow=False)]


def _refuse_other_demo(out_dir, made_dir, config):
    """Raise ``MismatchedFiles`` if ``out_dir`` holds files of another demo or a training run it cannot continue."""
    from motion_matching.projector import train
    from motion_matching.training.rerun import checkpoint_problem
    differing = _differing(out_dir, made_dir)
    if differing:
        raise MismatchedFiles(os.path.join(out_dir, differing[0]), f"{', '.join(differing)} of another demo (other "
                              "--frames?) are in this folder; choose another --out, or pass --force to replace them")
    hashes = {name: file_sha256(os.path.join(made_dir, f"{name}.bin")) for name in ("features", "latent")}
    checkpoint = os.path.join(out_dir, train.CHECKPOINT_NAME)
    problem = checkpoint_problem(checkpoint, config, hashes)
    if problem is not None:
        raise MismatchedFiles(checkpoint, f"holds another demo's training ({problem}); choose another --out, or "
                                          "pass --force to replace it")
    cache = os.path.join(out_dir, CACHE_NAME)
    if os.path.exists(cache) and not h5py.is_hdf5(cache):  # what build-cache refuses, said before anything is written
        raise CorruptCache(cache, f"is {file_kind(cache) or 'not HDF5'}, not a cache; choose another --out, or pass "
                                  "--force to replace it")
    network = os.path.join(out_dir, train.NETWORK_NAME)
    if not os.path.exists(checkpoint) and os.path.exists(network):  # what training refuses, said before it runs
        raise MismatchedFiles(network, f"is another run's (no {train.CHECKPOINT_NAME} beside it to continue from); "
                                       "choose another --out, or pass --force to replace it")
    _refuse_other_outputs(out_dir)


def _refuse_other_outputs(out_dir):
    """Raise ``OverwriteRefused`` if the export or the evaluation would replace files the demo did not write:
    said before the demo trains, not after."""
    from motion_matching.projector import evaluate, export
    onnx_path = os.path.join(out_dir, ONNX_NAME)
    if _exports_onnx() and os.path.lexists(onnx_path) and file_kind(onnx_path) != "an ONNX model":
        export.check_out(None, onnx_path)
    evaluate.check_replacing(os.path.join(out_dir, EVALUATION_FOLDER))


def _place_toolkit_files(out_dir, made_dir):
    """Move the files made in ``made_dir`` into ``out_dir`` where they are absent or differ; returns their paths."""
    paths, differing = {}, _differing(out_dir, made_dir)  # compared once: each comparison reads both files
    for name in TOOLKIT_FILES:
        target = os.path.join(out_dir, name)
        if not os.path.exists(target) or name in differing:
            shutil.copyfile(os.path.join(made_dir, name), target + ".partial")
            os.replace(target + ".partial", target)
        paths[name.split(".")[0]] = target
    return paths


class DemoResult(typing.NamedTuple):
    """What ``run_demo`` did: ``evaluation`` (``evaluate.evaluate_files``'s report dict), ``trained`` (the
    ``TrainResult``) and ``seconds`` (dict step name -> wall seconds of that step, float)."""

    evaluation: dict
    trained: typing.Any
    seconds: dict


@contextlib.contextmanager
def _step(name, *, announce, report, seconds):
    """Announce step ``name``, time it, then report the paths (dict) that its ``with`` block put in the dict it gets."""
    announce(name)
    started, paths = time.monotonic(), {}
    yield paths
    seconds[name] = time.monotonic() - started
    report(name, paths, seconds[name])


def _make_toolkit_files(out_dir, settings, config, *, force):
    """Generate the synthetic database files and place them in ``out_dir``, once the files there that the demo
    may not replace are refused (``_refuse_other_demo``; a non-cache in the cache's place even with ``force``);
    returns their paths (dict)."""
    with tempfile.TemporaryDirectory(prefix="mm-demo-") as made_dir:
        generate.generate_files(made_dir, seed=settings.database_seed, nframes=settings.frames)
        check_cache_out(os.path.join(out_dir, CACHE_NAME), features_path=os.path.join(out_dir, "features.bin"))
        if not force:
            _refuse_other_demo(out_dir, made_dir, config)
        with output_folder(out_dir):
            return _place_toolkit_files(out_dir, made_dir)


def _exports_onnx():
    return importlib.util.find_spec("onnx") is not None  # an optional extra; the .bin is the runtime's file


def _export(checkpoint_path, network_path, out_dir, *, force):
    """The export step: the runtime .bin (written by training) and, with the optional onnx extra, ONNX."""
    from motion_matching.projector import export
    exported = {"projector (runtime .bin)": network_path}
    if _exports_onnx():
        onnx_path = os.path.join(out_dir, ONNX_NAME)
        rerun = file_kind(onnx_path) == "an ONNX model"  # a rerun exports again; another kind of file needs force
        export.export_network(checkpoint_path, onnx_path, format="onnx", force=force or rerun)
        exported["projector (ONNX)"] = onnx_path
    return exported


def run_demo(out_dir, settings=DemoSettings(), *, force=False, announce=lambda step: None,
             report=lambda step, paths, seconds: None, cache_progress=None, train_progress=None):
    """Run every step into ``out_dir``: ``announce(step name)`` before each step, ``report(step name,
    {label: path or list of paths}, seconds)`` after it. Files of another demo there are replaced only with
    ``force``. Returns a ``DemoResult``.
    """
    from motion_matching.projector import evaluate, train
    check_folder_name(out_dir)
    config, seconds = settings.train_config(), {}
    step = functools.partial(_step, announce=announce, report=report, seconds=seconds)
    with step(STEPS[0]) as paths:
        files = _make_toolkit_files(out_dir, settings, config, force=force)
        paths.update(files)
    cache_path = os.path.join(out_dir, CACHE_NAME)
    with step(STEPS[1]) as paths:
        build_cache(files["features"], out=cache_path, nqueries=settings.cache_queries,
                    seed=settings.seed, threads=settings.threads, progress=cache_progress, force=force)
        paths["cache"] = cache_path
    with step(STEPS[2]) as paths:
        trained = train.train_projector(config, features_path=files["features"], latent_path=files["latent"],
                                        database_path=files["database"], offline_cache=cache_path, out_dir=out_dir,
                                        progress=train_progress, force=force)
        paths.update(projector=trained.network_path, checkpoint=trained.checkpoint_path)
    with step(STEPS[3]) as paths:
        paths.update(_export(trained.checkpoint_path, trained.network_path, out_dir, force=force))
    with step(STEPS[4]) as paths:
        evaluation = evaluate.evaluate_files(trained.network_path, files["features"], files["latent"],
                                             os.path.join(out_dir, EVALUATION_FOLDER),
                                             nqueries=settings.evaluation_queries, threads=settings.threads,
                                             force=force)
        paths.update({"report": evaluation["files"][0],
                      "plots (PNG: truth, output and query per column)": evaluation["files"][1:]})
    return DemoResult(evaluation, trained, seconds)


# Measured by benchmarks/bench_quality.py on the default demo database (50,000 synthetic frames, database
# seed 0), 10,000 held-out queries of seed 271828, as the demo's evaluation: see BENCHMARKS.md, "Training recipes".
REFERENCE_SOURCE = "BENCHMARKS.md, bench_quality on the 50,000-frame synthetic database, 2-core CPU"
REFERENCE = (  # (recipe name, what ran, held-out top-1, held-out loss, training time on the 2-core machine)
    ("toolkit", "toolkit recipe (batch 32, 500,000 iterations)", 0.3177, 0.5056, "34 min 42 s (1 thread, its fastest)"),
    ("seed", "seed's recipe (batch 1,024, 50,000 iterations)", 0.3237, 0.4988, "30 min 19 s (2 threads)"),
    ("fast", "fast recipe (batch 1,024, 15,625 iterations, bfloat16)", 0.3313, 0.4863, "4 min 46 s (2 threads)"),
)


def describe_duration(seconds):
    """``seconds`` (float) in words: ``"52 s"``, ``"2 min 21 s"``, ``"1 h 02 min"``."""
    seconds = max(int(round(seconds)), 0)
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60} s"
    return f"{seconds // 3600} h {seconds // 60 % 60:02d} min"


def describe_training(trained, seconds):
    """How long this run's training took (str), for ``trained`` (a ``TrainResult``) in ``seconds`` (float)."""
    if trained.resumed_from >= trained.steps:
        return f"no training (its {trained.steps:,} iterations were done by an earlier run)"
    if trained.resumed_from:
        return (f"{describe_duration(seconds)} for iterations {trained.resumed_from:,}-{trained.steps:,} "
                "(an earlier run did the first ones)")
    return f"{describe_duration(seconds)} of training"


def compare_with_reference(result, settings):
    """Lines (str) putting the demo's held-out top-1, loss and training time (``result``: a ``DemoResult``)
    beside the recipes' measured results."""
    if not REFERENCE:
        return []
    default = DemoSettings()
    differs = [name for name in ("frames", "recipe", "iterations", "batch_size", "seed", "database_seed")
               if getattr(settings, name) != getattr(default, name)]
    lines = [f"compared with the measured recipes ({REFERENCE_SOURCE}):"]
    lines += [f"   {what}: top-1 {top1:.1%}, held-out loss {loss:.4f}, {wall} of training"
              for _, what, top1, loss, wall in REFERENCE]
    walls = {recipe: wall for recipe, _, _, _, wall in REFERENCE}
    reference = f" (the {settings.recipe} recipe's reference: {walls[settings.recipe]})" \
        if settings.recipe in walls else ""
    note = f" (settings differ from the measured demo: {', '.join(differs)})" if differs else ""
    evaluation, trained = result.evaluation, result.trained
    lines.append(f"   this run: top-1 {evaluation['match']['top1']:.1%}, held-out loss "
                 f"{evaluation['losses']['loss']:.4f}, "
                 f"{describe_training(trained, result.seconds.get(STEPS[2], 0.0))}{reference}{note}")
    return lines
