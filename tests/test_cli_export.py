"""The ``export`` and ``evaluate`` commands: exit codes and exact lines."""
import json

import pytest
from click.testing import CliRunner

from motion_matching.cli import main
from motion_matching.toolkit import formats

from conftest import TOOLKIT_NETWORKS, write_small_toolkit_files
from export_helpers import random_projector, write_checkpoint


def invoke(*args):
    return CliRunner().invoke(main, [str(arg) for arg in args])


def test_export_checkpoint_to_runtime_bin(tmp_path):
    source = write_checkpoint(tmp_path / "run.pt", random_projector(hidden=32))
    out = tmp_path / "projector.bin"
    result = invoke("export", source, "--out", out)
    assert result.exit_code == 0, result.output
    assert result.output == (f"wrote {out}: bin, 27 -> 32 -> 32 -> 32 -> 32 -> 59, {out.stat().st_size} bytes, "
                             "outputs output\n")
    assert formats.load_network(out).sizes == [27, 32, 32, 32, 32, 59]


def test_export_bin_to_split_onnx(tmp_path):
    pytest.importorskip("onnx", reason="ONNX export needs the optional [onnx] extra")
    out = tmp_path / "projector.onnx"
    result = invoke("export", TOOLKIT_NETWORKS / "projector.bin", "--out", out, "--format", "onnx", "--split")
    assert result.exit_code == 0, result.output
    assert result.output.endswith("bytes, outputs features, latent\n")
    assert out.stat().st_size > 3_000_000


def test_export_damaged_checkpoint_is_one_error_line(tmp_path):
    damaged = tmp_path / "run.pt"
    damaged.write_bytes(b"PK\x03\x04 not really a zip")
    result = invoke("export", damaged, "--out", tmp_path / "projector.bin")
    assert result.exit_code == 1
    assert result.output == f"Error: {damaged}: is a damaged checkpoint (its zip archive is incomplete: cut short?)\n"
    assert not (tmp_path / "projector.bin").exists()


def test_export_truncated_network_is_one_error_line(tmp_path):
    cut = tmp_path / "cut.bin"
    cut.write_bytes((TOOLKIT_NETWORKS / "stepper.bin").read_bytes()[:10])
    result = invoke("export", cut, "--out", tmp_path / "out.onnx", "--format", "onnx")
    assert result.exit_code == 1
    assert result.output == f"Error: {cut}: truncated in mean_in at byte 4: needs 236 bytes, 6 left\n"


def test_evaluate_prints_the_numbers_and_writes_the_report(tmp_path):
    features, latent = write_small_toolkit_files(tmp_path, nframes=500)
    out = tmp_path / "eval"
    result = invoke("evaluate", "--projector", TOOLKIT_NETWORKS / "projector.bin", "--features", features,
                    "--latent", latent, "--out", out, "--queries", 1000, "--no-plots")
    assert result.exit_code == 0, result.output
    report = json.loads((out / "evaluation.json").read_text())
    lines = result.output.splitlines()
    assert lines[0] == "1000 held-out queries (seed 271828) over 500 frames"
    assert lines[3] == (f"match: top-1 {100 * report['match']['top1']:.1f}%  "
                        f"top-5 {100 * report['match']['top5']:.1f}%")
    assert lines[-1] == f"wrote {out / 'evaluation.json'}"
    assert report["queries"] == 1000 and report["seed"] == 271828


def test_evaluate_refuses_a_projector_that_does_not_fit(tmp_path):
    features, latent = write_small_toolkit_files(tmp_path, nframes=100)
    stepper = TOOLKIT_NETWORKS / "stepper.bin"
    result = invoke("evaluate", "--projector", stepper, "--features", features, "--latent", latent,
                    "--out", tmp_path / "eval", "--no-plots")
    assert result.exit_code == 1
    assert result.output == f"Error: {stepper}: maps 59 -> 59 values but the data need 27 -> 27 + 32\n"


@pytest.mark.parametrize("command", ["export", "evaluate"])
def test_commands_have_help_with_an_example(command):
    result = invoke(command, "--help")
    assert result.exit_code == 0
    assert "Example: mm-projector " + command in result.output


def test_export_takes_the_format_from_the_extension(tmp_path):
    pytest.importorskip("onnx", reason="ONNX export needs the optional [onnx] extra")
    import onnx
    out = tmp_path / "guess.onnx"
    result = invoke("export", TOOLKIT_NETWORKS / "projector.bin", "--out", out)
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"wrote {out}: onnx, ")
    onnx.checker.check_model(onnx.load(out))


def test_export_refuses_a_format_that_contradicts_the_extension(tmp_path):
    for name, format_ in (("guess.onnx", "bin"), ("projector.bin", "onnx")):
        out = tmp_path / name
        result = invoke("export", TOOLKIT_NETWORKS / "projector.bin", "--out", out, "--format", format_)
        assert result.exit_code == 1
        assert result.output == (f"Error: {out}: its extension names the {name.split('.')[1]} format but --format "
                                 f"{format_} was given; drop --format or name the file *.{format_}\n")
        assert not out.exists()


def test_evaluate_reads_features_and_latent_of_the_current_folder_by_default(tmp_path, monkeypatch):
    write_small_toolkit_files(tmp_path, nframes=500)
    monkeypatch.chdir(tmp_path)
    result = invoke("evaluate", "--projector", TOOLKIT_NETWORKS / "projector.bin", "--out", "evaluation",
                    "--queries", 500, "--no-plots")
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "evaluation" / "evaluation.json").read_text())["nframes"] == 500
