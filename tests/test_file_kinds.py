"""A file of the wrong kind is named for what it is, not reported as truncated at some byte."""
import h5py
import numpy as np
import pytest

from motion_matching.errors import InvalidFile, TruncatedFile
from motion_matching.toolkit import formats
from motion_matching.toolkit.sniff import file_kind

from conftest import TOOLKIT_NETWORKS, write_small_toolkit_files
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
