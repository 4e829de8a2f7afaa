"""A file of the wrong kind is named for what it is, not reported as truncated at some byte."""
import io
import os
import zipfile

import h5py
import numpy as np
import pytest
from click.testing import CliRunner

from motion_matching import cache
from motion_matching.errors import CorruptCache, InvalidFile, MissingFile, TruncatedFile
from motion_matching.toolkit import formats
from motion_matching.toolkit.sniff import file_kind

from conftest import TOOLKIT_NETWORKS, needs_torch, write_small_toolkit_files
from formats_helpers import small_database


@pytest.fixture
def files(tmp_path):
    features, latent = write_small_toolkit_files(tmp_path, nframes=300)
    database = tmp_path / "database.bin"
    formats.save_database(database, small_database(nframes=300, ranges=((0, 100), (100, 300))))
    cache = tmp_path / "cache.h5"
    with h5py.File(cache, "w") as handle:
        handle["queries"] = np.zeros((4, 27), np.float32)
    onnx = tmp_path / "projector.onnx"
    onnx.write_bytes(bytes([0x08, 0x08, 0x12, 0x07]) + b"pytorch" + bytes(100))  # ir_version 8, producer_name
    checkpoint = tmp_path / "run.pt"
    checkpoint.write_bytes(b"PK\x03\x04" + bytes(60))
    return {"features": features, "latent": latent, "database": database, "network": TOOLKIT_NETWORKS /
            "projector.bin", "cache": cache, "onnx": onnx, "checkpoint": checkpoint}


def test_each_kind_is_recognised_by_its_shape(files):
    assert file_kind(files["features"]) == "a features.bin (300 frames x 27 features)"
    assert file_kind(files["latent"]) == "a latent.bin (300 frames x 32 columns)"
    assert file_kind(files["database"]) == "a database.bin (300 frames x 4 bones)"
    assert file_kind(files["network"]) == "a network .bin (27 inputs, 5 layers, 59 outputs)"
    assert file_kind(files["cache"]) == "an HDF5 file (a projector cache, for example)"
    assert file_kind(files["onnx"]) == "an ONNX model"
    assert file_kind(files["checkpoint"]) == "a zip archive (a training checkpoint, for example)"


@pytest.mark.parametrize("given, loader, expected", [
    ("onnx", formats.load_network, "an ONNX model, not a network .bin"),
    ("cache", formats.load_network, "an HDF5 file (a projector cache, for example), not a network .bin"),
    ("features", formats.load_network, "a features.bin (300 frames x 27 features), not a network .bin"),
    ("latent", formats.load_features, "a latent.bin (300 frames x 32 columns), not a features.bin"),
    ("features", formats.load_latent, "a features.bin (300 frames x 27 features), not a latent.bin"),
    ("network", formats.load_database, "a network .bin (27 inputs, 5 layers, 59 outputs), not a database.bin"),
    ("database", formats.load_features, "a database.bin (300 frames x 4 bones), not a features.bin"),
    ("cache", formats.load_features, "an HDF5 file (a projector cache, for example), not a features.bin"),
])
def test_a_file_of_another_kind_is_named(files, given, loader, expected):
    with pytest.raises(InvalidFile) as refusal:
        loader(files[given])
    assert str(refusal.value) == f"{files[given]}: is {expected}"


def test_a_damaged_file_of_the_right_kind_still_says_where(files, tmp_path):
    cut = tmp_path / "cut.bin"
    cut.write_bytes(files["features"].read_bytes()[:100])
    with pytest.raises(TruncatedFile, match="truncated in features at byte 8"):
        formats.load_features(cut)
    assert file_kind(cut) is None


LOADERS = {"features.bin": formats.load_features, "latent.bin": formats.load_latent,
           "database.bin": formats.load_database, "network .bin": formats.load_network}


@pytest.mark.parametrize("expected", LOADERS)
@pytest.mark.parametrize("contents, kind", [(b"", "an empty file"), (b"frame,x,y\n0,1.5,2.5\n" * 40, "a text file"),
                                            (b"HIERARCHY\nROOT Hips\n{\n", "a BVH file")])
def test_an_empty_or_text_file_is_named_by_every_toolkit_reader(tmp_path, expected, contents, kind):
    path = tmp_path / "given.bin"
    path.write_bytes(contents)
    assert file_kind(path) == kind
    with pytest.raises(InvalidFile) as refusal:
        LOADERS[expected](path)
    assert str(refusal.value) == f"{path}: is {kind}, not a {expected}"


def test_bytes_that_are_not_text_are_not_called_text(tmp_path):
    path = tmp_path / "noise.bin"
    path.write_bytes(bytes(range(1, 256)) * 8)  # no NUL, but control bytes and invalid UTF-8
    assert file_kind(path) is None
    path.write_bytes("na\u00efve caf\u00e9 notes\n".encode() * 300)  # UTF-8 text cut anywhere reads as text
    assert file_kind(path) == "a text file"


def test_a_file_of_another_kind_as_a_cache_is_named(files):
    with pytest.raises(CorruptCache) as refusal:
        cache.open_cache(files["features"], features_path=files["features"])
    assert refusal.value.problem == "is a features.bin (300 frames x 27 features), not a projector cache (HDF5)"


def _checkpoint(path):
    from motion_matching.training.checkpoint import save_checkpoint
    save_checkpoint(path, model={}, optimizer={}, scheduler={}, step=1, config={}, rng={}, inputs={},
                    rolling_loss=None, source="online")
    return path


