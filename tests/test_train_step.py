"""The fast step and the toolkit step: same recipe, threads, losses read without a per-step sync, buffers."""
import copy

import numpy as np
import pytest
import torch

from motion_matching.errors import MismatchedFiles
from motion_matching.neighbours.cells.common import available_cores
from motion_matching.projector.batches import _BatchBuffers
from motion_matching.projector.config import TrainConfig
from motion_matching.projector.objective import LossTerms, make_projector, projector_losses
from motion_matching.projector.step import TrainStep
from motion_matching.projector.train import train_projector
from motion_matching.training import step as step_module
from motion_matching.training.checkpoint import load_checkpoint
from motion_matching.training.step import RollingLoss, resolved_threads

from conftest import random_features
from train_helpers import replace, small_config


def run(config, files, out_dir, **options):
    features_path, latent_path = files
    return train_projector(config, features_path=features_path, latent_path=latent_path, out_dir=out_dir,
                           held_out_queries=0, **options)


def test_threads_default_to_the_free_cores_for_the_fast_step_and_one_for_the_toolkit_step():
    assert 1 <= resolved_threads(TrainConfig()) <= available_cores()
    assert resolved_threads(TrainConfig(step="toolkit")) == 1
    assert resolved_threads(TrainConfig(threads=3, step="toolkit")) == 3
    assert resolved_threads(TrainConfig(threads=3)) == 3
    with pytest.raises(ValueError, match="step must be one of fast, toolkit, not 'quick'"):
        TrainConfig(step="quick")
    with pytest.raises(ValueError, match="threads must be at least 1, not 0"):
        TrainConfig(threads=0)


@pytest.mark.parametrize("kind", ["fast", "toolkit"])
def test_a_run_uses_its_resolved_thread_count_records_it_and_restores_the_previous_one(tmp_path, small_files, kind):
    seen, before = [], torch.get_num_threads()
    result = run(small_config(iterations=10, step=kind), small_files, tmp_path, progress=lambda report: seen.append(
        torch.get_num_threads()))
    recorded = load_checkpoint(result.checkpoint_path)["threads"]
    assert seen == [recorded] and torch.get_num_threads() == before
    assert recorded == 1 if kind == "toolkit" else 1 <= recorded <= available_cores()


def test_a_resumed_run_keeps_the_thread_count_it_started_with(tmp_path, small_files, monkeypatch):
    started_with = available_cores() + 1  # a count the policy never chooses by itself
    monkeypatch.setenv("OMP_NUM_THREADS", str(started_with))
    run(small_config(iterations=10), small_files, tmp_path)
    monkeypatch.delenv("OMP_NUM_THREADS")
    seen = []
    result = run(small_config(iterations=20), small_files, tmp_path, progress=lambda report: seen.append(
        torch.get_num_threads()))
    assert seen == [started_with] and load_checkpoint(result.checkpoint_path)["threads"] == started_with


def test_the_fast_step_uses_fused_adamw_and_the_toolkit_step_the_single_tensor_default(tmp_path, small_files):
    fast = load_checkpoint(run(small_config(iterations=3), small_files, tmp_path / "f").checkpoint_path)
    toolkit = load_checkpoint(run(small_config(iterations=3, step="toolkit"), small_files,
                                  tmp_path / "t").checkpoint_path)
    assert fast["optimizer"]["param_groups"][0]["fused"] is True
    assert toolkit["optimizer"]["param_groups"][0]["fused"] is None
    assert toolkit["optimizer"]["param_groups"][0]["foreach"] is None  # torch's CPU default: one tensor at a time
    assert fast["config"]["step"] == "fast" and toolkit["config"]["step"] == "toolkit"


def test_the_fast_step_trains_the_same_recipe_to_within_rounding(tmp_path, small_files):
    fast = load_checkpoint(run(small_config(iterations=30), small_files, tmp_path / "f").checkpoint_path)
    toolkit = load_checkpoint(run(small_config(iterations=30, step="toolkit"), small_files,
                                  tmp_path / "t").checkpoint_path)
    for name, value in toolkit["model"].items():
        assert torch.allclose(fast["model"][name], value, rtol=0, atol=1e-5), name


