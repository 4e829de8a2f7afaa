"""The whole pipeline on synthetic data: database -> exact-neighbour cache -> offline training -> export -> evaluate."""
import dataclasses
import importlib.util
import os
import typing

from motion_matching.cache import build_cache
from motion_matching.data import generate
from motion_matching.projector import evaluate, export, train
from motion_matching.projector.config import TrainConfig
from motion_matching.toolkit import recipe


@dataclasses.dataclass(frozen=True)
class DemoSettings:
    """Sizes of a demo run; the defaults finish in a few minutes on 2 cores."""

    frames: int = 50_000
    iterations: int = 10_000
    batch_size: int = recipe.BATCH_SIZE
    seed: int = recipe.SEED
    database_seed: int = 0
    evaluation_queries: int = 10_000
    threads: typing.Optional[int] = None  # None: every core, for the searches and for training

    @property
    def cache_queries(self):
        """One cached query per training sample, so the demo never reuses a query."""
        return self.iterations * self.batch_size


def run_demo(out_dir, settings=DemoSettings(), *, report=lambda step, paths: None, cache_progress=None,
             train_progress=None):
    """Run every step into ``out_dir``; ``report(step name, {label: path})`` is called after each step.

    Returns the evaluation report dict (see ``evaluate.evaluate_files``).
    """
    os.makedirs(out_dir, exist_ok=True)
    files = generate.generate_files(out_dir, seed=settings.database_seed, nframes=settings.frames)
    report("generate synthetic database", files)
    cache_path = os.path.join(out_dir, "projector_cache.h5")
    build_cache(files["features"], out=cache_path, nqueries=settings.cache_queries,
                seed=settings.seed, threads=settings.threads, progress=cache_progress)
    report("build exact-neighbour cache", {"cache": cache_path})
    config = TrainConfig(iterations=settings.iterations, batch_size=settings.batch_size, seed=settings.seed,
                         threads=settings.threads, checkpoint_every=settings.iterations)
    trained = train.train_projector(config, features_path=files["features"], latent_path=files["latent"],
                                    database_path=files["database"], offline_cache=cache_path, out_dir=out_dir,
                                    progress=train_progress)
    report("train offline", {"projector": trained.network_path, "checkpoint": trained.checkpoint_path})
    exported = {"projector (runtime .bin)": trained.network_path}
    if importlib.util.find_spec("onnx") is not None:  # an optional extra; the .bin is the runtime's file
        onnx_path = os.path.join(out_dir, "projector.onnx")
        export.export_network(trained.checkpoint_path, onnx_path, format="onnx")
        exported["projector (ONNX)"] = onnx_path
    report("export", exported)
    evaluation = evaluate.evaluate_files(trained.network_path, files["features"], files["latent"],
                                         os.path.join(out_dir, "evaluation"), nqueries=settings.evaluation_queries,
                                         threads=settings.threads)
    report("evaluate on held-out queries", {"report": evaluation["files"][0]})
    return evaluation
