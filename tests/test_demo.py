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
    assert "compared with the measured recipes (BENCHMARKS.md, bench_quality on the 50,000-frame" in result.output
    assert "   toolkit recipe (batch 32, 500,000 iterations): top-1 31.0%, held-out loss 0.4862" in result.output


def test_demo_ends_comparing_its_result_with_the_measured_recipes(monkeypatch):
    from motion_matching import demo
    monkeypatch.setattr(demo, "REFERENCE", (("toolkit recipe", 0.25, 0.5, "1 h"), ("fast recipe", 0.3, 0.45, "9 min")))
    evaluation = {"match": {"top1": 0.2}, "losses": {"loss": 0.6}}
    lines = demo.compare_with_reference(evaluation, demo.DemoSettings())
    assert lines == [f"compared with the measured recipes ({demo.REFERENCE_SOURCE}):",
                     "   toolkit recipe: top-1 25.0%, held-out loss 0.5000, 1 h of training",
                     "   fast recipe: top-1 30.0%, held-out loss 0.4500, 9 min of training",
                     "   this run: top-1 20.0%, held-out loss 0.6000"]
    smaller = demo.compare_with_reference(evaluation, demo.DemoSettings(frames=2000, iterations=40))
    assert smaller[-1].endswith("(settings differ from the measured demo: frames, iterations)")
