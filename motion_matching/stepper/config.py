"""The stepper's training settings: the shared ones (``training.config.CommonConfig``) and its own, with the
toolkit's ``train_stepper.py`` values as defaults (seed 1234, batch 32 windows of 20 frames, AdamW lr 0.001
amsgrad weight decay 0.001, x0.99 every 1,000 iterations, 500,000 iterations, stepper.bin every 1,000
iterations, 512 hidden units)."""
import dataclasses

from motion_matching.training.config import COMMON_NUMERIC_FIELDS, CommonConfig, config_with_recipe, field

WINDOW = 20  # frames per training window, the toolkit's: one ground-truth frame then 19 stepped ones
EVALUATION_WINDOWS = 8192  # evaluate-stepper's: on 50,000 frames a window starts every ~6 frames, seconds to step
EVALUATION_SEED = 1234  # evaluate-stepper's: the offset of its evenly spaced windows


@dataclasses.dataclass(frozen=True)
class StepperConfig(CommonConfig):
    """Hyperparameters of one stepper training run (frozen; torch-free, for ``--help``)."""

    NUMERIC_FIELDS = COMMON_NUMERIC_FIELDS + ("hidden", "window")
    POSITIVE_FIELDS = CommonConfig.POSITIVE_FIELDS + ("hidden",)

    hidden: int = field(512, "Width of the stepper's two hidden layers")
    window: int = field(WINDOW, "Frames per training window: the first from the database, the rest stepped")

    def __post_init__(self):
        super().__post_init__()
        if self.window < 2:
            raise ValueError(f"window must be at least 2, not {self.window}")


RECIPES = {
    "toolkit": {},
    # the best of three candidates against toolkit at equal short budgets (benchmarks/bench_stepper.py,
    # docs/stepper.md); not yet against the toolkit recipe run to the end. 3,000 iterations: 4 min 55 s on one core
    # of the busy 2-core machine (10,000 frames). float32: the rollout compounds 19 steps' rounding, and
    # bfloat16 made a step only ~5% faster here
    "fast": {"batch_size": 128, "iterations": 3_000, "lr": 0.003, "schedule": "cosine", "warmup": 50},
}


def recipe_config(name="toolkit", **overrides):
    """The ``StepperConfig`` of recipe ``name`` with ``overrides`` (field values) applied on top."""
    return config_with_recipe(StepperConfig, RECIPES, name, overrides)
