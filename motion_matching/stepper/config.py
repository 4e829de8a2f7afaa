"""The stepper's training settings: the shared ones (``training.config.CommonConfig``) and its own, with the
toolkit's ``train_stepper.py`` values as defaults (seed 1234, batch 32 windows of 20 frames, AdamW lr 0.001
amsgrad weight decay 0.001, x0.99 every 1,000 iterations, 500,000 iterations, stepper.bin every 1,000
iterations, 512 hidden units)."""
import dataclasses
import math
import typing

from motion_matching.training.config import COMMON_NUMERIC_FIELDS, CommonConfig, config_with_recipe, field

COMPILE_SETTINGS = ("off", "on", "auto")  # training.compiled resolves "auto" (torch-free here, for --help)
WINDOW = 20  # frames per training window, the toolkit's: one ground-truth frame then 19 stepped ones
EVALUATION_WINDOWS = 8192  # evaluate-stepper's: on 50,000 frames a window starts every ~6 frames, seconds to step
EVALUATION_SEED = 1234  # evaluate-stepper's: the offset of its evenly spaced windows


@dataclasses.dataclass(frozen=True)
class StepperConfig(CommonConfig):
    """Hyperparameters of one stepper training run (frozen; torch-free, for ``--help``)."""

    NUMERIC_FIELDS = COMMON_NUMERIC_FIELDS + ("hidden", "window", "first_window", "window_ramp", "compiled_rollout",
                                              "clip_windows", "float32_tail")
    POSITIVE_FIELDS = CommonConfig.POSITIVE_FIELDS + ("hidden",)

    hidden: int = field(512, "Width of the stepper's two hidden layers")
    window: int = field(WINDOW, "Frames per training window: the first from the database, the rest stepped")
    first_window: typing.Optional[int] = field(
        None, "Frames per window at the first iteration: windows grow from it to --window over the first "
              "--window-ramp of the iterations (short rollouts cost less while the network learns its first "
              "steps) [default: --window throughout]", type=int)
    window_ramp: float = field(0.0, "Fraction of the iterations over which windows grow from --first-window to "
                                    "--window")
    clip_windows: bool = field(False, "Draw only windows inside one clip of database.bin, each clip's last one "
                                      "included (the toolkit's draw lets windows straddle two clips and never reaches "
                                      "the last frame)")

    float32_tail: float = field(0.0, "Fraction of the iterations, the run's last, whose products compute in float32 "
                                     "whatever --precision says: bfloat16 rounds each value to about 0.4%, the "
                                     "floor of a small database the stepper learns closer than that")

    compiled_rollout: str = field(
        "off", "Step the rollout's frames with torch.compile: on, off, or auto (on for the fast step where a "
               "compiler is found: a C++ one for the CPU, triton for CUDA); about 1.05x faster on 2 CPU cores, last "
               "bits rounded differently", choices=COMPILE_SETTINGS)

    def __post_init__(self):
        super().__post_init__()
        if self.compiled_rollout not in COMPILE_SETTINGS:
            raise ValueError(f"compiled_rollout must be one of {', '.join(COMPILE_SETTINGS)}, not "
                             f"{self.compiled_rollout!r}")
        if self.exact_toolkit and self.compiled_rollout == "on":
            raise ValueError("--exact-toolkit steps the rollout as the script does: leave out --compiled-rollout")
        if self.exact_toolkit and self.clip_windows:
            raise ValueError("--exact-toolkit draws the script's windows: leave out --clip-windows")
        if not math.isfinite(self.float32_tail) or not 0 <= self.float32_tail <= 1:
            raise ValueError(f"float32_tail must be between 0 and 1, not {self.float32_tail}")
        if self.exact_toolkit and self.float32_tail:
            raise ValueError("--exact-toolkit computes in float32 throughout: leave out --float32-tail")
        if self.window < 2:
            raise ValueError(f"window must be at least 2, not {self.window}")
        if not math.isfinite(self.window_ramp) or not 0 <= self.window_ramp <= 1:
            raise ValueError(f"window_ramp must be between 0 and 1, not {self.window_ramp}")
        if self.first_window is None:
            if self.window_ramp:
                raise ValueError("window_ramp needs first_window: the frames the windows grow from")
            return
        if not 2 <= self.first_window <= self.window:
            raise ValueError(f"first_window must be between 2 and window ({self.window}), not {self.first_window}")
        if not self.window_ramp:
            raise ValueError("first_window needs window_ramp above 0: the fraction of the iterations the windows "
                             "grow over")
        if self.exact_toolkit:
            raise ValueError("--exact-toolkit trains on the script's windows of --window frames throughout: leave "
                             "out --first-window and --window-ramp")

    def iterations_shape_the_run(self):
        """As ``CommonConfig``'s; growing windows grow over a fraction of the iterations, so they count too."""
        return super().iterations_shape_the_run() or self.first_window is not None or bool(self.float32_tail)

    def precision_at(self, step):
        """The products' arithmetic (str) of iteration ``step``: ``precision``, or float32 in the last
        ``float32_tail`` of the iterations."""
        if self.float32_tail and step >= self.iterations * (1.0 - self.float32_tail):
            return "float32"
        return self.precision

    def window_at(self, step):
        """Frames (int) of the windows iteration ``step`` trains on: ``window``, or during the ramp the
        whole number nearest its linear growth from ``first_window``."""
        progress = step / self.iterations
        if self.first_window is None or progress >= self.window_ramp:
            return self.window
        return int(round(self.first_window + (self.window - self.first_window) * progress / self.window_ramp))


