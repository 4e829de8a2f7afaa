"""--compiled-rollout: the settings refused, what "auto" resolves to, and a compiled frame computing what the
eager one does (values and gradients), inside a run that records it and is resumed only with it."""
import dataclasses

import pytest

from motion_matching.stepper.config import RECIPES, StepperConfig, recipe_config
from motion_matching.training.config import numeric_differences


def test_no_recipe_compiles_unless_asked():
    # measured about 1.05x on 2 cores (benchmarks/bench_stepper_compiled.py): not worth a compiler by default
    assert [recipe_config(name).compiled_rollout for name in RECIPES] == ["off"] * len(RECIPES)


@pytest.mark.parametrize("settings, message", [
    ({"compiled_rollout": "yes"}, "compiled_rollout must be one of off, on, auto, not 'yes'"),
    ({"compiled_rollout": "on", "exact_toolkit": True}, "leave out --compiled-rollout"),
])
def test_settings_that_cannot_compile_are_refused(settings, message):
    with pytest.raises(ValueError, match=message):
        StepperConfig(**settings)


def test_a_resumed_run_must_keep_its_compiled_rollout():
    assert numeric_differences(StepperConfig(compiled_rollout="on"), StepperConfig()) == ["compiled_rollout"]


def _compiled_module():
    pytest.importorskip("torch", reason="compiling needs torch")
    from motion_matching.training import compiled
    return compiled


def test_auto_is_on_for_the_fast_step_where_a_compiler_is_ready_and_off_elsewhere(monkeypatch):
    compiled = _compiled_module()
    import torch
    cpu = torch.device("cpu")
    for ready in (True, False):
        monkeypatch.setattr(compiled, "compiler_ready", lambda device, ready=ready: ready)
        resolved = compiled.with_resolved_compile(StepperConfig(compiled_rollout="auto"), "compiled_rollout", cpu)
        assert resolved.compiled_rollout == ("on" if ready else "off")
    monkeypatch.setattr(compiled, "compiler_ready", lambda device: True)
    toolkit_step = StepperConfig(compiled_rollout="auto", step="toolkit")
    assert compiled.with_resolved_compile(toolkit_step, "compiled_rollout", cpu).compiled_rollout == "off"


def test_on_without_a_compiler_is_refused_in_one_line_naming_the_option(monkeypatch):
    compiled = _compiled_module()
    import torch

    from motion_matching.errors import MotionMatchingError
    monkeypatch.setattr(compiled, "compiler_ready", lambda device: False)
    with pytest.raises(MotionMatchingError) as caught:
        compiled.with_resolved_compile(StepperConfig(compiled_rollout="on"), "compiled_rollout", torch.device("cpu"))
    assert caught.value.message.startswith("--compiled-rollout: torch.compile finds no compiler for cpu")
    assert caught.value.message.endswith("pass --compiled-rollout off") and "\n" not in caught.value.message


def _ready_compiler():
    compiled = _compiled_module()
    import torch
    if not compiled.compiler_ready(torch.device("cpu")):
        pytest.skip("no C++ compiler torch.compile can use on this machine: nothing to compile with")
    return compiled, torch


def test_a_compiled_frame_computes_the_eager_frame_and_its_gradients():
    compiled, torch = _ready_compiler()
    from motion_matching.stepper.model import Stepper
    from motion_matching.stepper.objective import next_frame
    from motion_matching.training.step import PrecisionForward
    torch.manual_seed(3)
    module, forward = Stepper(59, hidden=64), PrecisionForward("float32", "cpu")
    advance = compiled.compiled(next_frame, "--compiled-rollout")
    X, Z = torch.randn(16, 27, requires_grad=True), torch.randn(16, 32, requires_grad=True)
    results = []
    for step in (next_frame, advance):
        Xnext, Znext = step(module, X, Z, forward)
        gradients = torch.autograd.grad((Xnext.square().sum() + Znext.abs().sum()),
                                        [X, Z, *module.parameters()])
        results.append((Xnext, Znext, *gradients))
    for eager, compiled_value in zip(*results):
        torch.testing.assert_close(compiled_value, eager, rtol=1e-5, atol=1e-6)
    assert results[0][0].abs().sum() > 0 and results[0][2].abs().sum() > 0  # not vacuous: values and gradients


def test_a_compiled_run_records_it_and_is_resumed_only_with_it(tmp_path):
    compiled, torch = _ready_compiler()
    from stepper_helpers import small_run

    from motion_matching.errors import MotionMatchingError
    from motion_matching.stepper.train import train_stepper
    files, result = small_run(tmp_path, iterations=6, compiled_rollout="auto")
    checkpoint = torch.load(result.checkpoint_path, weights_only=False)
    assert checkpoint["config"]["compiled_rollout"] == "on"  # "auto" is kept as what it resolved to
    eager = StepperConfig(**{**StepperConfig.from_dict(checkpoint["config"]).to_dict(), "iterations": 12,
                             "compiled_rollout": "off"})
    with pytest.raises(MotionMatchingError, match="--compiled-rollout on"):
        train_stepper(eager, database_path=files["database"], features_path=files["features"],
                      latent_path=files["latent"], out_dir=tmp_path / "run")
    continued = train_stepper(dataclasses.replace(eager, compiled_rollout="on"), database_path=files["database"],
                              features_path=files["features"], latent_path=files["latent"], out_dir=tmp_path / "run")
    assert continued.steps == 12 and continued.resumed_from == 6
