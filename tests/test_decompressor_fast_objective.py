"""The fast step's loss against the script's: the same terms and gradients, to float rounding."""
import pytest

torch = pytest.importorskip("torch", reason="the decompressor's losses are torch code")

from motion_matching.data import generate  # noqa: E402
from motion_matching.decompressor import kinematics as kin  # noqa: E402
from motion_matching.decompressor import objective  # noqa: E402
from motion_matching.decompressor.batches import TRAINED_ON, WindowBatches  # noqa: E402
from motion_matching.decompressor.config import DecompressorConfig  # noqa: E402
from motion_matching.decompressor.fast_objective import fast_decompressor_losses  # noqa: E402
from motion_matching.decompressor.inputs import load_inputs  # noqa: E402
from motion_matching.decompressor.train import make_autoencoder  # noqa: E402
from motion_matching.training.step import PrecisionForward  # noqa: E402

FRAMES = 1200
NEAR_TIE = 2e-6  # a difference this small may change sign with the order of the roundings


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    """The inputs, a freshly made autoencoder and one batch of 24 windows."""
    files = generate.generate_files(tmp_path_factory.mktemp("fast_objective"), nframes=FRAMES)
    inputs = load_inputs(files["database"], files["features"])
    module = make_autoencoder(inputs, DecompressorConfig(hidden=64))
    gnd, X, _ = WindowBatches(inputs, batch_size=24).next()
    return inputs, module, gnd, X


def distant_windows(inputs, *, nwindows, gap, seed):
    """``(gnd, X)`` of ``nwindows`` windows of two frames ``gap`` frames apart: finite differences far from
    zero, so that few differ from the network's by a near tie (consecutive frames of a fresh network differ
    from the truth's by about as much as float rounding)."""
    starts = torch.randint(0, inputs.nframes - gap, [nwindows], generator=torch.Generator().manual_seed(seed))
    rows = (starts[:, None] + torch.tensor([0, gap])).reshape(-1)
    gnd = {name: inputs.arrays[name].index_select(0, rows).unflatten(0, (nwindows, 2)) for name in TRAINED_ON}
    return gnd, inputs.X.index_select(0, rows).unflatten(0, (nwindows, 2))


class FixedOutputs:
    """Stands in for an ``Autoencoder``: its latent and decoded pose are given tensors."""

    def __init__(self, Zgnd, Ytil):
        self.Zgnd, self.Ytil = Zgnd, Ytil

    def encode(self, pose):
        return self.Zgnd

    def decode(self, features, latent):
        return self.Ytil


def script_character_differences(gnd, Ytil, parents):
    """The script's character-space differences (B, W, bones, ...) of ``Ytil`` (its order, its formulas)."""
    til = objective.split_output(Ytil, len(parents))
    for name in ("pos", "txy", "vel", "ang"):
        til[name] = torch.cat([gnd["Y" + name][:, :, 0:1], til[name]], dim=2)
    world = kin.matrix_forward_kinematics(kin.matrix_from_two_columns(til["txy"]), til["pos"], til["vel"],
                                          til["ang"], parents)
    root = world[0][:, :, 0:1]
    return [gnd["Qxfm"] - kin.inv_compose(root, world[0]),
            gnd["Qpos"] - kin.inv_rotate(root, world[1] - world[1][:, :, 0:1]),
            gnd["Qvel"] - kin.inv_rotate(root, world[2]), gnd["Qang"] - kin.inv_rotate(root, world[3])]


def near_tie_windows(gnd, Ytil, parents):
    """(B,) bool: the windows holding a difference of the script's (non-root character-space values, or their
    or the local values' finite differences over the window) within NEAR_TIE of zero."""
    differences = script_character_differences(gnd, Ytil.detach(), parents)
    steps = [difference[:, 1:] - difference[:, :-1] for difference in differences]
    close = [(part[:, :, 1:].abs() < NEAR_TIE).flatten(1).any(-1) for part in differences + steps]
    truth = objective.compressor_input(gnd, list(Ytil.shape[:2]))[..., :Ytil.shape[-1] - 8].diff(dim=1)
    estimate = Ytil[..., :-8].detach().diff(dim=1)
    # the two orders round the two finite differences alike but for the last bits: a near tie is relative
    local = (truth - estimate).abs() < NEAR_TIE * torch.maximum(truth.abs(), estimate.abs())
    return torch.stack(close + [local.flatten(1).any(-1)]).any(0)


@pytest.mark.parametrize("precision", ["float32", "bfloat16"])
def test_fast_terms_are_the_scripts_to_float_rounding(batch, precision):
    inputs, module, gnd, X = batch
    forward = PrecisionForward(precision, "cpu")
    with torch.no_grad():
        expected, expected_Z = objective.decompressor_losses(module, gnd, X, inputs.parents, forward)
        actual, actual_Z = fast_decompressor_losses(module, gnd, X, inputs.parents, forward)
    assert torch.equal(expected_Z, actual_Z)
    for name, want, got in zip(expected._fields, expected, actual):
        assert got.shape == ()
        torch.testing.assert_close(got, want, rtol=1e-5, atol=0, msg=lambda message, name=name: f"{name}: {message}")


def test_fast_gradients_are_the_scripts_except_where_a_difference_is_a_near_tie(batch):
    inputs, module, _, _ = batch
    gnd, X = distant_windows(inputs, nwindows=24, gap=40, seed=5)
    with torch.no_grad():
        Zgnd = module.encode(objective.compressor_input(gnd, list(X.shape[:2])))
        Ytil = module.decode(X, Zgnd)
    gradients = []
    for losses in (objective.decompressor_losses, fast_decompressor_losses):
        outputs = FixedOutputs(Zgnd.clone().requires_grad_(), Ytil.clone().requires_grad_())
        terms, _ = losses(outputs, gnd, X, inputs.parents, lambda function, *args: function(*args))
        gradients.append(torch.autograd.grad(terms.loss, [outputs.Zgnd, outputs.Ytil]))
    (Z_expected, Y_expected), (Z_actual, Y_actual) = gradients
    torch.testing.assert_close(Z_actual, Z_expected, rtol=1e-5, atol=1e-6 * float(Z_expected.abs().max()))
    ties = near_tie_windows(gnd, Ytil, inputs.parents)
    assert int(ties.sum()) <= len(ties) // 4, "the test's batch should hold few near ties"
    scale = float(Y_expected.abs().max())
    torch.testing.assert_close(Y_actual[~ties], Y_expected[~ties], rtol=1e-4, atol=1e-5 * scale)
