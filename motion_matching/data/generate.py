"""Make the toolkit's three data files (database.bin, features.bin, latent.bin) from one source.

Sources: the synthetic locomotion generator, an existing database.bin (recompute features and
latent after editing it), or BVH files (via ``bvh.importer``, imported lazily). This is the library
side of ``generate_database.py`` and ``mm-projector generate-database``.
"""
import itertools
import logging
import os
import time

from motion_matching.atomic import check_folder_name, output_folder, staged_files
from motion_matching.data.features import DEFAULT_WEIGHTS, compute_features
from motion_matching.data.latent import DEFAULT_NLATENT, compute_latent, load_matching_latent
from motion_matching.data.synthetic import locomotion
from motion_matching.errors import InvalidFile, MismatchedFiles, MissingFile, OverwriteRefused, WriteFailed
from motion_matching.toolkit.formats import load_database, save_database, save_features, save_latent
from motion_matching.toolkit.overwrite import refuse_existing, same_file

LOG = logging.getLogger(__name__)


def write_toolkit_files(out_dir, database, *, weights=DEFAULT_WEIGHTS, latent=None,
                        nlatent=DEFAULT_NLATENT, write_database=True, source="<database>"):
    """Write database.bin (unless ``write_database`` is False), features.bin and latent.bin into ``out_dir``.

    Everything is computed before anything is written, and the files are written to temporary names
    and renamed together at the end: a failure leaves every existing file as it was. ``latent`` (F, L)
    float32 replaces the stand-in latent when given. ``source`` names the database in errors. Returns
    {"database": path (if written), "features": path, "latent": path}.
    """
    if latent is not None and latent.shape[0] != database.nframes:
        raise MismatchedFiles("<latent>", f"has {latent.shape[0]} frames but {source} has {database.nframes}")
    started = time.perf_counter()
    matching = compute_features(database, weights=weights, source=source)
    LOG.info("features: %d frames in %.2f s", database.nframes, time.perf_counter() - started)
    if latent is None:
        latent = compute_latent(database, nlatent=nlatent)
        LOG.info("latent.bin: the synthetic stand-in (for demonstrations: no decompressor.bin decodes it; "
                 "train-decompressor trains the real one)")
    paths = {name: os.path.join(out_dir, f"{name}.bin") for name in ("database", "features", "latent")
             if write_database or name != "database"}
    make_folder(out_dir)
    with staged_files(paths.values()) as staged:
        if write_database:
            save_database(staged[paths["database"]], database)
        save_features(staged[paths["features"]], matching)
        save_latent(staged[paths["latent"]], latent)
    return paths


def make_folder(folder):
    """Create ``folder`` (and its parents) if needed; raises ``WriteFailed`` naming it if that fails."""
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as error:
        raise WriteFailed(folder, f"cannot create the folder ({error.strerror or error})") from None


def check_extra_outputs(*, bvh_dir=None, plot_path=None):
    """Raise before anything is written if the BVH folder or the plot cannot be made."""
    if plot_path is not None:
        folder = os.path.dirname(os.path.abspath(plot_path))
        if not os.path.isdir(folder):
            raise MissingFile(plot_path, f"its folder {folder} does not exist")
        try:
            import matplotlib  # noqa: F401 - only to refuse early
        except ImportError:
            raise MissingFile(plot_path, "writing a plot needs matplotlib (pip install matplotlib)") from None
    if bvh_dir is not None and os.path.exists(bvh_dir) and not os.path.isdir(bvh_dir):
        raise InvalidFile(bvh_dir, "--write-bvh needs a folder, and this is a file")


def check_replacing(out_dir, *, database_path=None, latent_path=None, force=False):
    """Raise ``OverwriteRefused`` naming the first toolkit file in ``out_dir`` this run would replace, unless
    ``force``. Not replacements: features.bin and latent.bin beside the ``database_path`` they are made from
    (recomputing them is the job; that database.bin is never written), and a latent.bin that is ``latent_path``."""
    names = ("features", "latent") if database_path is not None else ("database", "features", "latent")
    in_place = database_path is not None and same_file(database_path, os.path.join(out_dir, "database.bin"))
    if in_place:
        return
    refuse_existing([os.path.join(out_dir, f"{name}.bin") for name in names], force=force,
                    ours=lambda path: latent_path is not None and same_file(latent_path, path))


