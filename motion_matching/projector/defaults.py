"""Defaults and choices the command line shows in ``--help``, in a module free of torch, so that
``train --help``, ``export --help``, ``evaluate --help`` and ``demo --help`` answer without loading it."""

HELD_OUT_QUERIES = 4096  # fresh queries of the final held-out loss of a training run
EVALUATION_QUERIES = 10_000  # held-out queries of ``evaluate``
EXPORT_FORMATS = ("bin", "onnx")
