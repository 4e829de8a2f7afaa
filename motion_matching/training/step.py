"""The optimiser step every network's training shares, the toolkit's way or the fast way.

``config.step`` chooses:

- ``"toolkit"``: the script's step: single-tensor AdamW (torch's CPU default), one thread unless
  ``--threads`` says otherwise, the loss read on the host after every step.
- ``"fast"`` (the default): the same recipe computed cheaper: fused AdamW (one kernel for every
  parameter), the cores free at the run's start (``run_threads``), and the losses kept on the device
  and read every ``read_every`` steps (``RollingLoss``), so a GPU never waits for the host. Its
  gradients come from ``torch.autograd.grad`` and go straight to torch's functional fused AdamW on the
  optimiser's own state: the same arithmetic as ``optimizer.step()``, bit for bit, without zeroing
  ``.grad`` and the optimiser's per-step bookkeeping (3-4% of a step at batch 32 and 256 on 2 cores).
  Fused AdamW rounds differently from the single-tensor one (last bits), so the two steps give close
  but not bit-identical parameters; each is deterministic.

``config.precision`` ``"bfloat16"`` (a recipe setting, not a step kind: it changes the numbers) runs the
network's forward and backward under ``torch.autocast`` (``PrecisionForward``): the matrix products in
bfloat16, which CPUs with AMX and every recent GPU compute about twice as fast, while the weights, the
losses (on the output cast back to float32) and AdamW stay float32. ``"auto"`` is resolved once per run
(``with_resolved_precision``): bfloat16 where the device multiplies bfloat16 matrices faster than float32
ones (a CUDA GPU of compute capability 8 or more; a CPU with AMX tiles, or an AMD one with AVX-512 BF16),
else float32. AVX-512 BF16 alone is not enough: on an Intel CPU that has it without AMX, torch's
bfloat16 products ran at 0.62x float32's, where an AMD EPYC's ran at about 2x
(``benchmarks/bench_bfloat16.py``).
"""

import dataclasses

import torch
from torch.optim.adamw import adamw as fused_adamw_update

from motion_matching import machine
from motion_matching.threads import Sample, ThreadChoice, available_cores, logged
from motion_matching.toolkit import recipe

ROLLING_KEEP, ROLLING_NEW = 0.99, 0.01  # the toolkit's rolling loss (written out: 1 - 0.99 != 0.01)


def resolved_threads(config):
    """Torch threads of a run: ``config.threads``, else ``run_threads``'s choice (fast step) or 1 (toolkit step)."""
    return run_threads(config).threads


def run_threads(config, *, sample=None, recorded=None):
    """The ``ThreadChoice`` of a run: ``config.threads``; 1 for the toolkit step; a resumed fast run's
    ``recorded`` count (its results depend on it); else ``OMP_NUM_THREADS`` or the cores free at
    ``sample``'s start (a ``threads.Sample``, default one taken now), saying so when cores were busy."""
    if config.threads is not None or config.step != "fast":
        return ThreadChoice(config.threads or recipe.THREADS, "option", available_cores())
    choice = (sample or Sample()).choice()
    if recorded is not None and choice.source == "measured":
        choice = ThreadChoice(int(recorded), "checkpoint", choice.cores, choice.busy)
    return logged(choice, "training")


def native_bfloat16(device):
    """Whether ``device`` (a ``torch.device``) multiplies bfloat16 matrices faster than float32 ones: a CUDA
    GPU of compute capability 8 or more; a CPU with AMX tiles, or an AMD CPU with AVX-512 BF16 (measured
    about 2x; an Intel one with AVX-512 BF16 and no AMX measured 0.62x)."""
    if device.type == "cuda":
        return torch.cuda.get_device_capability(device)[0] >= 8
    if device.type == "cpu":
        if _cpu_flag("_is_amx_tile_supported"):
            return True
        return _cpu_flag("_is_avx512_bf16_supported") and machine.cpu_vendor() == "AuthenticAMD"
    return False


def _cpu_flag(name):
    """``torch.cpu.<name>()`` (a capability probe), False where this torch has none."""
    return bool(getattr(torch.cpu, name, lambda: False)())


def with_resolved_precision(config, device=None):
    """``config`` with each precision field (``config.PRECISION_FIELDS``) "auto" replaced by what a run on
    ``device`` (default: ``config.device``) computes: "bfloat16" where ``native_bfloat16``, else "float32"."""
    automatic = [name for name in config.PRECISION_FIELDS if getattr(config, name) == "auto"]
    if not automatic:
        return config
    native = native_bfloat16(torch.device(config.device) if device is None else device)
    return dataclasses.replace(config, **{name: "bfloat16" if native else "float32" for name in automatic})


