"""The stepper's training settings: the shared ones (``training.config.CommonConfig``) and its own, with the
toolkit's ``train_stepper.py`` values as defaults (seed 1234, batch 32 windows of 20 frames, AdamW lr 0.001
amsgrad weight decay 0.001, x0.99 every 1,000 iterations, 500,000 iterations, stepper.bin every 1,000
iterations, 512 hidden units)."""
import dataclasses

from motion_matching.training.config import COMMON_NUMERIC_FIELDS, CommonConfig, config_with_recipe, field

WINDOW = 20  # frames per training window, the toolkit's: one ground-truth frame then 19 stepped ones


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


# only the toolkit's recipe: a faster one is measured against it first (docs/stepper.md)
RECIPES = {"toolkit": {}}


def recipe_config(name="toolkit", **overrides):
    """The ``StepperConfig`` of recipe ``name`` with ``overrides`` (field values) applied on top."""
    return config_with_recipe(StepperConfig, RECIPES, name, overrides)
