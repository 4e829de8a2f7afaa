"""--middle-rank: the stepper's middle layer trained as two factors, written as the runtime's full layer."""
import pytest
from click.testing import CliRunner

from motion_matching.cli import main
from motion_matching.stepper.config import StepperConfig
from motion_matching.training.config import numeric_differences


@pytest.mark.parametrize("settings, message", [
    ({"middle_rank": 0}, r"middle_rank must be between 1 and hidden - 1 \(511\), not 0"),
    ({"middle_rank": 512}, r"middle_rank must be between 1 and hidden - 1 \(511\), not 512"),
    ({"middle_rank": 32, "hidden": 32}, r"between 1 and hidden - 1 \(31\), not 32"),
    ({"middle_rank": 64, "exact_toolkit": True}, "leave out --middle-rank"),
])
def test_ranks_the_middle_layer_cannot_have_are_refused(settings, message):
    with pytest.raises(ValueError, match=message):
        StepperConfig(**settings)


def test_a_resumed_run_must_keep_its_middle_rank():
    assert numeric_differences(StepperConfig(middle_rank=64), StepperConfig(middle_rank=32)) == ["middle_rank"]
    assert numeric_differences(StepperConfig(middle_rank=64), StepperConfig()) == ["middle_rank"]


def _modules(rank, *, size=59, hidden=64, seed=7):
    torch = pytest.importorskip("torch", reason="the stepper needs torch")
    from motion_matching.stepper.model import Stepper
    torch.manual_seed(seed)
    full = Stepper(size, hidden)
    torch.manual_seed(seed)
    factored = Stepper(size, hidden, middle_rank=rank)
    return torch, full, factored


def test_the_factors_start_as_the_scripts_middle_layer_truncated_to_their_rank():
    torch, full, factored = _modules(8)
    assert torch.equal(full.linear0.weight, factored.linear0.weight)
    assert torch.equal(full.linear2.weight, factored.linear2.weight)
    U, S, Vh = torch.linalg.svd(full.linear1.weight)
    best = U[:, :8] @ torch.diag(S[:8]) @ Vh[:8]
    middle = factored.layers()[1]
    assert middle.weight.shape == (64, 64)
    assert torch.allclose(middle.weight, best, atol=1e-5)
    assert torch.linalg.matrix_rank(middle.weight).item() == 8
    assert torch.equal(middle.bias, full.linear1.bias)
    assert not hasattr(factored, "linear1")


def test_the_runtime_file_of_a_factored_stepper_computes_what_it_computes(tmp_path):
    torch, _, factored = _modules(8)
    from motion_matching.stepper.model import stepper_from_network, stepper_from_state_dict, stepper_network
    from motion_matching.toolkit import formats
    with torch.no_grad():
        for parameter in factored.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.1)  # away from the start: any trained factors
    path = tmp_path / "stepper.bin"
    formats.save_network(str(path), stepper_network(factored))
    network = formats.load_network(str(path))
    assert network.sizes == [59, 64, 64, 59]
    x = torch.randn(16, 59)
    with torch.no_grad():
        expected = factored(x)
        assert torch.allclose(stepper_from_network(network)(x), expected, atol=1e-5)
        reloaded = stepper_from_state_dict(factored.state_dict())  # a checkpoint's model, as export reads it
        assert reloaded.middle_rank == 8 and torch.equal(reloaded(x), expected)


def test_a_factored_run_interrupted_and_rerun_is_the_straight_runs_bytes(tmp_path, monkeypatch):
    pytest.importorskip("torch", reason="training needs torch")
    from stepper_helpers import FRAMES

    from motion_matching.cli import train as train_cli
    from motion_matching.data import generate
    from motion_matching.toolkit import formats
    generate.generate_files(tmp_path, nframes=FRAMES)
    monkeypatch.chdir(tmp_path)
    line = ["train-stepper", "--hidden", "32", "--threads", "1", "--iterations", "30", "--middle-rank", "4"]

    def interrupt(report):
        if report.step == 10:
            raise KeyboardInterrupt
    with monkeypatch.context() as patch:
        patch.setattr(train_cli, "training_progress", lambda bar: interrupt)
        stopped = CliRunner().invoke(main, [*line, "--out", "run"])
    assert stopped.exit_code == 130, stopped.output
    finished = CliRunner().invoke(main, [*line, "--out", "run", "--quiet"])
    straight = CliRunner().invoke(main, [*line, "--out", "straight", "--quiet"])
    assert finished.exit_code == straight.exit_code == 0, finished.output + straight.output
    assert (tmp_path / "run" / "stepper.bin").read_bytes() == (tmp_path / "straight" / "stepper.bin").read_bytes()
    network = formats.load_network(str(tmp_path / "straight" / "stepper.bin"))
    assert network.sizes[1:3] == [32, 32]  # the runtime's full middle layer
    other = CliRunner().invoke(main, [*line[:-1], "8", "--out", "run", "--quiet"])
    assert other.exit_code != 0 and "middle_rank" in other.output.replace("-", "_"), other.output
