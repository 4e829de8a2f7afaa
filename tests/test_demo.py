"""The demo command runs the whole pipeline and says where each file went."""
import json

from click.testing import CliRunner

from motion_matching.cli import main
from motion_matching.toolkit import formats


def test_demo_runs_every_step_and_writes_loadable_files(tmp_path):
    out = tmp_path / "demo"
    result = CliRunner().invoke(main, ["demo", "--out", str(out), "--frames", "2000", "--iterations", "40",
                                         "--batch-size", "32"])
    assert result.exit_code == 0, result.output
    for step in ("generate synthetic database", "build exact-neighbour cache", "train offline", "export",
                 "evaluate on held-out queries"):
        assert f"== {step}" in result.output
    network = formats.load_network(out / "projector.bin")
    assert network.sizes == [27, 512, 512, 512, 512, 59]
    features, latent = formats.load_features_and_latent(out / "features.bin", out / "latent.bin")
    assert features.features.shape[0] == latent.shape[0] == formats.load_database(out / "database.bin").nframes
    report = json.loads((out / "evaluation" / "evaluation.json").read_text())
    assert 0.0 <= report["match"]["top1"] <= 1.0
    assert f"{out / 'projector.bin'}" in result.output
