"""Evaluate a projector on held-out queries: L1 errors, training loss terms and match accuracy.

Queries come from ``queries.generate_queries`` with a seed other than training's, so none was trained on.
For each query ``Xhat`` the exact nearest frame ``gnd`` is searched; the projector maps ``Xhat`` to
``Xtil``/``Ztil``. Match accuracy asks what the runtime needs: is the database frame nearest to ``Xtil``
the query's true nearest frame (top-1), or among the ``MATCH_K`` frames nearest to ``Xtil`` (top-k)?
A frame tied with the best (distances equal to float32 precision) counts as a match.
"""
import json
import logging
import os

import numpy as np
import torch

from motion_matching.atomic import atomic_write, check_folder_name, output_folder
from motion_matching.errors import MismatchedFiles
from motion_matching.fingerprint import file_sha256
from motion_matching.neighbours.queries import HELD_OUT_SEED, RECIPE, generate_queries
from motion_matching.neighbours.search import DEFAULT_BACKEND, make_searcher
from motion_matching.projector import objective
from motion_matching.projector.config import TrainConfig
from motion_matching.projector.defaults import EVALUATION_QUERIES
from motion_matching.projector.export import is_checkpoint, load_projector
from motion_matching.toolkit import formats
from motion_matching.toolkit.overwrite import png_writer, refuse_existing, writer_tag
from motion_matching.training.checkpoint import load_checkpoint

LOG = logging.getLogger(__name__)

_UNIT_WEIGHTS = TrainConfig(weight_features=1.0, weight_latent=1.0, weight_distance=1.0)
DEFAULT_QUERIES = EVALUATION_QUERIES
MATCH_K = 5
LEVEL_EDGES = (0.0, 0.25, 0.5, 0.75, 1.0)  # bins of the noise level u of each query
REPORT_NAME = "evaluation.json"
REPORT_FORMAT = "motion-matching-projector-evaluation"  # its "format" key: evaluate replaces only its own report
_TIE_TOLERANCE = 1e-5  # relative; float32 distances closer than this are a tie


def projector_outputs(module, queries, *, block=8192):
    """Run ``module`` on ``queries`` (m, nin) float32 in blocks; returns (m, nout) float32."""
    parts = []
    with torch.no_grad():
        for start in range(0, len(queries), block):
            parts.append(module(torch.from_numpy(np.ascontiguousarray(queries[start:start + block]))).numpy())
    return np.concatenate(parts) if parts else np.zeros((0, module.sizes[-1]), np.float32)


def loss_weights(config):
    """The loss weights of ``config`` by term name: ``{"xval", "zval", "dist"}`` floats."""
    return {"xval": config.weight_features, "zval": config.weight_latent, "dist": config.weight_distance}


def loss_terms(Xhat, Xgnd, Zgnd, Xtil, Ztil, *, config=TrainConfig()):
    """Training's loss (``objective.loss_terms``, in float64) over all queries, as floats.

    Returns ``feature_l1``, ``latent_l1``, ``distance_l1`` (mean |Dgnd - Dtil|, D the L2 distance from
    ``Xhat``) and ``xval``, ``zval``, ``dist`` (weighted by ``config`` as training weighs them) and
    their sum ``loss``.
    """
    tensors = [torch.from_numpy(np.asarray(values, dtype=np.float64)) for values in (Xhat, Xgnd, Zgnd, Xtil, Ztil)]
    raw = objective.loss_terms(*tensors, _UNIT_WEIGHTS)
    weighted = objective.loss_terms(*tensors, config)
    return {"feature_l1": float(raw.xval), "latent_l1": float(raw.zval), "distance_l1": float(raw.dist),
            "xval": float(weighted.xval), "zval": float(weighted.zval), "dist": float(weighted.dist),
            "loss": float(weighted.loss)}


def _squared_distances(features, points, indices):
    """Squared L2 distances (m, k) float64 from ``points`` (m, n) to ``features[indices]`` (m, k)."""
    difference = features[indices].astype(np.float64) - points[:, None, :].astype(np.float64)
    return np.square(difference).sum(-1)


