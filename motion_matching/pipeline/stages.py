"""The work of each retrain stage: features, decompressor, neighbour cache, projector, stepper.

Each function runs one stage with the package's own library call (the same code as the stage's own
command) into the ``retrain/`` work folder, where a rerun continues what an interrupted one left
(checkpoints, the cache's partial file), then installs the runtime files into the output folder once the
new network has the shape of the one it replaces. Each returns its quality line (str) or None.
"""
import dataclasses
import os
import typing

from motion_matching.cache import build_cache
from motion_matching.data.features import compute_features
from motion_matching.pipeline.files import NETWORK_FILES, RUNTIME_FILES, install, work_path
from motion_matching.pipeline.shapes import check_replaceable, network_shape
from motion_matching.toolkit import formats

CACHE_NAME = "projector_cache.h5"
# each stage's training ``force``: in its own work folder retrain replaces a run of other settings unasked
OWN_WORK = "retrain's own work file"


@dataclasses.dataclass(frozen=True)
class Context:
    """What every stage needs: the folders, database.bin, the run's settings and its progress hooks.

    ``cache_progress(done, total)`` and ``train_progress(Progress)`` feed the stages' own bars;
    ``on_step(step, module)`` is called after every training iteration (None: not called).
    """

    out_dir: str
    database_path: str
    settings: typing.Any
    cache_progress: typing.Optional[typing.Callable] = None
    train_progress: typing.Optional[typing.Callable] = None
    on_step: typing.Optional[typing.Callable] = None

    def path(self, name):
        """A path (str) in the output folder."""
        return os.path.join(self.out_dir, name)

    @property
    def cache_path(self):
        """The neighbour cache's path (str) in the work folder."""
        return work_path(self.out_dir, CACHE_NAME)


def write_features_candidate(database_path, path):
    """Compute the matching features of ``database_path`` with the C++-exact builder (as
    ``generate-database --database`` does) and write them to ``path``; returns the frame count."""
    database = formats.load_database(database_path)
    formats.save_features(path, compute_features(database, source=database_path))
    return database.nframes


def run_features(context, candidate):
    """Install the features computed into ``candidate`` as features.bin (kept when byte-identical)."""
    install(candidate, context.path("features.bin"))
    return None


def _install_network(context, network, result_folder):
    """Check the new network's shape against the file it replaces, then install it and its companions."""
    name = NETWORK_FILES[network]
    check_replaceable(context.path(name), network_shape(os.path.join(result_folder, name)))
    for companion in RUNTIME_FILES[network]:
        if companion != name:
            install(os.path.join(result_folder, companion), context.path(companion))
    install(os.path.join(result_folder, name), context.path(name))  # the network last: the others belong to it


def run_decompressor(context):
    """Train the decompressor (its checkpoint continued), install decompressor.bin, latent.bin and latent.json;
    the quality line is the mean joint position error over every frame (``decompressor.evaluate``)."""
    from motion_matching.decompressor.evaluate import evaluate_decompressor
    from motion_matching.decompressor.train import train_decompressor
    folder = work_path(context.out_dir, "decompressor")
    train_decompressor(context.settings.config("decompressor"), database_path=context.database_path,
                       features_path=context.path("features.bin"), out_dir=folder, progress=context.train_progress,
                       force=OWN_WORK, on_step=context.on_step)
    _install_network(context, "decompressor", folder)
    report, _ = evaluate_decompressor(context.path("decompressor.bin"), context.path("latent.bin"),
                                      database_path=context.database_path, features_path=context.path("features.bin"))
    return f"mean joint position error {report['position_error_cm']['mean']:.2f} cm"


def cache_settings(settings):
    """The cache stage's settings (dict): its query count and the projector's seed, whose stream it holds."""
    return {"queries": int(settings.cache_queries), "seed": int(settings.config("projector").seed)}


def run_cache(context):
    """Build (or resume, or grow) the neighbour cache of features.bin in the work folder."""
    wanted = cache_settings(context.settings)
    os.makedirs(work_path(context.out_dir), exist_ok=True)
    result = build_cache(context.path("features.bin"), out=context.cache_path, nqueries=wanted["queries"],
                         seed=wanted["seed"], threads=context.settings.threads, progress=context.cache_progress,
                         force=True)
    return f"{result.nqueries:,} queries"


def run_projector(context):
    """Train the projector offline from the cache (its checkpoint continued), install projector.bin; the
    quality line is its held-out loss."""
    from motion_matching.projector.train import train_projector
    folder = work_path(context.out_dir, "projector")
    result = train_projector(context.settings.config("projector"), features_path=context.path("features.bin"),
                             latent_path=context.path("latent.bin"), database_path=context.database_path,
                             offline_cache=context.cache_path, out_dir=folder, progress=context.train_progress,
                             force=OWN_WORK, on_step=context.on_step)
    _install_network(context, "projector", folder)
    return f"held-out loss {result.held_out['loss']:.4f}" if result.held_out else None


def run_stepper(context):
    """Train the stepper (its checkpoint continued), install stepper.bin; the quality line is its final
    rolling training loss."""
    from motion_matching.stepper.train import train_stepper
    folder = work_path(context.out_dir, "stepper")
    result = train_stepper(context.settings.config("stepper"), database_path=context.database_path,
                           features_path=context.path("features.bin"), latent_path=context.path("latent.bin"),
                           out_dir=folder, progress=context.train_progress, force=OWN_WORK, on_step=context.on_step)
    _install_network(context, "stepper", folder)
    return f"training loss {result.final_loss:.4f}"
