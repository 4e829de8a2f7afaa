"""The decompressor's training settings: the shared ones (``training.config.CommonConfig``) and its own,
with the toolkit's ``train_decompressor.py`` values as defaults (seed 1234, batch 32 windows of 2 frames,
AdamW lr 0.001 amsgrad weight decay 0.001, x0.99 every 1,000 iterations, 500,000 iterations,
decompressor.bin and latent.bin every 1,000 iterations, 512 hidden units, 32 latent values)."""
import dataclasses
import typing

from motion_matching.training.config import COMMON_NUMERIC_FIELDS, PRECISIONS, CommonConfig, config_with_recipe, field


@dataclasses.dataclass(frozen=True)
class DecompressorConfig(CommonConfig):
    """Hyperparameters of one decompressor training run (frozen; torch-free, for ``--help``)."""

    NUMERIC_FIELDS = COMMON_NUMERIC_FIELDS + ("hidden", "compressor_hidden", "latent_share", "latent_batch_size",
                                              "latent_lr_scale", "latent_precision")
    POSITIVE_FIELDS = CommonConfig.POSITIVE_FIELDS + ("hidden", "compressor_hidden", "latent_batch_size")
    FINITE_FIELDS = CommonConfig.FINITE_FIELDS + (("latent_lr_scale", 0.0), ("latent_share", None))
    PRECISION_FIELDS = CommonConfig.PRECISION_FIELDS + ("latent_precision",)

    hidden: int = field(512, "Width of the compressor's and decompressor's hidden layers")
    # the compressor only makes latent.bin and never reaches the runtime, so a recipe may narrow it alone
    compressor_hidden: typing.Optional[int] = field(None, "Width of the compressor's hidden layers alone "
                                                    "[default: --hidden]", type=int)
    # latent.bin is all the runtime keeps of the compressor, so the run may end by training each frame's latent
    latent_share: float = field(0.0, "Share of the iterations, at the run's end, that train each frame's latent "
                                "directly, with the decompressor, the compressor frozen (0: none, as the toolkit's "
                                "script)")
    latent_batch_size: typing.Optional[int] = field(None, "Windows per iteration in those last iterations "
                                                    "[default: --batch-size]", type=int)
    latent_lr_scale: float = field(10.0, "Learning rate of the frames' latents in those iterations, as a "
                                   "multiple of the schedule's")
    # bfloat16's 8-bit mantissa limits how close a fine-tuned pose gets: real motion capture is reconstructed
    # to hundredths of a centimetre
    latent_precision: typing.Optional[str] = field(None, "Arithmetic of those last iterations: float32, bfloat16 "
                                                   "or auto [default: --precision]", choices=PRECISIONS)

    def __post_init__(self):
        super().__post_init__()
        if not 0 <= self.latent_share < 1:
            raise ValueError(f"latent_share must be at least 0 and below 1, not {self.latent_share}")
        if self.exact_toolkit and self.latent_share:
            raise ValueError("--exact-toolkit trains the compressor to the end, as the script does: leave out "
                             "--latent-share (and --recipe fast)")

    def iterations_shape_the_run(self):
        """Whether ``iterations`` changes what each iteration computes: the schedule's, or the iteration where the
        frames' latents start training."""
        return super().iterations_shape_the_run() or bool(self.latent_share)

    @property
    def latent_start(self):
        """The first iteration (int) that trains the frames' latents (``iterations`` when none does): the
        compressor trains for at least one."""
        return max(self.iterations - round(self.iterations * self.latent_share), 1)


RECIPES = {
    "toolkit": {},
    # session 18: the cosine schedule of session 8's recipe (chosen from equal-sample runs on 10,000 frames),
    # four times as long, its last tenth training each frame's latent at batch 2,048: the first run found at
    # least as good as the anchor on every measure (docs/decompressor.md)
    # decompressor.bin and latent.bin every 5,000 iterations, not the script's 1,000: each write compresses the
    # whole database (1.6 s on 50,000 frames, one thread), 4-5% of the run
    # The latents' iterations in float32 (session 19): on real motion capture (LaFAN1) bfloat16 there left the
    # mean joint error at 0.030 cm, float32 took it to 0.004
    "fast": {"batch_size": 128, "iterations": 40_000, "lr": 0.004, "schedule": "cosine", "warmup": 200,
             "precision": "auto", "latent_share": 0.1, "latent_batch_size": 2048, "latent_precision": "float32",
             "save_every": 5_000},
    # the fast recipe before session 18, an eighth of its time: a first look, short of the toolkit's quality
    "preview": {"batch_size": 128, "iterations": 10_000, "lr": 0.004, "schedule": "cosine", "warmup": 200,
                "precision": "auto", "save_every": 5_000},
}


def recipe_config(name="toolkit", **overrides):
    """The ``DecompressorConfig`` of recipe ``name`` with ``overrides`` (field values) applied on top."""
    return config_with_recipe(DecompressorConfig, RECIPES, name, overrides)
