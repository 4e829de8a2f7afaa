"""The projector's training settings: the shared ones (``training.config.CommonConfig``) and its own.

The defaults are those of ``resources/train_projector.py`` in orangeduck/Motion-Matching, declared in
``toolkit/recipe.py``: losses 1 x L1(features) + 5 x L1(latent) + 0.3 x L1(distance difference),
27 -> 512 x 4 -> 27 + 32, and the shared ones (seed 1234, batch 32, AdamW lr 0.001 x0.99 every 1,000
iterations, 500,000 iterations, projector.bin every 1,000 iterations).
"""
import dataclasses

from motion_matching.toolkit import recipe as toolkit_recipe
from motion_matching.training.config import (  # noqa: F401
    COMMON_NUMERIC_FIELDS,
    PRECISIONS,
    SCHEDULES,
    STEP_KINDS,
    CommonConfig,
    field,
    numeric_differences,
)

NUMERIC_FIELDS = COMMON_NUMERIC_FIELDS + ("weight_features", "weight_latent", "weight_distance", "hidden",
                                          "hidden_layers")


@dataclasses.dataclass(frozen=True)
class TrainConfig(CommonConfig):
    """Hyperparameters of one projector training run (frozen; ``dataclasses.replace`` makes variants)."""

    NUMERIC_FIELDS = NUMERIC_FIELDS
    POSITIVE_FIELDS = CommonConfig.POSITIVE_FIELDS + ("hidden", "hidden_layers")
    FINITE_FIELDS = CommonConfig.FINITE_FIELDS + (("weight_features", None), ("weight_latent", None),
                                                  ("weight_distance", None))

    weight_features: float = field(toolkit_recipe.WEIGHT_FEATURES, "Weight of the L1 loss on the projected features")
    weight_latent: float = field(toolkit_recipe.WEIGHT_LATENT, "Weight of the L1 loss on the projected latent")
    weight_distance: float = field(toolkit_recipe.WEIGHT_DISTANCE,
                                   "Weight of the L1 loss on query-to-output vs query-to-neighbour distance")
    hidden: int = field(toolkit_recipe.HIDDEN, "Width of each hidden layer")
    hidden_layers: int = field(toolkit_recipe.HIDDEN_LAYERS, "Number of hidden layers")
