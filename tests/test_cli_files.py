"""The check-files command: a one-line error and exit 1 for bad files, a summary for good ones."""
import numpy as np
from click.testing import CliRunner

from motion_matching.cli import main
from motion_matching.toolkit import formats

from formats_helpers import small_database


def test_check_files_reports_a_summary(tmp_path):
    formats.save_database(tmp_path / "database.bin", small_database())
    formats.save_latent(tmp_path / "latent.bin", np.ones((10, 32), np.float32))
    result = CliRunner().invoke(main, ["check-files", "--database", str(tmp_path / "database.bin"),
                                       "--latent", str(tmp_path / "latent.bin")])
    assert result.exit_code == 0, result.output
    assert "nframes: 10" in result.output and "nlatent: 32" in result.output


def test_check_files_truncated_database_is_one_line_error(tmp_path):
    path = tmp_path / "database.bin"
    formats.save_database(path, small_database())
    path.write_bytes(path.read_bytes()[:-3])
    result = CliRunner().invoke(main, ["check-files", "--database", str(path)])
    assert result.exit_code == 1
    assert result.output == f"Error: {path}: truncated in contact_states at byte 2164: needs 20 bytes, 17 left\n"


def test_check_files_mismatched_frame_counts(tmp_path):
    formats.save_database(tmp_path / "database.bin", small_database())
    formats.save_latent(tmp_path / "latent.bin", np.ones((11, 32), np.float32))
    result = CliRunner().invoke(main, ["check-files", "--database", str(tmp_path / "database.bin"),
                                       "--latent", str(tmp_path / "latent.bin")])
    assert result.exit_code == 1
    assert result.output.startswith(f"Error: {tmp_path / 'latent.bin'}: has 11 frames but ")
    assert "Traceback" not in result.output