def check_extra_replacing(database, *, inputs, bvh_dir=None, plot_path=None, force=False):
    """Raise ``OverwriteRefused`` naming an existing ``plot_path``, or the first of the ``range_NNN.bvh`` files
    of ``database`` already in ``bvh_dir``, unless ``force`` (like the toolkit files, they may be a user's),
    and, even with it, one that is one of ``inputs`` ({option: [paths]}, the files this run reads)."""
    outputs = {"--plot": [plot_path] if plot_path is not None else []}
    if bvh_dir is not None:
        from motion_matching.data.bvh.exporter import bvh_paths
        outputs["--write-bvh"] = bvh_paths(database, bvh_dir)
    for choose, paths in outputs.items():
        for path, (option, source) in itertools.product(paths, _input_files(inputs)):
            if same_file(path, source):
                raise OverwriteRefused(path, f"is an input of this run ({option}); generate-database never "
                                             f"writes over it (choose another {choose})")
        refuse_existing(paths, force=force, choose=choose)


def _input_files(inputs):
    return [(option, path) for option, paths in inputs.items() for path in paths if path is not None]


def load_source_database(*, database_path=None, bvh_paths=(), windows=None, seed=0,
                         nframes=locomotion.DEFAULT_FRAMES):
    """The database to write: read from ``database_path``, imported from ``bvh_paths``, or synthetic.

    Returns (``formats.Database``, source name for errors). ``windows`` are (start, stop) frame
    windows, one per BVH file, or None.
    """
    if database_path is not None:
        return load_database(database_path), os.fspath(database_path)
    if bvh_paths:
        from motion_matching.data.bvh.importer import database_from_bvh_files
        database = database_from_bvh_files(list(bvh_paths), windows=windows)
        return database, os.fspath(bvh_paths[0])
    started = time.perf_counter()
    database = locomotion.generate_synthetic_database(seed=seed, nframes=nframes)
    LOG.info("synthetic database: %d frames in %.2f s", database.nframes, time.perf_counter() - started)
    return database, "<synthetic database>"


def generate_files(out_dir, *, database_path=None, bvh_paths=(), windows=None, seed=0,
                   nframes=locomotion.DEFAULT_FRAMES, weights=DEFAULT_WEIGHTS,
                   latent_path=None, nlatent=DEFAULT_NLATENT, bvh_dir=None, plot_path=None, force=False):
    """Make the toolkit's files in ``out_dir`` from the chosen source; returns a dict of written paths.

    Keys: "database" (not when ``database_path`` is given: that file is left as it is), "features",
    "latent", and "bvh" (list, with ``bvh_dir``) and "plot" (with ``plot_path``). ``latent_path``
    keeps a user's latent instead of the stand-in; its frame count must match the database. Existing
    toolkit files in ``out_dir``, the plot and BVH files are replaced only with ``force`` (see ``check_replacing``).
    """
    check_extra_outputs(bvh_dir=bvh_dir, plot_path=plot_path)
    check_folder_name(out_dir)
    database, source = load_source_database(database_path=database_path, bvh_paths=bvh_paths,
                                            windows=windows, seed=seed, nframes=nframes)
    latent = None if latent_path is None else load_matching_latent(latent_path, database.nframes)
    # after the inputs' own errors, before the features are computed and anything is written
    check_replacing(out_dir, database_path=database_path, latent_path=latent_path, force=force)
    check_extra_replacing(database, bvh_dir=bvh_dir, plot_path=plot_path, force=force,
                          inputs={"--database": [database_path], "--bvh": list(bvh_paths), "--latent": [latent_path]})
    with output_folder(out_dir):
        paths = write_toolkit_files(out_dir, database, weights=weights, latent=latent, nlatent=nlatent,
                                    write_database=database_path is None, source=source)
    if bvh_dir is not None:
        from motion_matching.data.bvh.exporter import write_database_bvh
        paths["bvh"] = write_database_bvh(database, bvh_dir)
    if plot_path is not None:
        from motion_matching.data import plots
        from motion_matching.toolkit.formats import load_features
        paths["plot"] = plots.plot_features(plot_path, database, load_features(paths["features"]))
    return paths
