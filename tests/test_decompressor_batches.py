"""The decompressor's window batches: the script's frames, gathered row by row."""
import pytest

torch = pytest.importorskip("torch", reason="the decompressor's batches are torch tensors")

from motion_matching.data import generate  # noqa: E402
from motion_matching.decompressor.batches import TRAINED_ON, WindowBatches  # noqa: E402
from motion_matching.decompressor.inputs import load_inputs  # noqa: E402


def test_batches_hold_the_frames_of_the_drawn_windows(tmp_path):
    files = generate.generate_files(tmp_path, nframes=1200)
    inputs = load_inputs(files["database"], files["features"])
    torch.manual_seed(3)
    gnd, X, _ = WindowBatches(inputs, batch_size=8).next()
    torch.manual_seed(3)
    starts = torch.randint(0, inputs.nframes - 2, size=[8])  # the script's draw
    frames = starts[:, None] + torch.arange(2)
    assert set(gnd) == set(TRAINED_ON)
    for name in TRAINED_ON:
        assert torch.equal(gnd[name], inputs.arrays[name][frames]), name
    assert torch.equal(X, inputs.X[frames])