@pytest.mark.parametrize("precision, amsgrad", [("float32", True), ("bfloat16", True), ("float32", False)])
def test_the_fast_step_is_torchs_fused_adamw_step_bit_for_bit_through_a_schedule_and_a_reload(precision, amsgrad):
    X, Z = random_features(300), random_features(300, nfeatures=5, seed=1)
    config = small_config(precision=precision, amsgrad=amsgrad)
    fast = TrainStep(make_projector(X, Z, config), torch.from_numpy(X), torch.from_numpy(Z), config)
    reference_module = make_projector(X, Z, config)
    reference = step_module.make_optimizer(reference_module, config)
    forward = TrainStep(reference_module, torch.from_numpy(X), torch.from_numpy(Z), config)._forward
    rng = np.random.default_rng(5)
    for index in range(12):
        nearest = torch.from_numpy(rng.integers(0, 300, 16))
        queries = torch.from_numpy(X[nearest.numpy()] + rng.normal(0, 0.3, (16, X.shape[1])).astype(np.float32))
        if index == 6:  # as --resume does: a new step whose optimiser loads the state dict
            state = copy.deepcopy(fast.optimizer.state_dict())
            fast = TrainStep(fast.module, torch.from_numpy(X), torch.from_numpy(Z), config)
            fast.optimizer.load_state_dict(state)
        for optimizer in (fast.optimizer, reference):
            optimizer.param_groups[0]["lr"] = config.lr * 0.9 ** index  # as the schedule changes it
        fast.step(queries, nearest)
        reference.zero_grad(set_to_none=True)
        projector_losses(forward, queries, torch.from_numpy(X[nearest.numpy()]), torch.from_numpy(Z[nearest.numpy()]),
                         config).loss.backward()
        reference.step()
    for mine, theirs in zip(fast.module.parameters(), reference_module.parameters()):
        assert torch.equal(mine, theirs) and mine.grad is None
    for mine, theirs in zip(fast.optimizer.state_dict()["state"].values(), reference.state_dict()["state"].values()):
        assert mine.keys() == theirs.keys() and all(torch.equal(mine[key], theirs[key]) for key in mine)


def test_rolling_loss_read_in_batches_equals_the_per_step_recurrence():
    losses = np.random.default_rng(3).random(57).astype(np.float32)
    batched, per_step = RollingLoss(read_every=10), RollingLoss(read_every=1)
    expected = None
    for i, value in enumerate(losses):
        terms = LossTerms(*(torch.tensor(value * k) for k in (1, 0.25, 0.5, 0.25)))
        batched.add(i, terms)
        per_step.add(i, terms)
        loss = terms.loss.item()
        expected = loss if expected is None else expected * 0.99 + loss * 0.01
    folded = batched.read()
    assert [i for i, _ in folded] == list(range(50, 57))  # the first 50 were read 10 at a time
    assert batched.value == per_step.value == expected and batched.last == float(losses[-1])
    assert folded[-1][1].zval == pytest.approx(float(losses[-1]) * 0.5, rel=1e-6)


@pytest.mark.parametrize("kind", ["fast", "toolkit"])
def test_reported_rolling_loss_equals_the_one_computed_every_step(tmp_path, small_files, monkeypatch, kind):
    per_step, reads, original_step, original_read = [], [], TrainStep.step, RollingLoss.read

    def step_and_record(self, queries, nearest):
        terms = original_step(self, queries, nearest)
        per_step.append(terms.loss.item())
        return terms

    def read_and_count(self):
        reads.append(len(self._pending))
        return original_read(self)

    monkeypatch.setattr(TrainStep, "step", step_and_record)
    monkeypatch.setattr(RollingLoss, "read", read_and_count)
    reported = {}
    result = run(small_config(iterations=35, step=kind), small_files, tmp_path,
                 progress=lambda report: reported.setdefault(report.step, (report.rolling_loss, report.loss)))
    expected, rolling = {}, None
    for i, loss in enumerate(per_step):
        rolling = loss if rolling is None else rolling * 0.99 + loss * 0.01
        expected[i + 1] = (rolling, loss)
    assert reported == {step: expected[step] for step in (10, 20, 30, 35)}
    assert result.final_loss == rolling == load_checkpoint(result.checkpoint_path)["rolling_loss"]
    assert max(reads) == (10 if kind == "fast" else 1) and sum(reads) == 35


