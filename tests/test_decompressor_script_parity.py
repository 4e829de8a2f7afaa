"""The toolkit's own train_decompressor.py and ours with --exact-toolkit write the same bytes.

The script comes from ../shared/fixtures/toolkit/scripts (its README: run a copy whose only change is
``niter``, in a folder holding database.bin and features.bin, with the scripts folder on PYTHONPATH).
It writes decompressor.bin and latent.bin only after iterations 0, 1,000, 2,000, ...: one iteration
checks everything before the loop and the first step; 1,001 end on the next save (the learning-rate
decay, 1,000 batch draws and AdamW steps), here reached by our run in two halves, so exact resume is
checked against the script too.
"""
import pytest

from motion_matching.data import generate
from motion_matching.toolkit import formats

from conftest import toolkit_script_running

FRAMES = 1200  # the synthetic generator cuts this into 4 clips: the script's preview needs clip 2
NAMES = ("decompressor.bin", "latent.bin")  # what the script writes at each save


def decompressor_script_running(folder, *, iterations):
    """A copy of the script with only ``niter`` changed, running in ``folder`` (it writes NAMES there)."""
    for module in ("matplotlib", "tensorboard"):
        pytest.importorskip(module, reason=f"the toolkit's script imports {module}")
    return toolkit_script_running("train_decompressor.py", folder, iterations=iterations)


def small_database(folder):
    """database.bin and features.bin of FRAMES synthetic frames in ``folder`` (at least 3 clips)."""
    files = generate.generate_files(folder, nframes=FRAMES)
    assert len(formats.load_database(files["database"]).range_starts) >= 3
    return files


def ours(files, out, *, iterations, **settings):
    from motion_matching.decompressor.config import DecompressorConfig
    from motion_matching.decompressor.train import train_decompressor
    config = DecompressorConfig(iterations=iterations, exact_toolkit=True, **settings)
    result = train_decompressor(config, database_path=files["database"], features_path=files["features"],
                                out_dir=out)
    assert result.steps == iterations
    return {name: (out / name).read_bytes() for name in NAMES}


def test_one_iteration_writes_the_scripts_files(tmp_path):
    files = small_database(tmp_path)
    with decompressor_script_running(tmp_path, iterations=1):
        written = ours(files, tmp_path / "ours", iterations=1)
    expected = {name: (tmp_path / name).read_bytes() for name in NAMES}
    assert formats.load_network(tmp_path / "ours" / "decompressor.bin").sizes[0] == 27 + 32
    for name in expected:
        assert written[name] == expected[name], f"{name} differs from the script's after iteration 0"


def test_1001_iterations_in_two_runs_write_the_scripts_files(tmp_path):
    files = small_database(tmp_path)
    with decompressor_script_running(tmp_path, iterations=1001):
        ours(files, tmp_path / "ours", iterations=600)  # stops between saves: the checkpoint carries the stream on
        written = ours(files, tmp_path / "ours", iterations=1001)
    expected = {name: (tmp_path / name).read_bytes() for name in NAMES}
    for name in expected:
        assert written[name] == expected[name], f"{name} differs from the script's after iteration 1,000"
