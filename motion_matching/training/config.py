"""The training settings every network shares, declared once, with the toolkit's values as defaults.

The defaults are those of the toolkit's training scripts (``toolkit/recipe.py``): seed 1234, batch 32,
AdamW (lr 0.001, amsgrad, weight decay 0.001), learning rate x0.99 every 1,000 iterations, 500,000
iterations, the network's ``.bin`` written every 1,000 iterations. Two settings only change how fast a
step is computed: ``step`` ("fast", the default: fused AdamW, losses read every few steps; "toolkit":
the script's single-tensor AdamW, loss read every step) and ``threads`` (None: the cores free at the
run's start for the fast step, ``step.run_threads``; one thread, the script's, for the toolkit step).
``schedule``, ``warmup``, ``precision`` and ``recipe`` are this project's: other learning-rate schedules
(``training/schedule.py``), bfloat16 matrix products (``training/step.py``) and the name of the preset
the settings came from. A network's config (``projector.config.TrainConfig``,
``decompressor.config.DecompressorConfig``) adds its own fields.
"""
import dataclasses
import math
import typing

from motion_matching.toolkit import recipe as toolkit_recipe

STEP_KINDS = ("fast", "toolkit")
SCHEDULES = ("toolkit", "cosine", "linear")  # see training/schedule.py
PRECISIONS = ("float32", "bfloat16", "auto")  # see training/step.py
# fields that change the numbers a run computes: a resumed run must keep them
COMMON_NUMERIC_FIELDS = ("batch_size", "lr", "weight_decay", "amsgrad", "lr_decay", "lr_decay_every", "seed",
                         "threads", "device", "step", "exact_toolkit", "schedule", "warmup", "precision")


def field(default, help_text, **metadata):
    """A dataclass field with its ``--help`` text (and ``choices``/``type`` for the command line)."""
    return dataclasses.field(default=default, metadata={"help": help_text, **metadata})