def make_optimizer(parameters, config):
    """The run's AdamW over ``parameters`` (a module, a list of tensors, or a list of param-group dicts, whose
    ``lr_scale`` multiplies the schedule's rate for that group): fused for the fast step, torch's default
    (single-tensor on CPU) for the toolkit's."""
    extra = {"fused": True} if config.step == "fast" else {}
    parameters = list(parameters.parameters()) if isinstance(parameters, torch.nn.Module) else list(parameters)
    optimizer = torch.optim.AdamW(parameters, lr=config.lr, amsgrad=config.amsgrad,
                                  weight_decay=config.weight_decay, **extra)
    for group in optimizer.param_groups:
        group["lr"] = config.lr * group.get("lr_scale", 1.0)
    return optimizer


class PrecisionForward:
    """Calls a module so that its matrix products run in ``precision`` and its output comes back float32."""

    def __init__(self, precision, device_type):
        self.precision, self.device_type = precision, device_type

    def __call__(self, module, *inputs):
        """``module(*inputs)``, under ``torch.autocast`` unless the precision is float32."""
        if self.precision == "float32":
            return module(*inputs)
        with torch.autocast(self.device_type, dtype=getattr(torch, self.precision)):
            output = module(*inputs)
        return output.float()


class OptimiserStep:
    """Backward and AdamW for a loss: the toolkit's ``zero_grad``/``backward``/``step``, or the fast path
    (``torch.autograd.grad`` into torch's fused AdamW on the optimiser's own state)."""

    def __init__(self, parameters, config):
        self.optimizer = make_optimizer(parameters, config)
        self.fast = config.step == "fast"
        self.parameters = [parameter for group in self.optimizer.param_groups for parameter in group["params"]]

    def __call__(self, loss, parameters=None):
        """Update ``parameters`` (default: all the optimiser's; a run may train some of them for a while) from
        the gradients of ``loss`` (a scalar tensor)."""
        if self.fast:
            parameters = self.parameters if parameters is None else parameters
            self._fast_update(parameters, torch.autograd.grad(loss, parameters))
        else:
            self.optimizer.zero_grad(set_to_none=True)  # fresh gradients are adopted, not added into zeroed ones
            loss.backward()
            self.optimizer.step()

    def _fast_update(self, parameters, gradients):
        """The fused AdamW step of ``parameters`` with ``gradients`` (one each), on the optimiser's state."""
        optimizer = self.optimizer
        gradients = [gradient.contiguous() for gradient in gradients]  # the layout .grad would have had
        if any(parameter not in optimizer.state for parameter in parameters):
            # torch's own first step of a parameter makes its state, in the layout checkpoints keep
            for parameter, gradient in zip(parameters, gradients):
                parameter.grad = gradient
            optimizer.step()
            for parameter in parameters:
                parameter.grad = None
            return
        given = dict(zip(parameters, gradients))
        for group in optimizer.param_groups:
            members = [parameter for parameter in group["params"] if parameter in given]
            if not members:
                continue
            states = [optimizer.state[parameter] for parameter in members]
            beta1, beta2 = group["betas"]
            fused_adamw_update(members, [given[parameter] for parameter in members],
                               [state["exp_avg"] for state in states], [state["exp_avg_sq"] for state in states],
                               [state["max_exp_avg_sq"] for state in states] if group["amsgrad"] else [],
                               [state["step"] for state in states], fused=True, amsgrad=group["amsgrad"],
                               beta1=beta1, beta2=beta2, lr=group["lr"], weight_decay=group["weight_decay"],
                               eps=group["eps"], maximize=group["maximize"])


class RollingLoss:
    """The toolkit's rolling loss (``r = l`` first, then ``r * 0.99 + l * 0.01``), fed device tensors.

    ``add(step, terms)`` only keeps the step's loss terms (a NamedTuple of 0-d tensors whose first field
    is ``loss``; no host synchronisation); ``read()`` copies the pending losses to the host in one transfer
    and folds them in order, giving exactly the floats a per-step ``loss.item()`` would. ``value`` (float or
    None) and ``last`` are current after ``read()``; it returns ``[(step, terms of floats)]`` of the steps it
    folded (for loggers).
    """

    def __init__(self, value=None, *, read_every=1):
        self.value, self.last, self.read_every = value, float("nan"), read_every
        self._pending = []

    def add(self, step, terms):
        """Keep iteration ``step``'s loss terms (0-d tensors); reads once ``read_every`` are pending."""
        self._pending.append((step, terms))
        if len(self._pending) >= self.read_every:
            return self.read()
        return []

    def read(self):
        """Fold every pending loss into ``value``; returns the folded ``[(step, terms of floats)]``."""
        if not self._pending:
            return []
        values = torch.stack([torch.stack(tuple(terms)) for _, terms in self._pending]).tolist()
        folded = [(step, type(terms)(*row)) for (step, terms), row in zip(self._pending, values)]
        self._pending = []
        for _, terms in folded:
            self.value = terms.loss if self.value is None else self.value * ROLLING_KEEP + terms.loss * ROLLING_NEW
            self.last = terms.loss
        return folded