def match_flags(features, Xtil, truth, *, k=MATCH_K):
    """Where the true nearest frames ``truth`` (m,) are nearest to the outputs ``Xtil`` (m, n).

    Returns ``(top1, topk)``, (m,) bool each: ``features[truth]`` is at the smallest distance from
    ``Xtil`` (top-1), or no farther than its ``k``-th nearest frame (top-k), ties included.
    """
    import faiss
    index = faiss.IndexFlatL2(features.shape[1])
    index.add(np.ascontiguousarray(features, dtype=np.float32))
    _, nearest = index.search(np.ascontiguousarray(Xtil, dtype=np.float32), min(k, len(features)))
    best = _squared_distances(features, Xtil, nearest[:, [0, -1]])  # first and k-th, recomputed exactly
    own = _squared_distances(features, Xtil, truth[:, None])[:, 0]
    tied = (1.0 + _TIE_TOLERANCE) * best + 1e-12
    top1 = (nearest[:, 0] == truth) | (own <= tied[:, 0])
    topk = (nearest == truth[:, None]).any(1) | (own <= tied[:, 1])
    return top1, topk


def _level_breakdown(levels, top1, topk, feature_error, latent_error):
    rows = []
    for low, high in zip(LEVEL_EDGES[:-1], LEVEL_EDGES[1:]):
        inside = (levels >= low) & ((levels < high) | (high == LEVEL_EDGES[-1]))
        count = int(inside.sum())

        def mean(values, inside=inside, count=count):
            return float(values[inside].mean()) if count else None

        rows.append({"u_min": low, "u_max": high, "queries": count, "top1": mean(top1), f"top{MATCH_K}": mean(topk),
                     "feature_l1": mean(feature_error), "latent_l1": mean(latent_error)})
    return rows


def evaluate_projector(module, features, latent, *, nqueries=DEFAULT_QUERIES, seed=HELD_OUT_SEED,
                       backend=DEFAULT_BACKEND, threads=None, config=TrainConfig()):
    """Evaluate ``module`` on ``nqueries`` held-out queries over ``features`` (F, n) and ``latent`` (F, L).

    ``config`` is the training run's: its loss weights weigh the loss terms. Returns ``(report, arrays)``:
    ``report`` a JSON-ready dict (counts, ``losses`` from ``loss_terms``, ``match`` top-1/top-k rates in
    [0, 1], ``by_noise_level`` rows); ``arrays`` the float32 arrays ``Xhat, Xgnd, Zgnd, Xtil, Ztil`` and
    ``levels`` (m,), in query order.
    """
    nfeatures = features.shape[1]
    Xhat, _, levels = generate_queries(features, seed=seed, start=0, stop=nqueries, with_levels=True)
    truth = make_searcher(features, backend=backend, threads=threads).nearest(Xhat)
    output = projector_outputs(module, Xhat)
    arrays = {"Xhat": Xhat, "Xgnd": features[truth], "Zgnd": latent[truth], "Xtil": output[:, :nfeatures],
              "Ztil": output[:, nfeatures:], "levels": levels}
    top1, topk = match_flags(features, arrays["Xtil"], truth)
    feature_error = np.abs(arrays["Xgnd"] - arrays["Xtil"]).mean(1)
    latent_error = np.abs(arrays["Zgnd"] - arrays["Ztil"]).mean(1)
    report = {"queries": int(nqueries), "seed": int(seed), "training_seed": int(config.seed), "backend": backend,
              "query_recipe": RECIPE, "nframes": int(features.shape[0]), "nfeatures": int(nfeatures),
              "nlatent": int(latent.shape[1]), "loss_weights": loss_weights(config),
              "losses": loss_terms(*(arrays[name] for name in ("Xhat", "Xgnd", "Zgnd", "Xtil", "Ztil")),
                                   config=config),
              "match": {"top1": float(top1.mean()), f"top{MATCH_K}": float(topk.mean())},
              "by_noise_level": _level_breakdown(levels, top1, topk, feature_error, latent_error)}
    return report, arrays


