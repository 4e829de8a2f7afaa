"""Export to the runtime's .bin layout: from checkpoints and from network .bin files."""
import numpy as np
import pytest

from motion_matching.errors import InvalidFile, MissingFile, TruncatedFile
from motion_matching.projector.export import export_network, is_checkpoint, load_projector_module
from motion_matching.projector.model import module_to_network
from motion_matching.toolkit import formats
from motion_matching.training.checkpoint import save_checkpoint

from conftest import TOOLKIT_NETWORKS
from export_helpers import random_projector, torch_outputs, write_checkpoint


def assert_same_network(left, right):
    for name in ("mean_in", "std_in", "mean_out", "std_out"):
        np.testing.assert_array_equal(getattr(left, name), getattr(right, name), err_msg=name)
    assert len(left.layers) == len(right.layers)
    for (w1, b1), (w2, b2) in zip(left.layers, right.layers):
        np.testing.assert_array_equal(w1, w2)
        np.testing.assert_array_equal(b1, b2)


def test_checkpoint_exports_the_exact_weights_in_runtime_layout(tmp_path):
    module = random_projector()
    source = write_checkpoint(tmp_path / "run.pt", module)
    result = export_network(source, tmp_path / "projector.bin")
    exported = formats.load_network(tmp_path / "projector.bin")
    assert_same_network(exported, module_to_network(module))
    assert exported.layers[0][0].shape == (27, 512)  # weights stored (in, out), the transpose of torch's
    assert result == {"format": "bin", "sizes": [27, 512, 512, 512, 512, 59],
                      "bytes": (tmp_path / "projector.bin").stat().st_size, "outputs": ["output"]}


def test_exported_network_computes_what_the_checkpoint_computes(tmp_path):
    module = random_projector(seed=3)
    source = write_checkpoint(tmp_path / "run.pt", module)
    export_network(source, tmp_path / "projector.bin")
    queries = np.random.default_rng(1).standard_normal((64, 27)).astype(np.float32)
    reloaded = load_projector_module(tmp_path / "projector.bin")
    np.testing.assert_array_equal(torch_outputs(reloaded, queries), torch_outputs(module, queries))


@pytest.mark.parametrize("name", ["projector", "stepper", "decompressor"])
def test_network_bin_re_exports_byte_identically(tmp_path, name):
    source = TOOLKIT_NETWORKS / f"{name}.bin"
    export_network(source, tmp_path / "copy.bin")
    assert (tmp_path / "copy.bin").read_bytes() == source.read_bytes()


def test_sources_are_told_apart_by_content(tmp_path):
    source = write_checkpoint(tmp_path / "looks-like.bin", random_projector(hidden=16))
    assert is_checkpoint(source)
    assert not is_checkpoint(TOOLKIT_NETWORKS / "projector.bin")
    assert load_projector_module(source).sizes == [27, 16, 16, 16, 16, 59]


def test_missing_source_is_named(tmp_path):
    with pytest.raises(MissingFile, match=r"absent\.pt: no such file$"):
        export_network(tmp_path / "absent.pt", tmp_path / "out.bin")


def test_damaged_checkpoint_is_refused_and_output_left_alone(tmp_path):
    good = write_checkpoint(tmp_path / "run.pt", random_projector(hidden=16))
    damaged = tmp_path / "damaged.pt"
    damaged.write_bytes(good.read_bytes()[:200])
    out = tmp_path / "projector.bin"
    out.write_bytes(b"previous good file")
    with pytest.raises(InvalidFile, match=r"damaged.pt: is a damaged checkpoint \(its zip archive is incomplete: "
                                          r"cut short\?\)$"):
        export_network(damaged, out, force=True)  # even where --force would let it replace out
    assert out.read_bytes() == b"previous good file"
    assert [path.name for path in tmp_path.iterdir() if path.name.endswith(".partial")] == []


def test_truncated_network_bin_is_refused(tmp_path):
    cut = tmp_path / "cut.bin"
    cut.write_bytes((TOOLKIT_NETWORKS / "stepper.bin").read_bytes()[:-3])
    with pytest.raises(TruncatedFile, match="cut.bin: truncated in layer 2 bias"):
        export_network(cut, tmp_path / "out.bin")


def test_unknown_format_is_refused(tmp_path):
    with pytest.raises(ValueError, match="unknown export format 'pt'"):
        export_network(TOOLKIT_NETWORKS / "stepper.bin", tmp_path / "out.pt", format="pt")


@pytest.mark.parametrize("model", [None, {"linear0.weight": 1}, {}], ids=["absent", "not tensors", "empty"])
def test_checkpoint_without_a_usable_model_is_refused(tmp_path, model):
    save_checkpoint(tmp_path / "run.pt", **({} if model is None else {"model": model}))
    with pytest.raises(InvalidFile, match=r"run.pt: checkpoint holds no usable model state \(\w+\)$"):
        export_network(tmp_path / "run.pt", tmp_path / "out.bin")
    assert not (tmp_path / "out.bin").exists()
