"""Helpers for the export, ONNX, C evaluator and evaluate tests: checkpoints of random projectors."""
import numpy as np
import torch

from motion_matching.projector.model import NormalisedMLP, projector_sizes
from motion_matching.training.checkpoint import save_checkpoint


def random_projector(*, nfeatures=27, nlatent=32, hidden=512, seed=0):
    """A randomly initialised ``NormalisedMLP`` (eval mode) with non-trivial normalisation vectors."""
    torch.manual_seed(seed)
    module = NormalisedMLP(projector_sizes(nfeatures, nlatent, hidden=hidden))
    rng = np.random.default_rng(seed)
    nout = nfeatures + nlatent
    module.set_normalisation(rng.normal(size=nfeatures), rng.uniform(0.5, 2.0, nfeatures),
                             rng.normal(size=nout), rng.uniform(0.5, 2.0, nout))
    return module.eval()


def write_checkpoint(path, module, *, step=0, config=None):
    """Save ``module`` as a training checkpoint at ``path`` (model state dict, ``config`` dict, minimal metadata)."""
    save_checkpoint(path, model=module.state_dict(), optimizer={}, scheduler={}, step=step, config=config or {},
                    rng={}, inputs={})
    return path


def torch_outputs(module, queries):
    """``module`` applied to ``queries`` (m, nin) float32; returns (m, nout) float32."""
    with torch.no_grad():
        return module(torch.from_numpy(np.ascontiguousarray(queries, dtype=np.float32))).numpy()


def realistic_queries(network, count, *, seed=0):
    """``count`` float32 queries spread like the network's inputs: mean_in + std_in * N(0, 1)."""
    rng = np.random.default_rng(seed)
    return (network.mean_in + network.std_in * rng.standard_normal((count, network.sizes[0]))).astype(np.float32)
