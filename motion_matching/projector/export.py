"""Export a trained projector: a checkpoint (or a network .bin) to the runtime's .bin layout or to ONNX.

The runtime (the toolkit's ``nnet_load``) reads ``mean_in, std_in, mean_out, std_out`` and then the
layers with weights stored (in, out); ``formats.save_network`` writes exactly that, atomically.
"""
import logging
import os

from motion_matching.errors import InvalidFile, OverwriteRefused
from motion_matching.projector.defaults import EXPORT_FORMATS
from motion_matching.projector.model import module_from_state_dict, module_to_network, network_to_module
from motion_matching.toolkit import formats
from motion_matching.toolkit.binary_io import open_for_reading
from motion_matching.toolkit.overwrite import same_file
from motion_matching.toolkit.sniff import file_kind
from motion_matching.training.checkpoint import load_checkpoint

LOG = logging.getLogger(__name__)

EXTENSIONS = {".bin": "bin", ".onnx": "onnx"}
CHECKPOINT_EXTENSIONS = (".pt", ".pth")  # export never writes a checkpoint, nor a .bin under its name
_ZIP_MAGIC = b"PK\x03\x04"  # torch.save writes a zip archive; a network .bin starts with a u32 count


def is_checkpoint(path):
    """True if ``path`` looks like a torch checkpoint (a zip archive) rather than a network .bin."""
    with open_for_reading(path) as stream:  # a missing file, a folder, an unreadable one: MissingFile saying which
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
    extension = os.path.splitext(os.fspath(out))[1].lower()
    if extension in CHECKPOINT_EXTENSIONS:
        raise InvalidFile(out, f"export writes a network .bin or ONNX, not a checkpoint; name the file *.bin or "
                               f"*.onnx, not *{extension}")
    named = EXTENSIONS.get(extension)
    if format is not None and named is not None and named != format:
        raise InvalidFile(out, f"its extension names the {named} format but --format {format} was given; "
                               f"drop --format or name the file *.{format}")
    return format or named or "bin"


def check_out(source, out, *, force=False):
    """Raise ``OverwriteRefused`` if ``out`` is ``source`` itself (never replaced) or, without ``force``, any
    existing file: export keeps no record of what it wrote, so it replaces nothing unasked."""
    if same_file(source, out):
        raise OverwriteRefused(out, "is the source of this export; export never writes over it (choose another "
                                    "--out)")
    if os.path.isfile(out) and not force:
        kind = file_kind(out)
        raise OverwriteRefused(out, f"exists and is {kind}" if kind else "exists", option="--force to replace it")


def export_network(source, out, *, format=None, split=False, force=False, network_of=None):
    """Write the network held by ``source`` (checkpoint or .bin) to ``out`` as ``format`` ("bin" or "onnx";
    default: the one ``out``'s extension names, else "bin"). ``network_of(source)``, when given, reads
    checkpoints of other networks (the decompressor's): a ``formats.Network``, or None for a projector's.

    ``split`` (ONNX only) names two outputs, ``features`` (first ``sizes[0]`` columns) and ``latent``
    (the rest), instead of one ``output``. Returns a dict: ``format``, ``sizes`` (layer widths),
    ``bytes`` (size of ``out``) and ``outputs`` (output names; "output" for .bin). An existing ``out`` is
    replaced only with ``force``, and never when it is ``source`` (``OverwriteRefused``).
    """
    format = output_format(out, format)
    check_out(source, out, force=force)
    network = None if network_of is None else network_of(source)
    module = load_projector_module(source) if network is None else network_to_module(network).eval()
    if format == "bin":
        formats.save_network(out, module_to_network(module))
        outputs = ["output"]
    else:
        from motion_matching.projector.onnx_export import export_onnx
        outputs = export_onnx(module, out, split=split)
    LOG.debug("wrote %s (%s, sizes %s)", out, format, module.sizes)
    return {"format": format, "sizes": list(module.sizes), "bytes": os.path.getsize(out), "outputs": outputs}


def load_checkpoint_module(path):
    """The trained ``NormalisedMLP`` (CPU, eval mode) held by the checkpoint at ``path``."""
    module = module_from_state_dict(load_checkpoint(path)["model"])
    return module.eval()
