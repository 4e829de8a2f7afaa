"""How well a decompressor reconstructs its database: every frame, in the units an animator reads.

The decompressor compresses the database it was trained on (no frame is held out): each frame's
features and latent decode to the local pose of every bone but the simulation bone, which the
runtime takes from the simulation (here: the ground truth). Reported: world-space joint position error
after forward kinematics (cm), local rotation error (degrees: the angle of the rotation between the
decoded and the true local rotation), contact accuracy (decoded contact > 0.5 against the database's),
and the toolkit's own loss terms over every window of two frames.
"""
import json
import logging
import os

import numpy as np
import torch

from motion_matching.atomic import atomic_write
from motion_matching.decompressor import kinematics as kin
from motion_matching.decompressor.inputs import load_inputs
from motion_matching.decompressor.model import Decompressor
from motion_matching.decompressor.objective import LossTerms, decompressor_losses, split_output
from motion_matching.errors import InvalidFile, MismatchedFiles
from motion_matching.toolkit import formats
from motion_matching.toolkit.overwrite import png_writer, refuse_existing, writer_tag
from motion_matching.training.step import PrecisionForward

LOG = logging.getLogger(__name__)
REPORT_NAME, PLOT_NAME = "decompressor_evaluation.json", "decompressor_errors.png"
REPORT_FORMAT = "motion-matching-decompressor-evaluation"
WINDOWS_PER_BLOCK = 4096
POSE_COLUMNS_PER_BONE, ROOT_COLUMNS = 15, 8  # the output layout (objective.split_output)


class RuntimeDecompressor(torch.nn.Module):
    """A decompressor.bin as a module with ``decode(features, latent)`` (the ``Autoencoder``'s signature)."""

    def __init__(self, network):
        super().__init__()
        sizes = network.sizes
        self.decompressor = Decompressor(sizes[0], sizes[-1], hidden=sizes[1])
        with torch.no_grad():
            for layer, (weights, bias) in zip(self.decompressor.layers(), network.layers):
                layer.weight.copy_(torch.from_numpy(weights.T.copy()))
                layer.bias.copy_(torch.from_numpy(bias))
        self.mean_out, self.std_out = torch.from_numpy(network.mean_out), torch.from_numpy(network.std_out)

    def decode(self, features, latent):
        """Raw pose parts (B, W, columns) of features (B, W, n) and latent (B, W, L)."""
        return self.decompressor(torch.cat([features, latent], dim=-1)) * self.std_out + self.mean_out


def load_decompressor(path, *, nfeatures, nlatent, nbones):
    """The decompressor.bin at ``path`` as a ``RuntimeDecompressor`` (eval mode); raises ``InvalidFile`` unless
    its layers decode ``nfeatures`` features and ``nlatent`` latent values to the pose of ``nbones`` bones."""
    network, inner = formats.load_network(path), nbones - 1
    size_in, size_out = nfeatures + nlatent, POSE_COLUMNS_PER_BONE * inner + ROOT_COLUMNS
    sizes = network.sizes
    if len(sizes) != 3 or sizes[0] != size_in or sizes[-1] != size_out:
        raise InvalidFile(path, f"has layers {' -> '.join(map(str, sizes))}; a decompressor of these files has "
                                f"{size_in} -> hidden -> {size_out} ({nfeatures} features + {nlatent} latent in, "
                                f"{inner} bones' pose, the root's velocities and 2 contacts out)")
    return RuntimeDecompressor(network).eval()


def _summary(values):
    values = np.asarray(values, dtype=np.float64).ravel()
    return {"mean": float(values.mean()), "p95": float(np.percentile(values, 95)), "max": float(values.max())}


def frame_errors(module, inputs, latent):
    """Per frame and bone: world position error (F, B) cm, local rotation error (F, B-1) degrees, and the
    decoded contacts (F, C) against the database's: a dict of numpy arrays."""
    arrays, parents = inputs.arrays, inputs.parents
    with torch.no_grad():
        til = split_output(module.decode(inputs.X[None], latent[None]), len(parents))
        local = kin.matrix_from_two_columns(torch.cat([arrays["Ytxy"][None, :, 0:1], til["txy"]], dim=2))
        positions = torch.cat([arrays["Ypos"][None, :, 0:1], til["pos"]], dim=2)
        truth_local = kin.matrix_from_two_columns(arrays["Ytxy"][None])
        world = kin.matrix_forward_kinematics(local, positions, positions, positions, parents)[1][0]
        truth = kin.matrix_forward_kinematics(truth_local, arrays["Ypos"][None], arrays["Ypos"][None],
                                              arrays["Ypos"][None], parents)[1][0]
        relative = kin.inv_compose(truth_local, local)[0, :, 1:]
        cosine = ((relative.diagonal(dim1=-2, dim2=-1).sum(-1) - 1.0) / 2.0).clamp(-1.0, 1.0)
    return {"position_cm": (100.0 * torch.linalg.norm(world - truth, dim=-1)).numpy(),
            "rotation_deg": np.degrees(torch.arccos(cosine).double().numpy()),
            "contacts": til["extra"][0].numpy(), "true_contacts": arrays["Yextra"].numpy()}


