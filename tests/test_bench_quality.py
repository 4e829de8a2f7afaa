"""benchmarks/bench_quality.py on a tiny database: evaluation points, JSON, resume, table and plot."""
import json
import pathlib
import sys

import numpy as np
import pytest

from motion_matching.projector import evaluate
from motion_matching.projector.export import load_checkpoint_module
from motion_matching.projector.recipes import recipe_config
from motion_matching.projector.train import TrainingInterrupted
from motion_matching.toolkit import formats

from conftest import write_small_toolkit_files
from train_helpers import build_balltree_cache, write_database

sys.path.insert(0, str(pathlib.Path(__file__).parent.parent / "benchmarks"))
import bench_quality  # noqa: E402
import quality_report  # noqa: E402

CONFIG = recipe_config("fast", iterations=30, batch_size=16, warmup=5, hidden=16, hidden_layers=1,
                       checkpoint_every=10)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """A folder of 2,000-frame toolkit files, their cache and held-out queries."""
    folder = tmp_path_factory.mktemp("quality")
    features_path, latent_path = write_small_toolkit_files(folder)
    write_database(folder / "database.bin", 2000)
    cache = build_balltree_cache(folder / "cache.h5", features_path, nqueries=1000, chunk_rows=128)
    features, latent = formats.load_features_and_latent(features_path, latent_path)
    return folder, cache, bench_quality.HeldOutQueries(features.features, latent, nqueries=300)


@pytest.fixture(scope="module")
def whole(data, tmp_path_factory):
    """An uninterrupted run: (its folder, its record)."""
    out_dir = tmp_path_factory.mktemp("whole")
    return out_dir, train(data, out_dir)


def train(data, out_dir, **options):
    folder, cache, held_out = data
    return bench_quality.train_recipe(CONFIG, data=str(folder), cache=str(cache), out_dir=str(out_dir),
                                      held_out=held_out, label="tiny", points=4, **options)


def test_settings_parse_ints_floats_booleans_and_strings():
    assert bench_quality.parse_settings(["batch_size=512", "lr=0.002", "amsgrad=false", "precision=bfloat16"]) == {
        "batch_size": 512, "lr": 0.002, "amsgrad": False, "precision": "bfloat16"}
    assert bench_quality.parse_settings(["amsgrad=True"])["amsgrad"] is True


def test_evaluation_steps_are_log_spaced_and_end_with_the_run():
    steps = bench_quality.evaluation_steps(500_000, 30)
    assert steps[0] == 500 and steps[-1] == 500_000 and len(steps) == 30
    ratios = np.diff(np.log(steps))
    assert np.allclose(ratios, ratios[0], rtol=0.01)
    assert bench_quality.evaluation_steps(30, 4) == [10, 14, 21, 30]


def test_held_out_measure_is_what_evaluate_reports(data, whole):
    out_dir, record = whole
    module = load_checkpoint_module(out_dir / "projector_checkpoint.pt")
    features, latent = formats.load_features_and_latent(data[0] / "features.bin", data[0] / "latent.bin")
    report, _ = evaluate.evaluate_projector(module, features.features, latent, nqueries=300)
    measured = data[2].measure(module)
    assert measured["top1"] == report["match"]["top1"] and measured["top5"] == report["match"]["top5"]
    assert measured["loss"] == pytest.approx(report["losses"]["loss"], rel=1e-6)
    assert record["points"][-1]["top1"] == measured["top1"]


def test_run_records_points_with_training_time_apart_from_evaluation(whole):
    out_dir, record = whole
    saved = json.loads((out_dir / "quality.json").read_text())
    assert saved == record and record["finished"]
    assert [point["step"] for point in record["points"]] == [10, 14, 21, 30]
    assert [point["samples"] for point in record["points"]] == [160, 224, 336, 480]
    walls = [point["wall_s"] for point in record["points"]]
    assert walls == sorted(walls) and all(point["eval_s"] > 0 for point in record["points"])
    assert record["total_wall_s"] < record["loop_s"] + 60  # evaluations are not counted as training
    assert record["config"]["schedule"] == "cosine" and record["threads"] == CONFIG.threads
    assert len(record["database"]["features_sha256"]) == 64 and record["held_out"]["queries"] == 300
    assert set(record["checkpoint_wall_s"]) == {"10", "20", "30"}


def test_interrupted_run_resumes_to_the_same_results(data, whole, tmp_path):
    with pytest.raises(TrainingInterrupted):
        train(data, tmp_path / "parts", stop_after=17)
    partial = json.loads((tmp_path / "parts" / "quality.json").read_text())
    assert [point["step"] for point in partial["points"]] == [10, 14] and not partial["finished"]
    resumed = train(data, tmp_path / "parts", resume=True)
    assert [point["step"] for point in resumed["points"]] == [10, 14, 21, 30]
    for key in ("loss", "top1", "top5"):
        assert [p[key] for p in resumed["points"]] == [p[key] for p in whole[1]["points"]]
    assert resumed["sessions"][0]["resumed_at_step"] == 17


def test_report_prints_the_table_and_draws_the_plot(whole, tmp_path):
    pytest.importorskip("matplotlib", reason="the plot needs matplotlib")
    records = quality_report.load_records([whole[0] / "quality.json"])
    lines = quality_report.markdown_table(records)
    assert lines[0] == "| recipe | batch | iterations | samples | wall time | held-out loss | top-1 | top-5 |"
    assert lines[2].startswith("| tiny | 16 | 30 | 480 | ")
    png = quality_report.write_plot(records, tmp_path / "quality.png")
    assert pathlib.Path(png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "2,000 frames" in quality_report.plot_title(records)
