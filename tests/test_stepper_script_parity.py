"""The toolkit's own train_stepper.py and ours with --exact-toolkit write the same stepper.bin bytes.

The script comes from ../shared/fixtures/toolkit/scripts (its README: run a copy whose only change is
``niter``, in a folder holding database.bin, features.bin and latent.bin, with the scripts folder on
PYTHONPATH). It writes stepper.bin only after iterations 0, 1,000, 2,000, ...: one iteration checks the
normalisation, the initial draws and the first rollout and step; 1,001 end on the next save (the
learning-rate decay, 1,000 batch draws, rollouts and AdamW steps), here reached by our run in two
halves, so exact resume is checked against the script too.
"""
import pytest

from motion_matching.data import generate
from motion_matching.toolkit import formats

from conftest import toolkit_script_running

FRAMES = 1200  # the synthetic generator cuts this into 4 clips: the script's preview needs clip 2


def stepper_script_running(folder, *, iterations):
    """A copy of the script with only ``niter`` changed, running in ``folder`` (it writes stepper.bin there)."""
    for module in ("matplotlib", "tensorboard"):
        pytest.importorskip(module, reason=f"the toolkit's script imports {module}")
    return toolkit_script_running("train_stepper.py", folder, iterations=iterations)


def small_database(folder):
    """database.bin, features.bin and the stand-in latent.bin of FRAMES synthetic frames (at least 3 clips)."""
    files = generate.generate_files(folder, nframes=FRAMES)
    assert len(formats.load_database(files["database"]).range_starts) >= 3
    return files


def ours(files, out, *, iterations):
    from motion_matching.stepper.config import StepperConfig
    from motion_matching.stepper.train import train_stepper
    config = StepperConfig(iterations=iterations, exact_toolkit=True)
    result = train_stepper(config, database_path=files["database"], features_path=files["features"],
                           latent_path=files["latent"], out_dir=out)
    assert result.steps == iterations
    return (out / "stepper.bin").read_bytes()


def test_one_iteration_writes_the_scripts_stepper_bin(tmp_path):
    files = small_database(tmp_path)
    with stepper_script_running(tmp_path, iterations=1):
        written = ours(files, tmp_path / "ours", iterations=1)
    expected = (tmp_path / "stepper.bin").read_bytes()
    assert formats.load_network(tmp_path / "ours" / "stepper.bin").sizes == [59, 512, 512, 59]
    assert written == expected, "stepper.bin differs from the script's after iteration 0"


def test_1001_iterations_in_two_runs_write_the_scripts_stepper_bin(tmp_path):
    files = small_database(tmp_path)
    with stepper_script_running(tmp_path, iterations=1001):
        ours(files, tmp_path / "ours", iterations=600)  # stops between saves: the checkpoint carries the stream on
        written = ours(files, tmp_path / "ours", iterations=1001)
    expected = (tmp_path / "stepper.bin").read_bytes()
    assert written == expected, "stepper.bin differs from the script's after iteration 1,000"