def test_fast_step_gathers_each_batch_fresh_into_its_reused_buffers():
    X, Z = random_features(300), random_features(300, nfeatures=5, seed=1)
    config = small_config()
    module = make_projector(X, Z, config)
    trainer = TrainStep(module, torch.from_numpy(X), torch.from_numpy(Z), config)
    rng = np.random.default_rng(0)
    buffers = None
    for _ in range(4):
        nearest = torch.from_numpy(rng.integers(0, 300, 16))
        queries = torch.from_numpy(X[nearest.numpy()] + 0.1)
        before = copy.deepcopy(module)
        with torch.no_grad():
            expected = projector_losses(before, queries, torch.from_numpy(X[nearest.numpy()]),
                                        torch.from_numpy(Z[nearest.numpy()]), config).loss
        assert torch.equal(trainer.step(queries, nearest).loss, expected)
        assert buffers is None or all(a is b for a, b in zip(buffers, trainer._gathered))
        buffers = trainer._gathered


def test_batch_buffers_copy_their_input_and_are_refilled_in_place():
    buffers = _BatchBuffers(4, 3, torch.device("cpu"))
    queries, nearest = np.arange(12, dtype=np.float32).reshape(4, 3), np.arange(4, dtype=np.int64)
    first = buffers.from_numpy(queries, nearest)
    queries[:] = -1  # the source array is reused by its owner: the batch must not change
    assert torch.equal(first.queries, torch.arange(12, dtype=torch.float32).reshape(4, 3))
    second = buffers.joined([(torch.ones(1, 3), torch.tensor([7])), (torch.zeros(3, 3), torch.tensor([1, 2, 3]))])
    assert second.queries is first.queries and torch.equal(second.nearest, torch.tensor([7, 1, 2, 3]))
    assert torch.equal(second.queries.sum(dim=1), torch.tensor([3.0, 0, 0, 0]))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device: the pinned-memory copy needs one")
def test_batch_buffers_on_cuda_copy_through_pinned_memory():
    buffers = _BatchBuffers(4, 3, torch.device("cuda"))
    batches = []
    for value in range(3):
        batch = buffers.from_numpy(np.full((4, 3), value, np.float32), np.full(4, value, np.int64))
        batches.append((batch.queries.cpu().clone(), batch.nearest.cpu().clone()))
    assert [int(q[0, 0]) for q, _ in batches] == [0, 1, 2] and [int(n[3]) for _, n in batches] == [0, 1, 2]


def test_resume_refuses_the_other_step(tmp_path, small_files):
    first = run(small_config(iterations=10), small_files, tmp_path)
    with pytest.raises(MismatchedFiles, match=r"was written with --step fast, this run has toolkit; pass the same"):
        run(replace(small_config(iterations=20), step="toolkit"), small_files, tmp_path,
            resume=first.checkpoint_path)