def window_losses(module, inputs, latent):
    """The toolkit's loss terms (a ``LossTerms`` of floats) averaged over every window of two frames."""
    starts = torch.arange(inputs.nframes - 1)
    sums, count = np.zeros(len(LossTerms._fields)), 0
    forward = PrecisionForward("float32", "cpu")
    with torch.no_grad():
        for block in torch.split(starts, WINDOWS_PER_BLOCK):
            batch = block[:, None] + torch.arange(2)
            gnd = {name: values[batch] for name, values in inputs.arrays.items()}
            terms, _ = decompressor_losses(module, gnd, inputs.X[batch], inputs.parents, forward,
                                           Zgnd=latent[batch])
            sums += np.array([float(term) for term in terms]) * len(block)
            count += len(block)
    return LossTerms(*(sums / count))


def evaluate_decompressor(decompressor_path, latent_path, *, database_path, features_path):
    """The report (dict) of the decompressor.bin at ``decompressor_path`` decoding the latent.bin at
    ``latent_path`` with the features and database it was trained on; also the per-frame arrays."""
    inputs = load_inputs(database_path, features_path)
    latent = torch.from_numpy(formats.load_latent(latent_path))
    if latent.shape[0] != inputs.nframes:
        raise MismatchedFiles(latent_path, f"has {latent.shape[0]} frames but {database_path} has {inputs.nframes}")
    module = load_decompressor(decompressor_path, nfeatures=inputs.X.shape[1], nlatent=latent.shape[1],
                               nbones=inputs.nbones)
    errors = frame_errors(module, inputs, latent)
    contacts = (errors["contacts"] > 0.5) == (errors["true_contacts"] > 0.5)
    report = {"frames": inputs.nframes, "bones": inputs.nbones,
              "position_error_cm": _summary(errors["position_cm"][:, 1:]),
              "rotation_error_deg": _summary(errors["rotation_deg"]),
              "contact_accuracy": float(contacts.mean()),
              "loss_terms": window_losses(module, inputs, latent)._asdict()}
    return report, errors


def written_by_evaluate(path):
    """True if ``path`` is a report of ``REPORT_FORMAT`` or a PNG evaluate-decompressor tagged."""
    if os.path.basename(path) != REPORT_NAME:
        return png_writer(path) == writer_tag("evaluate-decompressor")
    try:
        with open(path, encoding="utf-8") as stream:
            return json.load(stream).get("format") == REPORT_FORMAT
    except (OSError, ValueError, AttributeError):
        return False


def evaluate_files(decompressor_path, latent_path, *, database_path, features_path, out_dir, plots=True,
                   force=False):
    """Evaluate and write ``decompressor_evaluation.json`` (and ``decompressor_errors.png``) into ``out_dir``;
    returns the report. Files of those names that it did not write are refused unless ``force``."""
    names = [os.path.join(out_dir, REPORT_NAME)] + ([os.path.join(out_dir, PLOT_NAME)] if plots else [])
    refuse_existing(names, force=force, ours=written_by_evaluate, why=" (not written by evaluate-decompressor)")
    report, errors = evaluate_decompressor(decompressor_path, latent_path, database_path=database_path,
                                           features_path=features_path)
    report = {"format": REPORT_FORMAT, **report, "inputs": {"decompressor": os.fspath(decompressor_path),
                                                            "latent": os.fspath(latent_path),
                                                            "database": os.fspath(database_path),
                                                            "features": os.fspath(features_path)}}
    os.makedirs(out_dir, exist_ok=True)
    if plots:
        from motion_matching.decompressor.plots import plot_errors  # matplotlib only when asked for
        plot_errors(errors, names[1])
    report["files"] = names
    with atomic_write(names[0], mode="w") as stream:
        json.dump(report, stream, indent=2)
        stream.write("\n")
    return report
