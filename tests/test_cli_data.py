"""generate-database / generate_database.py: sources, options, printed paths and one-line errors."""
import pathlib
import runpy
import sys

import numpy as np
import pytest
from click.testing import CliRunner

from motion_matching.cli import main
from motion_matching.data import features
from motion_matching.toolkit import formats

ROOT = pathlib.Path(__file__).parent.parent


def run(*arguments):
    return CliRunner().invoke(main, ["generate-database", *map(str, arguments)])


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """Folder holding a 600-frame synthetic database.bin, features.bin and latent.bin."""
    out = tmp_path_factory.mktemp("generated")
    result = run("--frames", 600, "--seed", 2, "--out", out)
    assert result.exit_code == 0, result.output
    return out


def test_synthetic_files_are_written_and_reported(generated):
    database = formats.load_database(generated / "database.bin")
    matching, latent = formats.load_features_and_latent(generated / "features.bin", generated / "latent.bin")
    assert database.nframes == 600 and matching.features.shape == (600, 27) and latent.shape == (600, 32)
    result = run("--frames", 600, "--seed", 2, "--out", generated / "again")
    assert result.output.splitlines() == [f"wrote {name}: {generated / 'again' / (name + '.bin')}"
                                          for name in ("database", "features", "latent")]
    for name in ("database.bin", "features.bin", "latent.bin"):
        assert (generated / name).read_bytes() == (generated / "again" / name).read_bytes()


def test_seconds_sets_the_frame_count(tmp_path):
    result = run("--seconds", 5, "--out", tmp_path, "--nlatent", 8)
    assert result.exit_code == 0, result.output
    assert formats.load_latent(tmp_path / "latent.bin").shape == (300, 8)


def test_database_mode_recomputes_features_with_weights(generated, tmp_path):
    result = run("--database", generated / "database.bin", "--out", tmp_path, "--weights", "0.75,1,2,1,1.5")
    assert result.exit_code == 0, result.output
    assert not (tmp_path / "database.bin").exists()
    assert "wrote features: " in result.output and "wrote database" not in result.output
    default = formats.load_features(generated / "features.bin")
    heavier = formats.load_features(tmp_path / "features.bin")
    np.testing.assert_allclose(heavier.scale[12:15], default.scale[12:15] / 2, rtol=1e-6)
    np.testing.assert_array_equal(heavier.features[:, :12], default.features[:, :12])


def test_user_latent_is_kept(generated, tmp_path):
    own = np.arange(600 * 4, dtype=np.float32).reshape(600, 4)
    formats.save_latent(tmp_path / "own.bin", own)
    result = run("--database", generated / "database.bin", "--out", tmp_path, "--latent", tmp_path / "own.bin")
    assert result.exit_code == 0, result.output
    np.testing.assert_array_equal(formats.load_latent(tmp_path / "latent.bin"), own)


def test_user_latent_with_other_frame_count_is_one_line_error(generated, tmp_path):
    formats.save_latent(tmp_path / "own.bin", np.zeros((599, 32), np.float32))
    result = run("--database", generated / "database.bin", "--out", tmp_path / "out", "--latent", tmp_path / "own.bin")
    assert result.exit_code == 1
    assert result.output == f"Error: {tmp_path / 'own.bin'}: has 599 frames but the database has 600\n"
    assert not (tmp_path / "out" / "latent.bin").exists()


def test_truncated_database_is_one_line_error(generated, tmp_path):
    broken = tmp_path / "database.bin"
    broken.write_bytes((generated / "database.bin").read_bytes()[:-5])
    result = run("--database", broken, "--out", tmp_path)
    assert result.exit_code == 1
    assert result.output.startswith(f"Error: {broken}: truncated in contact_states")
    assert len(result.output.splitlines()) == 1


@pytest.mark.parametrize("arguments, message", [
    (["--weights", "1,2"], "expected 5 comma-separated numbers"),
    (["--weights", "1,1,1,1,-1"], "must be a finite number above zero"),
    (["--frames", "600", "--seconds", "10"], "give --frames or --seconds, not both"),
    (["--window", "0:10"], "1 --window option(s) for 0 --bvh file(s)"),
    (["--bvh", __file__, "--window", "a:b"], "'a:b' is not START:STOP"),
    (["--frames", "100"], "x>=240"),
])
def test_bad_options_are_usage_errors(tmp_path, arguments, message):
    result = run(*arguments, "--out", tmp_path)
    assert result.exit_code == 2
    assert message in result.output
    assert not (tmp_path / "features.bin").exists()


def test_plot_writes_a_png(generated, tmp_path):
    pytest.importorskip("matplotlib", reason="--plot needs matplotlib")
    result = run("--database", generated / "database.bin", "--out", tmp_path, "--plot", tmp_path / "plot.png")
    assert result.exit_code == 0, result.output
    assert f"wrote plot: {tmp_path / 'plot.png'}" in result.output
    assert (tmp_path / "plot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bvh_round_trip_through_write_bvh_and_bvh(generated, tmp_path):
    pytest.importorskip("motion_matching.data.bvh.exporter", reason="BVH export lives in another engineer's module")
    pytest.importorskip("motion_matching.data.bvh.importer", reason="BVH import lives in another engineer's module")
    result = run("--frames", 300, "--seed", 2, "--out", tmp_path / "synthetic", "--write-bvh", tmp_path / "bvh")
    assert result.exit_code == 0, result.output
    assert f"BVH files into {tmp_path / 'bvh'}" in result.output
    first = sorted((tmp_path / "bvh").glob("*.bvh"))[0]
    result = run("--bvh", first, "--window", "0:20", "--out", tmp_path / "imported")  # 30 fps source frames
    assert result.exit_code == 0, result.output
    imported = formats.load_database(tmp_path / "imported" / "database.bin")
    assert len(imported.range_starts) == 2 and imported.nframes == 2 * int(imported.range_stops[0])
    assert formats.load_features(tmp_path / "imported" / "features.bin").features.shape == (imported.nframes, 27)


def test_generate_database_script_writes_into_the_current_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["generate_database.py", "--frames", "300", "--nlatent", "4"])
    with pytest.raises(SystemExit) as exit_info:
        runpy.run_path(str(ROOT / "generate_database.py"), run_name="__main__")
    assert exit_info.value.code == 0
    assert "wrote features: ./features.bin" in capsys.readouterr().out
    assert formats.load_features(tmp_path / "features.bin").features.shape == (300, len(features.FEATURE_NAMES))