def test_bfloat16_precision_multiplies_in_bfloat16_and_keeps_weights_losses_and_adamw_in_float32():
    X, Z = random_features(300), random_features(300, nfeatures=5, seed=1)
    config = small_config(precision="bfloat16")
    module = make_projector(X, Z, config)
    trainer = TrainStep(module, torch.from_numpy(X), torch.from_numpy(Z), config)
    product_dtypes = []
    for layer in module.modules():
        if isinstance(layer, torch.nn.Linear):
            layer.register_forward_hook(lambda layer, inputs, output: product_dtypes.append(output.dtype))
    nearest = torch.arange(16)
    terms = trainer.step(torch.from_numpy(X[:16] + 0.1), nearest)
    assert product_dtypes and set(product_dtypes) == {torch.bfloat16}
    assert terms.loss.dtype == torch.float32 and torch.isfinite(terms.loss)
    assert {parameter.dtype for parameter in module.parameters()} == {torch.float32}
    assert {state["exp_avg"].dtype for state in trainer.optimizer.state.values()} == {torch.float32}


def test_bfloat16_trains_close_to_float32_but_not_the_same_numbers(tmp_path, small_files):
    single = run(small_config(iterations=30), small_files, tmp_path / "f32")
    half = run(small_config(iterations=30, precision="bfloat16"), small_files, tmp_path / "bf16")
    assert load_checkpoint(half.checkpoint_path)["config"]["precision"] == "bfloat16"
    assert half.final_loss != single.final_loss
    assert half.final_loss == pytest.approx(single.final_loss, rel=0.1)


def test_bad_precision_and_bfloat16_with_exact_toolkit_are_refused():
    with pytest.raises(ValueError, match="precision must be one of float32, bfloat16, auto, not 'float16'"):
        TrainConfig(precision="float16")
    with pytest.raises(ValueError, match="--exact-toolkit computes in float32, as the script does"):
        TrainConfig(exact_toolkit=True, precision="bfloat16")


def test_resume_refuses_the_other_precision(tmp_path, small_files):
    first = run(small_config(iterations=10), small_files, tmp_path)
    with pytest.raises(MismatchedFiles, match=r"was written with --precision float32, this run has bfloat16"):
        run(replace(small_config(iterations=20), precision="bfloat16"), small_files, tmp_path,
            resume=first.checkpoint_path)


@pytest.mark.parametrize("native, expected", [(True, "bfloat16"), (False, "float32")])
def test_auto_precision_is_resolved_once_from_the_device_and_recorded(tmp_path, small_files, monkeypatch, native,
                                                                      expected):
    monkeypatch.setattr(step_module, "native_bfloat16", lambda device: native)
    result = run(small_config(iterations=10, precision="auto"), small_files, tmp_path)
    assert result.precision == expected
    assert load_checkpoint(result.checkpoint_path)["config"]["precision"] == expected
    again = run(small_config(iterations=20, precision="auto"), small_files, tmp_path)  # continues the same run
    assert (again.resumed_from, again.steps) == (10, 20)


def test_native_bfloat16_reads_the_cpu_capability(monkeypatch):
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False, raising=False)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False, raising=False)
    assert step_module.native_bfloat16(torch.device("cpu")) is False
    # AVX-512 BF16 without AMX: torch's bfloat16 products measured 2x float32's on AMD, 0.62x on Intel
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: True, raising=False)
    monkeypatch.setattr(step_module.machine, "cpu_vendor", lambda: "GenuineIntel")
    assert step_module.native_bfloat16(torch.device("cpu")) is False
    monkeypatch.setattr(step_module.machine, "cpu_vendor", lambda: "AuthenticAMD")
    assert step_module.native_bfloat16(torch.device("cpu")) is True
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False, raising=False)
    monkeypatch.setattr(step_module.machine, "cpu_vendor", lambda: "GenuineIntel")
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: True, raising=False)
    assert step_module.native_bfloat16(torch.device("cpu")) is True
    assert step_module.native_bfloat16(torch.device("meta")) is False


def test_cpu_vendor_reads_the_kernels_cpu_list(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\n")
    assert step_module.machine.cpu_vendor(str(cpuinfo)) == "AuthenticAMD"
    cpuinfo.write_text("processor\t: 0\n")
    assert step_module.machine.cpu_vendor(str(cpuinfo)) is None
    assert step_module.machine.cpu_vendor(str(tmp_path / "missing")) is None