def evaluate_files(projector, features_path, latent_path, out_dir, *, nqueries=DEFAULT_QUERIES,
                   seed=HELD_OUT_SEED, backend=DEFAULT_BACKEND, threads=None, plots=True, config=None, force=False):
    """Evaluate the projector file (checkpoint or network .bin) and write ``out_dir/evaluation.json``.

    The loss terms use the training settings of the run: those a checkpoint holds, else ``config``
    (default: ``TrainConfig()``, the toolkit's), since a network .bin does not record them.
    With ``plots`` also writes ``projector_X.png`` and ``projector_Z.png`` (needs matplotlib). A checkpoint
    trained on other files than these (their SHA-256 differ from those it records) gets a one-line warning.
    Files of those names that evaluate did not write are replaced only with ``force`` (``check_replacing``).
    Returns the report dict, with ``files`` (what was written) and the inputs' paths and SHA-256.
    """
    check_folder_name(out_dir)
    module, stored_config = load_projector(projector)
    if stored_config is not None:
        config = TrainConfig.from_dict(stored_config)
    config = TrainConfig() if config is None else config
    features, latent = formats.load_features_and_latent(features_path, latent_path)
    nfeatures, nlatent = features.features.shape[1], latent.shape[1]
    if module.sizes[0] != nfeatures or module.sizes[-1] != nfeatures + nlatent:
        raise MismatchedFiles(projector, f"maps {module.sizes[0]} -> {module.sizes[-1]} values but the data "
                                         f"need {nfeatures} -> {nfeatures} + {nlatent}")
    check_replacing(out_dir, plots=plots, force=force)
    digests = {"features": file_sha256(features_path), "latent": file_sha256(latent_path)}
    note = other_inputs_note(projector, {"features": features_path, "latent": latent_path}, digests)
    if note is not None:
        LOG.warning("%s", note)
    report, arrays = evaluate_projector(module, features.features, latent, nqueries=nqueries, seed=seed,
                                        backend=backend, threads=threads, config=config)
    with output_folder(out_dir):
        return _write_report(report, arrays, out_dir, plots=plots, digests=digests,
                             inputs=(("projector", projector), ("features", features_path), ("latent", latent_path)))


def other_inputs_note(projector, paths, digests):
    """A line (str) saying the checkpoint ``projector`` was trained on other files than ``paths`` ({"features":
    path, "latent": path}) of SHA-256 ``digests``, or None: they are the ones it records, or it records none
    (a network .bin, or a checkpoint written without them)."""
    recorded = load_checkpoint(projector).get("inputs") if is_checkpoint(projector) else None
    recorded = recorded if isinstance(recorded, dict) else {}
    changed = [name for name, digest in digests.items() if recorded.get(name) not in (None, digest)]
    if not changed:
        return None
    names = " and ".join(f"{name}.bin" for name in changed)
    files = " and ".join(os.fspath(paths[name]) for name in changed)
    return (f"{projector}: was trained on another {names} than {files} (the SHA-256 it records differs): "
            "these numbers are for other data than its training's")


def written_by_evaluate(path):
    """True if ``path`` is a file that evaluate wrote: a JSON report of ``REPORT_FORMAT``, or a PNG it tagged."""
    if os.path.basename(path) != REPORT_NAME:
        return png_writer(path) == writer_tag("evaluate")
    try:
        with open(path, encoding="utf-8") as stream:
            report = json.load(stream)
    except (OSError, ValueError):
        return False
    return isinstance(report, dict) and report.get("format") == REPORT_FORMAT


def check_replacing(out_dir, *, plots=True, force=False):
    """Raise ``OverwriteRefused`` unless ``force`` if ``out_dir`` holds an evaluation.json or (with ``plots``)
    a projector_X.png or projector_Z.png that evaluate did not write (a user's, training's, the toolkit's)."""
    from motion_matching.projector.plots import PLOT_NAMES
    names = (REPORT_NAME, *(PLOT_NAMES if plots else ()))
    refuse_existing([os.path.join(out_dir, name) for name in names], force=force, ours=written_by_evaluate,
                    why=" (not written by evaluate)")


def _write_report(report, arrays, out_dir, *, plots, inputs, digests):
    files = [os.path.join(out_dir, REPORT_NAME)]
    report = {"format": REPORT_FORMAT, **report}
    if plots:
        from motion_matching.projector.plots import plot_predictions
        files += plot_predictions(arrays, out_dir)
    report["inputs"] = {name: {"path": os.fspath(path), "sha256": digests.get(name) or file_sha256(path)}
                        for name, path in inputs}
    report["files"] = [os.fspath(path) for path in files]
    with atomic_write(files[0], mode="w") as stream:
        json.dump(report, stream, indent=2)
        stream.write("\n")
    LOG.debug("wrote %s", files[0])
    return report
