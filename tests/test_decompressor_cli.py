"""train-decompressor and evaluate-decompressor: files of another run refused, reruns continue, Ctrl-C keeps
the work, latent.bin's provenance reported by check-files, the evaluation's report and plot."""
import json

import pytest
from click.testing import CliRunner
from decompressor_helpers import FRAMES

from motion_matching.cli import main
from motion_matching.cli import train as train_cli
from motion_matching.data import generate
from motion_matching.data.features import FeatureWeights
from motion_matching.toolkit import formats

pytest.importorskip("torch", reason="the command trains a network, which needs torch")

QUICK = ["--hidden", "64", "--threads", "1", "--quiet"]


@pytest.fixture
def inputs(tmp_path, monkeypatch):
    """A FRAMES-frame synthetic database and its features in the current folder (a temporary one)."""
    generate.generate_files(tmp_path, nframes=FRAMES)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def train(*arguments):
    return CliRunner().invoke(main, ["train-decompressor", *QUICK, *arguments])


def test_a_latent_bin_of_another_run_is_refused_and_kept(inputs):
    before = (inputs / "latent.bin").read_bytes()  # the stand-in generate-database wrote, in --out
    result = train("--iterations", "5")
    assert result.exit_code == 1
    assert result.output == ("Error: ./latent.bin: is another run's (no decompressor_checkpoint.pt beside it to "
                             "continue from); choose another --out, or pass --force to replace it\n")
    assert (inputs / "latent.bin").read_bytes() == before and not (inputs / "decompressor.bin").exists()


def test_rerun_does_nothing_and_a_larger_iterations_continues(inputs):
    assert train("--iterations", "8", "--out", "run").exit_code == 0
    again = train("--iterations", "8", "--out", "run")
    assert again.exit_code == 0 and again.output.startswith("run/decompressor.bin is already trained (8 iterations")
    more = train("--iterations", "16", "--out", "run")
    straight = train("--iterations", "16", "--out", "straight")
    assert more.exit_code == straight.exit_code == 0, more.output + straight.output
    for name in ("decompressor.bin", "latent.bin"):  # one thread, resumed exactly: the same bytes
        assert (inputs / "run" / name).read_bytes() == (inputs / "straight" / name).read_bytes()


def test_ctrl_c_keeps_the_work_and_the_same_command_continues(inputs, monkeypatch):
    def interrupt_at(step):
        def progress(report):
            if report.step == step:
                raise KeyboardInterrupt
        return progress
    line = [word for word in QUICK if word != "--quiet"] + ["--iterations", "30", "--out", "run"]
    with monkeypatch.context() as patch:
        patch.setattr(train_cli, "training_progress", lambda bar: interrupt_at(20))
        stopped = CliRunner().invoke(main, ["train-decompressor", *line])
    assert stopped.exit_code == 130
    assert ("interrupted after 20 iterations; wrote run/decompressor.bin and run/decompressor_checkpoint.pt; "
            "run the same command again to continue") in stopped.output
    resumed = CliRunner().invoke(main, ["train-decompressor", *line])
    assert resumed.exit_code == 0 and "after 30 iterations" in resumed.output


def test_check_files_tells_a_fresh_latent_from_a_stale_one(inputs):
    assert train("--iterations", "3", "--out", "run").exit_code == 0
    files = ["--database", "database.bin", "--features", "features.bin"]
    fresh = CliRunner().invoke(main, ["check-files", *files, "--latent", "run/latent.bin"])
    assert fresh.exit_code == 0
    assert "run/latent.bin: written by train-decompressor after 3 iterations from these files\n" in fresh.output
    generate.generate_files(inputs / "other", nframes=FRAMES, weights=FeatureWeights(trajectory_directions=2))
    stale = CliRunner().invoke(main, ["check-files", "--features", "other/features.bin", "--latent", "run/latent.bin"])
    assert stale.exit_code == 0
    assert ("run/latent.bin: stale: trained from another features.bin (run train-decompressor again)\n"
            in stale.output)
    unknown = CliRunner().invoke(main, ["check-files", *files, "--latent", "latent.bin"])
    assert "latent.bin: no record of what it was trained from" in unknown.output


def test_evaluate_decompressor_writes_its_report_and_plot(inputs):
    pytest.importorskip("matplotlib", reason="the plot needs matplotlib")
    assert train("--iterations", "3", "--out", "run").exit_code == 0
    line = ["evaluate-decompressor", "--decompressor", "run/decompressor.bin", "--latent", "run/latent.bin",
            "--out", "evaluation"]
    result = CliRunner().invoke(main, line)
    assert result.exit_code == 0, result.output
    report = json.loads((inputs / "evaluation" / "decompressor_evaluation.json").read_text())
    assert report["frames"] == FRAMES and 0 <= report["contact_accuracy"] <= 1
    assert 0 < report["position_error_cm"]["mean"] <= report["position_error_cm"]["p95"] <= \
        report["position_error_cm"]["max"]
    assert set(report["loss_terms"]) >= {"loss", "loc_pos", "chr_xfm", "vreg"}
    assert (inputs / "evaluation" / "decompressor_errors.png").read_bytes()[:4] == b"\x89PNG"
    assert CliRunner().invoke(main, line).exit_code == 0  # its own files: replaced without --force
    (inputs / "evaluation" / "decompressor_evaluation.json").write_text("{}")
    refused = CliRunner().invoke(main, line)
    assert refused.exit_code == 1
    assert refused.output == ("Error: evaluation/decompressor_evaluation.json: exists (not written by "
                              "evaluate-decompressor); pass --force to replace it, or choose another --out\n")


