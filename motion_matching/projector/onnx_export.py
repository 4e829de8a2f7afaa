"""ONNX export of a ``NormalisedMLP`` and its check against onnxruntime (the optional ``[onnx]`` extra).

The graph holds the normalisation, so it maps a raw query (batch, nfeatures) float32 to the raw
outputs: one ``output`` (batch, nout), or with ``split`` ``features`` (batch, nin) and ``latent``
(batch, nout - nin). The batch axis is dynamic. torch's legacy (TorchScript) exporter is used
(``dynamo=False``): the newer exporter needs ``onnxscript``, which the extra does not install.
"""
import inspect
import io
import warnings

import numpy as np
import torch
from torch import nn

from motion_matching.atomic import atomic_write
from motion_matching.errors import InvalidFile, MotionMatchingError

ONNX_OPSET = 17
INPUT_NAME = "query"
_INSTALL_HINT = "pip install 'motion-matching-projector[onnx]'"


class _SplitOutputs(nn.Module):
    """Wraps a module so it returns (first ``at`` columns, remaining columns)."""

    def __init__(self, module, at):
        super().__init__()
        self.module, self.at = module, at

    def forward(self, x):
        y = self.module(x)
        return y[..., :self.at], y[..., self.at:]


def _require(package, path):
    try:
        return __import__(package)
    except ImportError:
        raise MotionMatchingError(path, f"ONNX support needs the optional package {package!r}: "
                                        f"{_INSTALL_HINT}") from None


def export_onnx(module, path, *, split=False, opset=ONNX_OPSET):
    """Write ``module`` (a ``NormalisedMLP``) to ``path`` as ONNX, atomically; returns the output names."""
    _require("onnx", path)
    nin, nout = module.sizes[0], module.sizes[-1]
    if split and nout <= nin:
        raise InvalidFile(path, f"cannot split {nout} outputs into {nin} features and a latent")
    names = ["features", "latent"] if split else ["output"]
    graph = (_SplitOutputs(module, nin) if split else module).eval()
    example = torch.zeros(2, nin, dtype=torch.float32)
    buffer = io.BytesIO()
    options = dict(input_names=[INPUT_NAME], output_names=names, opset_version=opset,
                   dynamic_axes={name: {0: "batch"} for name in [INPUT_NAME, *names]})
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:  # older torch: always the legacy exporter
        options["dynamo"] = False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the legacy exporter announces its deprecation
        torch.onnx.export(graph, (example,), buffer, **options)
    with atomic_write(path) as stream:
        stream.write(buffer.getvalue())
    return names


def run_onnx(path, queries):
    """Evaluate the ONNX file ``path`` on ``queries`` (m, nin) with onnxruntime (CPU).

    Returns a list of float32 arrays, one per graph output, each (m, width).
    """
    runtime = _require("onnxruntime", path)
    session = runtime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, {INPUT_NAME: np.ascontiguousarray(queries, dtype=np.float32)})
