"""benchmarks/bench_stepper_precision.py: one stepper.bin stepped in float32 (evaluate-stepper's numbers) and in
bfloat16."""
import json
import pathlib
import sys

import pytest

pytest.importorskip("torch", reason="bench_stepper_precision steps a torch stepper")

from click.testing import CliRunner  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).parent.parent / "benchmarks"))
import bench_stepper_precision  # noqa: E402


def test_the_float32_column_is_evaluate_steppers_and_the_bfloat16_one_differs(tmp_path):
    from stepper_helpers import small_run

    from motion_matching.stepper.evaluate import evaluate_stepper
    files, result = small_run(tmp_path, iterations=3)
    out = tmp_path / "precision.json"
    paths = ["--database", files["database"], "--features", files["features"], "--latent", files["latent"]]
    outcome = CliRunner().invoke(bench_stepper_precision.main, [
        *map(str, paths), "--stepper", f"small={result.network_path}", "--json", str(out)])
    assert outcome.exit_code == 0, outcome.output
    (row,) = json.loads(out.read_text())["rows"]
    report, _ = evaluate_stepper(result.network_path, database_path=files["database"],
                                 features_path=files["features"], latent_path=files["latent"])
    assert row["stepper"] == "small" and row["float32"]["feature_l1"] == pytest.approx(report["feature_l1"]["mean"])
    assert row["float32"]["latent_l1"] == pytest.approx(report["latent_l1"]["mean"])
    assert row["bfloat16"]["feature_l1"] != row["float32"]["feature_l1"]
    assert "small" in outcome.output
