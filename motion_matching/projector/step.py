"""One optimiser step of projector training, the toolkit's way or the fast way, and the loss it reports.

``config.step`` chooses:

- ``"toolkit"``: the script's step: single-tensor AdamW (torch's CPU default), one thread unless
  ``--threads`` says otherwise, the loss read on the host after every step.
- ``"fast"`` (the default): the same recipe computed cheaper: fused AdamW (one kernel for every
  parameter), the cores free at the run's start (``run_threads``), neighbours gathered into buffers made once, and
  the losses kept on the device and read every ``read_every`` steps (``RollingLoss``), so a GPU never
  waits for the host. Its gradients come from ``torch.autograd.grad`` and go straight to torch's
  functional fused AdamW on the optimiser's own state: the same arithmetic as ``optimizer.step()``, bit
  for bit, without zeroing ``.grad`` and the optimiser's per-step bookkeeping (3-4% of a step at batch
  32 and 256 on 2 cores).
  Fused AdamW rounds differently from the single-tensor one (last bits), so the two steps give close
  but not bit-identical parameters; each is deterministic, and online and offline runs agree bit for bit
  in either mode.

``config.precision`` ``"bfloat16"`` (a recipe setting, not a step kind: it changes the numbers) runs the
network's forward and backward under ``torch.autocast``: the matrix products in bfloat16, which CPUs
with AVX-512 BF16 or AMX and every recent GPU compute about twice as fast, while the weights, the
losses (on the output cast back to float32) and AdamW stay float32. ``"auto"`` is resolved once per run
(``with_resolved_precision``): bfloat16 where the device has bfloat16 arithmetic (a CUDA GPU of compute
capability 8 or more, a CPU with AVX-512 BF16 or AMX), else float32, where emulated bfloat16 would be
slower than float32.
"""

import dataclasses

import torch
from torch.optim.adamw import adamw as fused_adamw_update

from motion_matching.projector.objective import LossTerms, projector_losses
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
    """Whether ``device`` (a ``torch.device``) multiplies bfloat16 matrices in hardware."""
    if device.type == "cuda":
        return torch.cuda.get_device_capability(device)[0] >= 8
    if device.type == "cpu":
        return any(getattr(torch.cpu, name, lambda: False)() for name in ("_is_avx512_bf16_supported",
                                                                          "_is_amx_tile_supported"))
    return False


def with_resolved_precision(config, device=None):
    """``config`` with ``precision`` "auto" replaced by what a run on ``device`` (default: ``config.device``)
    computes: "bfloat16" where ``native_bfloat16``, else "float32"."""
    if config.precision != "auto":
        return config
    native = native_bfloat16(torch.device(config.device) if device is None else device)
    return dataclasses.replace(config, precision="bfloat16" if native else "float32")


def make_optimizer(module, config):
    """The run's AdamW: fused for the fast step, torch's default (single-tensor on CPU) for the toolkit's."""
    extra = {"fused": True} if config.step == "fast" else {}
    return torch.optim.AdamW(module.parameters(), lr=config.lr, amsgrad=config.amsgrad,
                             weight_decay=config.weight_decay, **extra)