def test_a_latent_of_other_frames_is_refused(inputs, tmp_path):
    assert train("--iterations", "2", "--out", "run").exit_code == 0
    formats.save_latent(tmp_path / "short.bin", formats.load_latent("run/latent.bin")[:-1])
    result = CliRunner().invoke(main, ["evaluate-decompressor", "--decompressor", "run/decompressor.bin", "--latent",
                                       str(tmp_path / "short.bin"), "--out", "evaluation"])
    assert result.exit_code == 1
    assert result.output == f"Error: {tmp_path / 'short.bin'}: has {FRAMES - 1} frames but database.bin has {FRAMES}\n"


def test_a_decompressor_of_other_layers_is_refused_before_decoding(inputs):
    import numpy as np
    assert train("--iterations", "2", "--out", "run").exit_code == 0
    network = formats.load_network("run/decompressor.bin")
    size_in, hidden, size_out = network.sizes
    latent = formats.load_latent("run/latent.bin")
    nfeatures, bones = formats.load_features("features.bin").features.shape[1], len(formats.load_database(
        "database.bin").bone_parents) - 1
    square = (np.zeros((hidden, hidden), np.float32), np.zeros(hidden, np.float32))
    formats.save_network("deeper.bin", formats.Network(network.mean_in, network.std_in, network.mean_out,
                                                       network.std_out, [network.layers[0], square, network.layers[1]]))
    formats.save_latent("narrow.bin", latent[:, :-1])

    def refusal(path, sizes, nlatent):
        return (f"Error: {path}: has layers {' -> '.join(map(str, sizes))}; a decompressor of these files has "
                f"{nfeatures + nlatent} -> hidden -> {size_out} ({nfeatures} features + {nlatent} latent in, {bones} "
                "bones' pose, the root's velocities and 2 contacts out)\n")
    nlatent = latent.shape[1]
    for decompressor, latent_path, expected in (
            ("deeper.bin", "run/latent.bin", refusal("deeper.bin", [size_in, hidden, hidden, size_out], nlatent)),
            ("run/decompressor.bin", "narrow.bin", refusal("run/decompressor.bin", network.sizes, nlatent - 1))):
        result = CliRunner().invoke(main, ["evaluate-decompressor", "--decompressor", decompressor, "--latent",
                                           latent_path, "--out", "evaluation"])
        assert result.exit_code == 1
        assert result.output == expected
    assert not (inputs / "evaluation").exists()


def test_device_cuda_without_a_gpu_is_one_line_and_writes_nothing(inputs):
    import torch
    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device: benchmarks/gpu_check.sh trains the decompressor on it")
    result = train("--iterations", "2", "--out", "run", "--device", "cuda")
    assert result.exit_code == 1
    assert result.output == "Error: --device: cuda requested but torch sees no CUDA device\n"
    assert not (inputs / "run").exists()


def test_plots_are_written_at_each_save_and_a_users_png_is_refused(inputs):
    pytest.importorskip("matplotlib", reason="--plots needs matplotlib")
    (inputs / "run").mkdir()
    (inputs / "run" / "decompressor_Z.png").write_bytes(b"mine")
    refused = train("--iterations", "2", "--out", "run", "--plots")
    assert refused.exit_code == 1
    assert refused.output == ("Error: run/decompressor_Z.png: exists (not written by train-decompressor); pass "
                              "--force to replace it, or choose another --out\n")
    assert (inputs / "run" / "decompressor_Z.png").read_bytes() == b"mine"
    (inputs / "run" / "decompressor_Z.png").unlink()
    assert train("--iterations", "2", "--out", "run", "--plots").exit_code == 0
    for name in ("decompressor_X.png", "decompressor_Z.png"):
        assert (inputs / "run" / name).read_bytes()[:4] == b"\x89PNG"


def test_a_database_it_cannot_train_on_is_one_line(tmp_path, monkeypatch):
    from train_helpers import write_database
    monkeypatch.chdir(tmp_path)
    write_database(tmp_path / "one_bone.bin", 40)
    generate.generate_files(tmp_path, nframes=FRAMES)
    result = train("--database", "one_bone.bin", "--out", "run")
    assert result.exit_code == 1
    assert result.output == ("Error: one_bone.bin: has 1 bone; the decompressor decodes the bones after the "
                             "simulation bone, so it needs at least 2\n")
    short = generate.generate_files(tmp_path / "short", nframes=FRAMES + 60)
    result = train("--features", short["features"], "--out", "run")
    assert result.exit_code == 1
    assert result.output == f"Error: {short['features']}: has {FRAMES + 60} frames but database.bin has {FRAMES}\n"
    assert not (tmp_path / "run").exists()


def test_projector_training_says_whether_its_latent_is_fresh_or_stale(inputs, caplog):
    from motion_matching.projector.config import TrainConfig
    from motion_matching.projector.train import train_projector
    assert train("--iterations", "3", "--out", "run").exit_code == 0
    generate.generate_files(inputs / "other", nframes=FRAMES, weights=FeatureWeights(trajectory_directions=2))
    config = TrainConfig(iterations=2, hidden=16, hidden_layers=1, threads=1)
    caplog.set_level("INFO", logger="motion_matching")
    for features, out in (("features.bin", "fresh"), ("other/features.bin", "stale")):
        caplog.clear()
        train_projector(config, features_path=features, latent_path="run/latent.bin", database_path="database.bin",
                        out_dir=out, held_out_queries=0)
        lines = [(record.levelname, record.getMessage()) for record in caplog.records if "run/latent.bin" in
                 record.getMessage()]
        expected = {"fresh": ("INFO", "run/latent.bin: written by train-decompressor after 3 iterations from these "
                                      "files"),
                    "stale": ("WARNING", "run/latent.bin: stale: trained from another features.bin (run "
                                         "train-decompressor again)")}
        assert lines == [expected[out]]