@dataclasses.dataclass(frozen=True)
class CommonConfig:
    """The settings of any network's training run (frozen; ``dataclasses.replace`` makes variants)."""

    NUMERIC_FIELDS: typing.ClassVar[tuple] = COMMON_NUMERIC_FIELDS
    POSITIVE_FIELDS: typing.ClassVar[tuple] = ("iterations", "batch_size", "lr_decay_every", "save_every",
                                               "checkpoint_every", "threads")
    FINITE_FIELDS: typing.ClassVar[tuple] = (("lr", 0.0), ("lr_decay", 0.0), ("weight_decay", None))
    PRECISION_FIELDS: typing.ClassVar[tuple] = ("precision",)  # "auto" in these is resolved by the device

    iterations: int = field(toolkit_recipe.ITERATIONS, "Training iterations (optimiser steps)")
    batch_size: int = field(toolkit_recipe.BATCH_SIZE, "Samples per iteration")
    lr: float = field(toolkit_recipe.LEARNING_RATE, "AdamW learning rate")
    weight_decay: float = field(toolkit_recipe.WEIGHT_DECAY, "AdamW weight decay")
    amsgrad: bool = field(toolkit_recipe.AMSGRAD, "Use AMSGrad in AdamW")
    lr_decay: float = field(toolkit_recipe.LR_DECAY, "Learning-rate factor applied every --lr-decay-every iterations")
    lr_decay_every: int = field(toolkit_recipe.LR_DECAY_EVERY,
                                "Iterations between learning-rate decays (the first follows iteration 0)")
    seed: int = field(toolkit_recipe.SEED, "Seed of the model initialisation and of the batch stream")
    save_every: int = field(toolkit_recipe.SAVE_EVERY,
                            "Iterations between writes of the network's .bin (the first follows iteration 0)")
    checkpoint_every: int = field(10_000, "Iterations between training checkpoints")
    threads: typing.Optional[int] = field(None, "Torch CPU threads [default: the cores free at start for the "
                                                "fast step, 1 (the toolkit's) for the toolkit step]", type=int)
    device: str = field("cpu", "Torch device: cpu, cuda or cuda:N")
    step: typing.Optional[str] = field(None, "How each step is computed: fast (fused AdamW, losses read every 10 "
                                             "steps) or toolkit (the script's AdamW and per-step loss read) "
                                             "[default: fast; toolkit with --exact-toolkit]", choices=STEP_KINDS)
    exact_toolkit: bool = field(False, "Reproduce the toolkit's training script byte for byte: its random "
                                       "stream and step (one thread); the .bin only when it writes it")
    schedule: str = field("toolkit", "Learning-rate schedule: toolkit (x --lr-decay every --lr-decay-every), or "
                          "cosine / linear decay to 0 at the last iteration", choices=SCHEDULES)
    warmup: int = field(0, "Iterations of linear learning-rate warm-up before the schedule")
    precision: str = field("float32", "Arithmetic of the forward and backward passes: float32, bfloat16 "
                           "(matrix products in bfloat16; weights, losses and AdamW stay float32), or auto "
                           "(bfloat16 where the device multiplies it faster than float32, else float32)",
                           choices=PRECISIONS)
    recipe: str = field("toolkit", "Preset the other settings start from (toolkit: the toolkit's constants; "
                        "fast: see docs/training.md); options given explicitly override it")

    def __post_init__(self):
        self._check_ranges()
        self._check_exact_toolkit()
        if self.step is None:  # frozen: the resolved default is set once, here
            object.__setattr__(self, "step", "toolkit" if self.exact_toolkit else "fast")
        if self.step not in STEP_KINDS:
            raise ValueError(f"step must be one of {', '.join(STEP_KINDS)}, not {self.step!r}")
        if self.exact_toolkit and (self.step != "toolkit" or self.threads not in (None, 1) or self.device != "cpu"):
            raise ValueError("--exact-toolkit runs the toolkit's step on one CPU thread, as the script does: leave "
                             "out --step, --threads and --device (or pass --step toolkit --threads 1 --device cpu)")

    def _check_ranges(self):
        for name in self.POSITIVE_FIELDS:
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, not {getattr(self, name)}")
        if self.warmup < 0:
            raise ValueError(f"warmup must be at least 0, not {self.warmup}")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {', '.join(SCHEDULES)}, not {self.schedule!r}")
        for name in self.PRECISION_FIELDS:
            value = getattr(self, name)
            if value not in PRECISIONS and not (value is None and name != "precision"):
                raise ValueError(f"{name} must be one of {', '.join(PRECISIONS)}, not {value!r}")
        if not 0 <= self.seed < 2 ** 63:
            raise ValueError(f"seed must be between 0 and 2**63 - 1, not {self.seed}")
        for name, low in self.FINITE_FIELDS:
            value = getattr(self, name)
            if not math.isfinite(value) or value < 0 or (low is not None and value <= low):
                bound = "above 0" if low is not None else "0 or more"
                raise ValueError(f"{name} must be a finite number {bound}, not {value}")

    def _check_exact_toolkit(self):
        if self.exact_toolkit and (self.schedule != "toolkit" or self.warmup):
            raise ValueError("--exact-toolkit trains on the toolkit's schedule: leave out --schedule and --warmup "
                             "(and --recipe fast)")
        if self.exact_toolkit and self.precision != "float32":
            raise ValueError("--exact-toolkit computes in float32, as the script does: leave out --precision "
                             "(and --recipe fast)")

    def iterations_shape_the_run(self):
        """Whether ``iterations`` changes what each iteration computes (a schedule that ends at the last one),
        so a resumed run must keep it."""
        return self.schedule != "toolkit"

    def to_dict(self):
        """The resolved settings as a plain dict (stored in every checkpoint)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values):
        """Rebuild a config from ``to_dict`` output, ignoring keys this version does not know."""
        known = {item.name for item in dataclasses.fields(cls)}
        return cls(**{key: value for key, value in values.items() if key in known})


def numeric_differences(old, new):
    """Names of the ``NUMERIC_FIELDS`` whose values differ between two configs; a list of str.

    Where both runs' iterations shape them (a schedule that decays to 0 at the last iteration, a stepper's
    growing windows), ``iterations`` counts too.
    """
    shaped = old.iterations_shape_the_run() and new.iterations_shape_the_run()
    names = type(new).NUMERIC_FIELDS + (("iterations",) if shaped else ())
    return [name for name in names if getattr(old, name) != getattr(new, name)]


def config_with_recipe(config_class, recipes, name, overrides):
    """The ``config_class`` of recipe ``name`` (a key of ``recipes``, dicts of field values) with ``overrides``."""
    if name not in recipes:
        raise ValueError(f"recipe must be one of {', '.join(recipes)}, not {name!r}")
    known = {item.name for item in dataclasses.fields(config_class)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise ValueError(f"unknown settings: {', '.join(unknown)}")
    return config_class(**{**recipes[name], **overrides, "recipe": name})