class TrainStep:
    """Forward, losses, backward and AdamW on one batch; ``step(queries, nearest)`` returns its ``LossTerms``.

    ``features`` (F, n) and ``latent`` (F, L) are float32 tensors on the module's device; ``nearest``
    holds row indices into them. The fast step gathers the neighbours' rows into buffers made on
    the first call and reused (nothing keeps them past the step); the toolkit step allocates per step.
    """

    def __init__(self, module, features, latent, config):
        config = with_resolved_precision(config, features.device)
        self.module, self.config = module, config
        self.features, self.latent = features, latent
        self.optimizer = make_optimizer(module, config)
        self.fast = config.step == "fast"
        self._parameters = list(module.parameters())
        self._gathered = None
        self._device_type = features.device.type

    def _forward(self, queries):
        """The network's float32 output on ``queries``, its matrix products in ``config.precision``."""
        if self.config.precision == "float32":
            return self.module(queries)
        with torch.autocast(self._device_type, dtype=getattr(torch, self.config.precision)):
            output = self.module(queries)
        return output.float()

    def _gather(self, nearest):
        if not self.fast:
            return self.features.index_select(0, nearest), self.latent.index_select(0, nearest)
        if self._gathered is None or self._gathered[0].shape[0] != nearest.shape[0]:
            self._gathered = (self.features.new_empty((nearest.shape[0], self.features.shape[1])),
                              self.latent.new_empty((nearest.shape[0], self.latent.shape[1])))
        torch.index_select(self.features, 0, nearest, out=self._gathered[0])
        torch.index_select(self.latent, 0, nearest, out=self._gathered[1])
        return self._gathered

    def step(self, queries, nearest):
        """One optimiser step on ``queries`` (B, n) float32 and ``nearest`` (B,) int64; returns ``LossTerms``."""
        Xgnd, Zgnd = self._gather(nearest)
        terms = projector_losses(self._forward, queries, Xgnd, Zgnd, self.config)
        if self.fast:
            self._fast_update(torch.autograd.grad(terms.loss, self._parameters))
        else:
            self.optimizer.zero_grad(set_to_none=True)  # fresh gradients are adopted, not added into zeroed ones
            terms.loss.backward()
            self.optimizer.step()
        return LossTerms(*(term.detach() for term in terms))

    def _fast_update(self, gradients):
        """The fused AdamW step with ``gradients`` (one per parameter), on the optimiser's state."""
        optimizer, parameters = self.optimizer, self._parameters
        gradients = [gradient.contiguous() for gradient in gradients]  # the layout .grad would have had
        if not optimizer.state:  # torch's own first step makes the state, in the layout checkpoints keep
            for parameter, gradient in zip(parameters, gradients):
                parameter.grad = gradient
            optimizer.step()
            for parameter in parameters:
                parameter.grad = None
            return
        group = optimizer.param_groups[0]
        states = [optimizer.state[parameter] for parameter in parameters]
        beta1, beta2 = group["betas"]
        fused_adamw_update(parameters, gradients, [state["exp_avg"] for state in states],
                           [state["exp_avg_sq"] for state in states],
                           [state["max_exp_avg_sq"] for state in states] if group["amsgrad"] else [],
                           [state["step"] for state in states], fused=True, amsgrad=group["amsgrad"],
                           beta1=beta1, beta2=beta2, lr=group["lr"], weight_decay=group["weight_decay"],
                           eps=group["eps"], maximize=group["maximize"])


class RollingLoss:
    """The toolkit's rolling loss (``r = l`` first, then ``r * 0.99 + l * 0.01``), fed device tensors.

    ``add(step, terms)`` only keeps the step's ``LossTerms`` (no host synchronisation); ``read()``
    copies the pending losses to the host in one transfer and folds them in order, giving exactly the
    floats a per-step ``loss.item()`` would. ``value`` (float or None) and ``last`` are current after
    ``read()``; it returns ``[(step, LossTerms of floats)]`` of the steps it folded (for loggers).
    """

    def __init__(self, value=None, *, read_every=1):
        self.value, self.last, self.read_every = value, float("nan"), read_every
        self._pending = []

    def add(self, step, terms):
        """Keep iteration ``step``'s ``LossTerms`` (0-d tensors); reads once ``read_every`` are pending."""
        self._pending.append((step, terms))
        if len(self._pending) >= self.read_every:
            return self.read()
        return []

    def read(self):
        """Fold every pending loss into ``value``; returns the folded ``[(step, LossTerms of floats)]``."""
        if not self._pending:
            return []
        values = torch.stack([torch.stack(tuple(terms)) for _, terms in self._pending]).tolist()
        folded = [(step, LossTerms(*row)) for (step, _), row in zip(self._pending, values)]
        self._pending = []
        for _, terms in folded:
            self.value = terms.loss if self.value is None else self.value * ROLLING_KEEP + terms.loss * ROLLING_NEW
            self.last = terms.loss
        return folded
