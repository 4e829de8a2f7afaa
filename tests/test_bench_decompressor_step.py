"""benchmarks/bench_decompressor_step.py: a tiny whole run, and the 'before' entry (git, array-by-array batches)."""
import json
import pathlib
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch", reason="bench_decompressor_step times torch training steps")

from click.testing import CliRunner  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).parent.parent / "benchmarks"))
import bench_decompressor_step  # noqa: E402

from motion_matching.data import generate  # noqa: E402
from motion_matching.decompressor import kinematics as kin  # noqa: E402
from motion_matching.decompressor.batches import WindowBatches  # noqa: E402
from motion_matching.decompressor.inputs import load_inputs  # noqa: E402
from motion_matching.toolkit.skeleton import BONE_PARENTS  # noqa: E402


def test_a_tiny_run_times_every_entry_and_pairs_it_with_the_fast_one(tmp_path):
    path = tmp_path / "step.json"
    result = CliRunner().invoke(bench_decompressor_step.main, ["--frames", "1200", "--batch", "4", "--repeats", "2",
                                                               "--steps", "1", "--precision", "float32",
                                                               "--json", str(path)])
    assert result.exit_code == 0, result.output
    rows = json.loads(path.read_text())["rows"]
    assert [row["entry"] for row in rows] == ["script", "level", "fast"]
    for row in rows:
        assert len(row["ms_repeats"]) == 2 and row["ms"] > 0
        assert row["ratio_min"] <= row["ratio_median"] <= row["ratio_max"]
    assert rows[-1]["ratio_median"] == 1.0
    assert "fast" in result.output and "float32" in result.output


def test_before_reads_the_level_kinematics_of_a_git_revision():
    root = pathlib.Path(__file__).parent.parent
    if subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True).returncode != 0:
        pytest.skip("not a git checkout: --before reads a revision's file with git show")
    level = bench_decompressor_step.kinematics_at("HEAD")
    generator = torch.Generator().manual_seed(0)
    rotations = kin.matrix_from_two_columns(torch.randn(3, len(BONE_PARENTS), 3, 2, generator=generator))
    vectors = [torch.randn(3, len(BONE_PARENTS), 3, generator=generator) for _ in range(3)]
    for expected, actual in zip(kin.matrix_forward_kinematics(rotations, *vectors, BONE_PARENTS),
                                level(rotations, *vectors, BONE_PARENTS)):
        torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-5)


def test_the_before_entrys_array_by_array_batches_are_the_packed_ones(tmp_path):
    files = generate.generate_files(tmp_path, nframes=1200)
    inputs = load_inputs(files["database"], files["features"])
    batches = []
    for kind in (bench_decompressor_step.ArrayBatches, WindowBatches):
        torch.manual_seed(7)
        batches.append(kind(inputs, batch_size=6).next())
    (old, old_X, old_frames), (new, new_X, new_frames) = batches
    assert set(old) == set(new) and torch.equal(old_X, new_X) and torch.equal(old_frames, new_frames)
    for name in old:
        assert torch.equal(old[name], new[name]), name