def _repickled(path, data):
    """The zip archive at ``path`` with its pickle replaced by ``data`` (an intact archive, damaged inside)."""
    source, copy = zipfile.ZipFile(path), io.BytesIO()
    with zipfile.ZipFile(copy, "w") as target:
        for item in source.infolist():
            target.writestr(item, data if item.filename.endswith("/data.pkl") else source.read(item))
    return copy.getvalue()


@pytest.mark.parametrize("given, problem", [
    ("network", "is a network .bin (27 inputs, 5 layers, 59 outputs), not a training checkpoint (.pt)"),
    ("features", "is a features.bin (300 frames x 27 features), not a training checkpoint (.pt)"),
    ("cache", "is an HDF5 file (a projector cache, for example), not a training checkpoint (.pt)"),
    ("empty", "is an empty file, not a training checkpoint (.pt)"),
    ("text", "is a text file, not a training checkpoint (.pt)"),
    ("zip", "is a zip archive, not a training checkpoint (.pt)"),
    ("truncated", "is a damaged checkpoint (its zip archive is incomplete: cut short?)"),
    ("noise", "is not a training checkpoint (.pt)"),
])
def test_a_file_given_as_a_checkpoint_says_what_it_is(files, tmp_path, given, problem):
    needs_torch()
    from motion_matching.training.checkpoint import load_checkpoint
    path = tmp_path / "given.pt"
    makers = {"empty": lambda: b"", "text": lambda: b"step 1000, loss 0.2\n",
              "zip": lambda: _zip_of({"notes.txt": b"hello"}),
              "truncated": lambda: _checkpoint(tmp_path / "whole.pt").read_bytes()[:300],
              "noise": lambda: bytes(range(1, 256)) * 4}
    path.write_bytes(makers[given]() if given in makers else files[given].read_bytes())
    with pytest.raises(InvalidFile) as refusal:
        load_checkpoint(path)
    assert str(refusal.value) == f"{path}: {problem}"


def _zip_of(members):
    data = io.BytesIO()
    with zipfile.ZipFile(data, "w") as archive:
        for name, contents in members.items():
            archive.writestr(name, contents)
    return data.getvalue()


def test_a_checkpoint_damaged_inside_an_intact_archive_is_called_damaged(tmp_path):
    needs_torch()
    from motion_matching.training.checkpoint import load_checkpoint
    path = tmp_path / "run.pt"
    path.write_bytes(_repickled(_checkpoint(path), b"\x80\x02garbage"))
    with pytest.raises(InvalidFile) as refusal:
        load_checkpoint(path)
    assert refusal.value.problem.startswith("is a damaged checkpoint (") and "\n" not in str(refusal.value)


@pytest.mark.parametrize("damage", ["truncated", "network"])
def test_a_damaged_checkpoint_in_out_is_refused_as_damaged_and_kept_until_force(tmp_path, monkeypatch, damage):
    needs_torch()
    from motion_matching.cli import main
    features, latent = write_small_toolkit_files(tmp_path, nframes=300)
    monkeypatch.chdir(tmp_path)
    arguments = ["train", "--database", "", "--iterations", "2", "--hidden", "16", "--hidden-layers", "1",
                 "--held-out", "0", "--quiet", "--out", "run"]
    assert CliRunner().invoke(main, arguments).exit_code == 0
    checkpoint = tmp_path / "run" / "projector_checkpoint.pt"
    cut = checkpoint.read_bytes()[:300] if damage == "truncated" else (TOOLKIT_NETWORKS / "projector.bin").read_bytes()
    checkpoint.write_bytes(cut)
    result = CliRunner().invoke(main, arguments)
    problem = ("is a damaged checkpoint (its zip archive is incomplete: cut short?)" if damage == "truncated" else
               "is a network .bin (27 inputs, 5 layers, 59 outputs), not a training checkpoint (.pt)")
    assert result.exit_code == 1
    assert result.output == (f"Error: {os.path.join('run', 'projector_checkpoint.pt')}: {problem}; choose another "
                             "--out, or pass --force to replace it\n")
    assert checkpoint.read_bytes() == cut
    assert CliRunner().invoke(main, arguments + ["--force"]).exit_code == 0
    assert checkpoint.read_bytes()[:4] == b"PK\x03\x04"


def _readers():
    """Every reader of a file the user names, by what it reads (torch's only where torch is installed)."""
    from motion_matching.data.bvh.text import read_bvh
    readers = {**LOADERS, "cache": lambda path: cache.open_cache(path, features_path=path), "BVH": read_bvh}
    try:
        from motion_matching.projector.export import load_projector
        from motion_matching.training.checkpoint import load_checkpoint
    except ImportError:  # no torch
        return readers
    return {**readers, "checkpoint": load_checkpoint, "projector": load_projector}


@pytest.mark.parametrize("reader", ["features.bin", "latent.bin", "database.bin", "network .bin", "cache", "BVH",
                                    "checkpoint", "projector"])
def test_a_folder_or_a_missing_file_is_the_same_line_from_every_reader(tmp_path, reader):
    read = _readers().get(reader)
    if read is None:
        pytest.skip(f"the {reader} reader needs torch, which is not installed")
    (tmp_path / "folder").mkdir()
    for name, problem in (("folder", "is a folder, not a file"), ("missing.bin", "no such file")):
        with pytest.raises(MissingFile) as refusal:
            read(tmp_path / name)
        assert f"{refusal.value.path}: {refusal.value.problem}" == f"{tmp_path / name}: {problem}"