# ahead of the toolkit recipe run to the end on every measure, in three seeds (docs/stepper.md, "Growing
# windows" and "Windows growing over 85%"): 16.4 M windows (the anchor's 16.0 M), 85% of them shorter than 20
# frames; 24-25 minutes on 2 cores with bfloat16, 0.93-0.945 of its time when they grew over 75% (sessions
# 16-35), 0.12 of the toolkit script's time on an AMD host (its step is matrix products, the script's is
# Python: the ratio is the host's). Sessions 16-18 called it "quality"
FAST = {"batch_size": 512, "iterations": 32_000, "lr": 0.004, "schedule": "cosine", "warmup": 200,
        "precision": "auto", "first_window": 2, "window_ramp": 0.85}
RECIPES = {
    "toolkit": {},
    "fast": FAST,
    # for a database the stepper learns by heart (LaFAN1's 642 frames): there bfloat16's rounding is the floor
    # and fast stops at the anchor's 250,000-iteration quality; this one, in float32 at a quarter of fast's batch,
    # is ahead of the toolkit recipe's end on every measure in 818 s on one thread, 0.077 of its 10,643 s
    # (docs/stepper.md, "A database learned by heart"). Behind fast on the 50,000 frames: not a default. Its
    # windows grow over 75% of the run, as fast's did when the two were measured side by side
    "small": {**FAST, "batch_size": 128, "iterations": 16_000, "precision": "float32", "clip_windows": True,
              "window_ramp": 0.75},
    # the fast recipe before session 19, a sixth of its time: the best of three candidates against toolkit at
    # equal short budgets (benchmarks/bench_stepper.py), a first look, short of the toolkit's quality
    "preview": {"batch_size": 128, "iterations": 3_000, "lr": 0.003, "schedule": "cosine", "warmup": 50},
}


# below this many frames in database.bin, retrain's --recipe fast trains the stepper's small recipe: small is
# ahead of fast on every measure at 642 frames (LaFAN1) and 1,500 (synthetic), fast ahead on 5 of 6 at 5,000
# (docs/stepper.md, "A database learned by heart"); the switch lies between, here at about their middle
SMALL_DATABASE_FRAMES = 2_500


def recipe_for_database(name, nframes):
    """The recipe name (str) to train for recipe ``name`` on a database of ``nframes`` frames: ``small`` for
    ``fast`` below ``SMALL_DATABASE_FRAMES``, else ``name``."""
    return "small" if name == "fast" and nframes < SMALL_DATABASE_FRAMES else name


def recipe_note(config, database_path, nframes):
    """The line (str, or None) a run of ``config`` on a database of ``nframes`` frames says first when another
    recipe is ahead of its own there: ``small`` for ``fast`` below ``SMALL_DATABASE_FRAMES``. It names no option
    and no folder: the run it starts is the one asked for."""
    better = recipe_for_database(config.recipe, nframes)
    if better == config.recipe:
        return None
    return (f"{database_path}: {nframes:,} frames, fewer than {SMALL_DATABASE_FRAMES:,}: the stepper's {better!r} "
            f"recipe is ahead of {config.recipe!r} on every measure there, in a quarter to a half of its time "
            "(docs/stepper.md, \"Where small overtakes fast\")")


def recipe_config(name="toolkit", **overrides):
    """The ``StepperConfig`` of recipe ``name`` with ``overrides`` (field values) applied on top."""
    return config_with_recipe(StepperConfig, RECIPES, name, overrides)
