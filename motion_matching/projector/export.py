"""Export a trained projector: a checkpoint (or a network .bin) to the runtime's .bin layout or to ONNX.

The runtime (the toolkit's ``nnet_load``) reads ``mean_in, std_in, mean_out, std_out`` and then the
layers with weights stored (in, out); ``formats.save_network`` writes exactly that, atomically.
"""
import logging
import os

from motion_matching.errors import InvalidFile, MissingFile
from motion_matching.projector.checkpoint import load_checkpoint
from motion_matching.projector.model import module_from_state_dict, module_to_network, network_to_module
from motion_matching.toolkit import formats

LOG = logging.getLogger(__name__)

EXPORT_FORMATS = ("bin", "onnx")
EXTENSIONS = {".bin": "bin", ".onnx": "onnx"}
_ZIP_MAGIC = b"PK\x03\x04"  # torch.save writes a zip archive; a network .bin starts with a u32 count


def is_checkpoint(path):
    """True if ``path`` looks like a torch checkpoint (a zip archive) rather than a network .bin."""
    if not os.path.isfile(path):
        raise MissingFile(path, "no such file")
    with open(path, "rb") as stream:
        return stream.read(4) == _ZIP_MAGIC


def load_projector(path):
    """``(module, config)`` from a training checkpoint or a network .bin.

    ``module`` is a ``NormalisedMLP`` (float32, CPU, eval mode); ``config`` the checkpoint's training
    settings (a dict, see ``TrainConfig.to_dict``), or None for a .bin, which does not hold them.
    Raises ``MissingFile``/``InvalidFile``/``TruncatedFile`` naming ``path`` when it cannot be read.
    """
    if not is_checkpoint(path):
        return network_to_module(formats.load_network(path)).eval(), None
    checkpoint = load_checkpoint(path)
    try:
        module = module_from_state_dict(checkpoint.get("model")).eval()
    except (AttributeError, KeyError, IndexError, RuntimeError, TypeError) as error:
        raise InvalidFile(path, f"checkpoint holds no usable model state ({type(error).__name__})") from None
    config = checkpoint.get("config")
    return module, config if isinstance(config, dict) else None


def load_projector_module(path):
    """The ``NormalisedMLP`` (float32, CPU, eval mode) of a training checkpoint or a network .bin."""
    return load_projector(path)[0]


def output_format(out, format=None):
    """The format (str) to write ``out`` in: ``format``, else the one its extension names, else "bin".

    Raises ``InvalidFile`` when ``format`` contradicts the extension (``.onnx`` written as ``bin``, ...).
    """
    if format is not None and format not in EXPORT_FORMATS:
        raise ValueError(f"unknown export format {format!r}; choose one of {', '.join(EXPORT_FORMATS)}")
    named = EXTENSIONS.get(os.path.splitext(os.fspath(out))[1].lower())
    if format is not None and named is not None and named != format:
        raise InvalidFile(out, f"its extension names the {named} format but --format {format} was given; "
                               f"drop --format or name the file *.{format}")
    return format or named or "bin"


def export_network(source, out, *, format=None, split=False):
    """Write the network held by ``source`` (checkpoint or .bin) to ``out`` as ``format`` ("bin" or "onnx";
    default: the one ``out``'s extension names, else "bin").

    ``split`` (ONNX only) names two outputs, ``features`` (first ``sizes[0]`` columns) and ``latent``
    (the rest), instead of one ``output``. Returns a dict: ``format``, ``sizes`` (layer widths),
    ``bytes`` (size of ``out``) and ``outputs`` (output names; "output" for .bin).
    """
    format = output_format(out, format)
    module = load_projector_module(source)
    if format == "bin":
        formats.save_network(out, module_to_network(module))
        outputs = ["output"]
    else:
        from motion_matching.projector.onnx_export import export_onnx
        outputs = export_onnx(module, out, split=split)
    LOG.debug("wrote %s (%s, sizes %s)", out, format, module.sizes)
    return {"format": format, "sizes": list(module.sizes), "bytes": os.path.getsize(out), "outputs": outputs}
