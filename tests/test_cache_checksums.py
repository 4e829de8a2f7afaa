"""Fletcher-32 checksums: a damaged chunk is refused wherever rows are read, naming the cache and the rows."""
import logging
import pathlib

import h5py
import numpy as np
import pytest
from click.testing import CliRunner

from motion_matching import cache
from motion_matching.cli import main
from motion_matching.errors import CorruptCache

from cache_fixtures import CHUNK, NQUERIES, command, copy_of, make_reference
from conftest import needs_torch

ARCHIVE = pathlib.Path(__file__).parent / "data" / "cache_v1"


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    return make_reference(tmp_path_factory.mktemp("reference"))


@pytest.fixture
def good(reference, tmp_path):
    """(features.bin, a fresh copy of the good cache) to damage."""
    return reference[0], copy_of(reference[1], tmp_path)


def flip_byte(path, dataset, chunk, offset):
    """Flip the bits of one stored byte of ``chunk`` of ``dataset``, as a disk error would."""
    with h5py.File(path, "r") as handle:
        info = handle[dataset].id.get_chunk_info(chunk)
    assert 0 <= offset < info.size
    data = bytearray(path.read_bytes())
    data[info.byte_offset + offset] ^= 0xFF
    path.write_bytes(bytes(data))


def chunk_rows_text(chunk):
    return f"rows {chunk * CHUNK}..{min((chunk + 1) * CHUNK, NQUERIES) - 1}"


def test_new_caches_carry_checksums_on_both_datasets(reference):
    with h5py.File(reference[1], "r") as handle:
        assert handle.attrs["format_version"] == 2
        assert handle["queries"].fletcher32 and handle["nearest"].fletcher32
    assert cache.cache_info(reference[1])["checksums"] is True


@pytest.mark.parametrize("dataset, chunk, offset", [("queries", 0, 0), ("queries", 1, 4 * 27 * 100 + 2),
                                                    ("nearest", 2, 7), ("nearest", 0, 4 * CHUNK - 1)])
def test_a_damaged_chunk_is_refused_by_every_reader_naming_its_rows(good, dataset, chunk, offset):
    features_path, path = good
    flip_byte(path, dataset, chunk, offset)
    expected = f"{path}: {dataset} {chunk_rows_text(chunk)} fail their Fletcher-32 checksum (the file is damaged); " \
               f"{command(path, features_path)}"
    other = (chunk + 1) % 3
    with cache.open_cache(path, features_path=features_path) as reader:
        reader.read(other * CHUNK, min((other + 1) * CHUNK, NQUERIES))  # other chunks still read
        for start, stop in ((chunk * CHUNK + 1, chunk * CHUNK + 3), (0, NQUERIES)):  # buffered, and direct
            with pytest.raises(CorruptCache) as raised:
                reader.read(start, stop)
            assert str(raised.value) == expected
    with pytest.raises(CorruptCache) as raised:
        cache.verify_cache(path, features_path=features_path, sample=10)
    assert str(raised.value) == expected
    with pytest.raises(CorruptCache) as raised:
        cache.cache_info(path, features_path=features_path)
    assert str(raised.value).startswith(f"{path}: {dataset} {chunk_rows_text(chunk)} fail their Fletcher-32 checksum")


def test_training_from_a_damaged_cache_stops_with_one_line(good, monkeypatch):
    needs_torch()  # training
    features_path, path = good
    monkeypatch.chdir(features_path.parent)
    flip_byte(path, "queries", 0, 50)
    result = CliRunner().invoke(main, ["train", "--database", "", "--offline", str(path), "--iterations", "12",
                                       "--seed", "7", "--hidden", "16", "--hidden-layers", "1", "--held-out", "0",
                                       "--quiet", "--out", "out"])
    assert result.exit_code == 1
    assert result.output.startswith(f"Error: {path}: queries rows 0..{CHUNK - 1} fail their Fletcher-32 checksum")
    assert result.output.count("\n") == 1 and "Traceback" not in result.output
    assert not (features_path.parent / "out" / "projector.bin").exists()


def test_a_version_2_cache_without_checksums_is_refused(good):
    features_path, path = good
    with h5py.File(path, "r+") as handle:
        rows = handle["nearest"][:]
        del handle["nearest"]
        handle.create_dataset("nearest", data=rows, chunks=(CHUNK,))
    with pytest.raises(CorruptCache) as raised:
        cache.open_cache(path, features_path=features_path)
    assert str(raised.value) == (f"{path}: dataset 'nearest' has no Fletcher-32 checksums, which format_version 2 "
                                 f"requires; {command(path, features_path)}")


def test_version_1_archive_opens_with_a_note_that_it_has_no_checksums(caplog):
    with caplog.at_level(logging.WARNING, logger="motion_matching.cache"):
        with cache.open_cache(ARCHIVE / "cache.h5", features_path=ARCHIVE / "features.bin") as reader:
            assert reader.read(0, 300)[0].shape == (300, 27)
    assert [record.getMessage() for record in caplog.records] == [
        f"{ARCHIVE / 'cache.h5'}: format version 1 cache: its rows have no checksums, so damage inside them cannot "
        f"be detected; rebuild it to add them: mm-projector build-cache --features {ARCHIVE / 'features.bin'} "
        f"--out {ARCHIVE / 'cache.h5'} --queries 300 --seed 1234 --force"]
    assert cache.cache_info(ARCHIVE / "cache.h5")["checksums"] is False
    lines = CliRunner().invoke(main, ["cache-info", str(ARCHIVE / "cache.h5")]).output.splitlines()
    assert "checksums: none (format version 1: damage inside its rows cannot be detected; rebuild it with " \
           "build-cache --force to add them)" in lines


def test_every_single_byte_flip_in_a_chunk_is_caught(good):
    """Fletcher-32 catches every error confined to one byte: flip bytes across one chunk of each dataset."""
    features_path, path = good
    original = path.read_bytes()
    rng = np.random.default_rng(0)
    for dataset in ("queries", "nearest"):
        with h5py.File(path, "r") as handle:
            size = handle[dataset].id.get_chunk_info(1).size
        for offset in sorted(rng.choice(size, 8, replace=False).tolist()) + [size - 1]:
            path.write_bytes(original)
            flip_byte(path, dataset, 1, offset)
            with cache.open_cache(path, features_path=features_path) as reader:
                with pytest.raises(CorruptCache, match=f"{dataset} {chunk_rows_text(1)} fail their Fletcher-32"):
                    reader.read(CHUNK, 2 * CHUNK)
