"""The decompressor's training settings: the shared ones (``training.config.CommonConfig``) and its own,
with the toolkit's ``train_decompressor.py`` values as defaults (seed 1234, batch 32 windows of 2 frames,
AdamW lr 0.001 amsgrad weight decay 0.001, x0.99 every 1,000 iterations, 500,000 iterations,
decompressor.bin and latent.bin every 1,000 iterations, 512 hidden units, 32 latent values)."""
import dataclasses
import typing

from motion_matching.training.config import COMMON_NUMERIC_FIELDS, CommonConfig, config_with_recipe, field


@dataclasses.dataclass(frozen=True)
class DecompressorConfig(CommonConfig):
    """Hyperparameters of one decompressor training run (frozen; torch-free, for ``--help``)."""

    NUMERIC_FIELDS = COMMON_NUMERIC_FIELDS + ("hidden", "compressor_hidden")
    POSITIVE_FIELDS = CommonConfig.POSITIVE_FIELDS + ("hidden", "compressor_hidden")

    hidden: int = field(512, "Width of the compressor's and decompressor's hidden layers")
    # the compressor only makes latent.bin and never reaches the runtime, so a recipe may narrow it alone
    compressor_hidden: typing.Optional[int] = field(None, "Width of the compressor's hidden layers alone "
                                                    "[default: --hidden]", type=int)


RECIPES = {
    "toolkit": {},
    # chosen in session 8 from equal-sample runs (batch 64-512, lr 0.002-0.005) on 10,000 frames, then
    # checked at its whole length on 50,000 frames against the anchor's snapshots: not yet at the toolkit's
    # quality (docs/decompressor.md)
    "fast": {"batch_size": 128, "iterations": 10_000, "lr": 0.004, "schedule": "cosine", "warmup": 200,
             "precision": "auto"},
}


def recipe_config(name="toolkit", **overrides):
    """The ``DecompressorConfig`` of recipe ``name`` with ``overrides`` (field values) applied on top."""
    return config_with_recipe(DecompressorConfig, RECIPES, name, overrides)
