"""Learning-rate schedules: the toolkit's step decay, and warm-up then decay to zero over the run.

``TrainConfig.schedule`` names one:

- ``toolkit``: the learning rate is multiplied by ``lr_decay`` after iteration 0 and after every
  ``lr_decay_every``-th iteration (``train_projector.py``'s ``ExponentialLR`` steps, quirk included);
- ``cosine``: half a cosine from ``lr`` down to 0 at the last iteration;
- ``linear``: a straight line from ``lr`` down to 0 at the last iteration.

Any of them may start with ``warmup`` iterations whose rate rises linearly from ``lr / warmup`` to
``lr``. Without warm-up, ``toolkit`` runs torch's ``ExponentialLR`` itself, so its rates are the
toolkit's to the last bit; every other schedule sets the rate of iteration ``i`` from ``learning_rate``.
"""
import math

import torch


def _decay_factor(config, step):
    """The schedule's factor (0..1] for iteration ``step``, warm-up left out."""
    if config.schedule == "toolkit":  # decays follow iteration 0, lr_decay_every, 2 * lr_decay_every, ...
        return config.lr_decay ** math.ceil(step / config.lr_decay_every)
    span = max(config.iterations - config.warmup, 1)
    progress = min(max(step - config.warmup, 0) / span, 1.0)
    if config.schedule == "cosine":
        return 0.5 * (1.0 + math.cos(math.pi * progress))
    return 1.0 - progress


def learning_rate(config, step):
    """The learning rate (float) of iteration ``step`` (0-based) of a run with ``config``."""
    warm = (step + 1) / config.warmup if step < config.warmup else 1.0
    return config.lr * warm * _decay_factor(config, step)


def schedule_note(config):
    """A line (str) saying the run's warm-up does not fit its ``iterations``, or None when it does: a run
    (a recipe shortened to fewer iterations, say) that stops inside its warm-up never reaches ``lr``,
    and one that stops right after it ends at its peak rate with nothing left of the decay. It names no
    option: train takes ``--iterations`` and ``--warmup``, retrain ``--NETWORK-iterations`` only."""
    if not config.warmup or config.iterations > config.warmup + 1:
        return None
    last = learning_rate(config, config.iterations - 1)
    fit = "more iterations, or a shorter warm-up, fit it"
    if config.iterations < config.warmup:
        return (f"{config.iterations:,} iterations stop inside the {config.warmup:,}-iteration warm-up: the "
                f"learning rate ends at {last:.3g}, below its peak {config.lr:g}, and never decays ({fit})")
    return (f"{config.iterations:,} iterations end at the peak learning rate {last:.3g}, right after the "
            f"{config.warmup:,}-iteration warm-up: no {config.schedule} decay is left ({fit})")


class LearningRateSchedule:
    """Sets the optimiser's learning rate for each iteration; ``after_step(i)`` follows iteration ``i``.

    ``state_dict``/``load_state_dict`` keep checkpoints in the layout of torch's schedulers.
    """

    def __init__(self, optimizer, config):
        self.optimizer, self.config = optimizer, config
        self.exponential = None
        if config.schedule == "toolkit" and config.warmup == 0:
            self.exponential = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=config.lr_decay)
        else:
            self._set(0)

    def _set(self, step):
        rate = learning_rate(self.config, step)
        for group in self.optimizer.param_groups:
            group["lr"] = rate * group.get("lr_scale", 1.0)

    def after_step(self, step):
        """Give the optimiser the rate of iteration ``step + 1``."""
        if self.exponential is None:
            self._set(step + 1)
        elif step % self.config.lr_decay_every == 0:  # the toolkit decays after iteration 0 too
            self.exponential.step()

    def state_dict(self):
        """A dict: torch's ``ExponentialLR`` state, or ``{"computed": True}`` (the rate follows the step)."""
        return self.exponential.state_dict() if self.exponential is not None else {"computed": True}

    def load_state_dict(self, state):
        """Restore ``state_dict`` output (a computed rate comes back with the optimiser's state)."""
        if self.exponential is not None:
            self.exponential.load_state_dict(state)
