"""--float32-tail: the last fraction of a stepper's iterations compute in float32 whatever --precision says
(bfloat16's rounding is the error floor of a small database learned closely)."""
import pytest

from motion_matching.stepper.config import StepperConfig, recipe_config
from motion_matching.training.config import numeric_differences


def test_the_tail_is_the_last_fraction_of_the_iterations_and_off_by_default():
    config = StepperConfig(iterations=10, precision="bfloat16", float32_tail=0.3)
    assert [config.precision_at(step) for step in range(10)] == ["bfloat16"] * 7 + ["float32"] * 3
    assert {StepperConfig(precision="bfloat16").precision_at(step) for step in (0, 499_999)} == {"bfloat16"}
    assert StepperConfig(iterations=4, precision="bfloat16", float32_tail=1.0).precision_at(0) == "float32"
    assert not any(recipe_config(name).float32_tail for name in ("toolkit", "preview"))


def test_bad_tails_and_exact_toolkit_are_refused_and_a_resume_keeps_the_tail_and_the_iterations():
    for bad in (-0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match="float32_tail must be between 0 and 1"):
            StepperConfig(float32_tail=bad)
    with pytest.raises(ValueError, match="--exact-toolkit computes in float32 throughout: leave out --float32-tail"):
        StepperConfig(exact_toolkit=True, float32_tail=0.1)
    tailed = StepperConfig(float32_tail=0.1)
    assert numeric_differences(StepperConfig(), tailed) == ["float32_tail"]
    assert numeric_differences(tailed, StepperConfig(float32_tail=0.1, iterations=1000)) == ["iterations"]


def test_a_bfloat16_run_whose_tail_is_every_iteration_is_byte_identical_to_a_float32_run(tmp_path):
    pytest.importorskip("torch", reason="training needs torch")
    from stepper_helpers import small_run

    _, float32 = small_run(tmp_path / "float32", iterations=4, precision="float32")
    _, tailed = small_run(tmp_path / "tailed", iterations=4, precision="bfloat16", float32_tail=1.0)
    _, half = small_run(tmp_path / "half", iterations=4, precision="bfloat16", float32_tail=0.5)
    _, bfloat16 = small_run(tmp_path / "bfloat16", iterations=4, precision="bfloat16")
    network = {name: open(result.network_path, "rb").read()
               for name, result in (("float32", float32), ("tailed", tailed), ("half", half),
                                    ("bfloat16", bfloat16))}
    assert network["tailed"] == network["float32"]
    assert network["half"] not in (network["float32"], network["bfloat16"])
