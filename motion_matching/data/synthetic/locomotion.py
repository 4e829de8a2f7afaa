"""A deterministic synthetic locomotion database in the toolkit's layout, for demos and tests.

The simulation bone follows smooth random paths made of behaviour segments (idle, walking around
1.5 m/s, running around 4 m/s, strafing and walking backwards, turns both ways, sharp turns); a
procedural gait (``synthetic.gait``) plants and lifts the feet with the speed. Clips become ranges,
mirrored copies are appended, and velocities and contacts are computed like the toolkit's
``generate_database.py`` (``database_build``). The same seed gives the same bytes with the same numpy on the
same CPU features; numpy's SIMD transcendentals differ by machine in the last bits, so elsewhere a few
near-zero rotation and velocity values differ (by 1.2e-10 at most; features.bin stays the same bytes).
"""
import numpy as np

from motion_matching.data import database_build
from motion_matching.data.synthetic import gait

FPS = 60
DEFAULT_FRAMES = 50_000
"""Default database size, mirrors included (the toolkit's real database has about 50,000 frames)."""
CLIP_FRAMES = 3_000
"""Typical clip (range) length before mirroring, in frames."""
MIN_FRAMES = 240
SMOOTHING_SECONDS = 0.3

# (name, copies per shuffled deck, speed range m/s, turn-rate spread rad/s, facing offsets from the path)
BEHAVIOURS = (
    ("idle", 1, (0.0, 0.0), 0.6, (0.0,)),
    ("walk", 3, (1.1, 1.9), 0.9, (0.0,)),
    ("run", 2, (3.3, 4.7), 0.45, (0.0,)),
    ("strafe", 1, (0.7, 1.4), 0.3, (np.pi / 2, -np.pi / 2, np.pi)),
    ("sharp_turn", 1, (0.8, 2.5), 2.8, (0.0,)),
)
"""Segments are dealt from shuffled decks, so every clip of a dozen seconds or more holds each behaviour."""


def generate_synthetic_database(*, seed=0, nframes=DEFAULT_FRAMES, fps=FPS):
    """Synthetic locomotion ``formats.Database`` of ``nframes`` frames (rounded down to even), mirrors included.

    Deterministic in ``seed``. Raises ``ValueError`` when ``nframes`` is below ``MIN_FRAMES``.
    """
    if nframes < MIN_FRAMES:
        raise ValueError(f"a synthetic database needs at least {MIN_FRAMES} frames, got {nframes}")
    rng = np.random.default_rng(seed)
    clips = [synthetic_clip(rng, length, fps=fps) for length in clip_lengths(rng, nframes // 2)]
    return database_build.build_database(clips, mirror=True, fps=fps)


def clip_lengths(rng, total):
    """Split ``total`` frames into clips of about ``CLIP_FRAMES`` (at least two clips); returns a list of ints."""
    count = max(2, int(round(total / CLIP_FRAMES)))
    weights = rng.uniform(0.7, 1.3, count)
    lengths = np.floor(weights / weights.sum() * total).astype(np.int64)
    lengths[-1] += total - lengths.sum()
    return lengths.tolist()


def synthetic_clip(rng, nframes, *, fps=FPS):
    """One clip: (local positions (F, 23, 3) metres, local rotations (F, 23, 4) w x y z), float64."""
    path = simulation_path(rng, nframes, fps=fps)
    return gait.animate(rng, path, fps=fps)


def simulation_path(rng, nframes, *, fps=FPS):
    """Smooth random simulation-bone motion; returns a dict of (F,) or (F, 3) float64 arrays.

    Keys: ``position`` (F, 3) metres on the ground, ``facing`` yaw radians (unwrapped), ``speed`` m/s,
    ``turn_rate`` rad/s of the path heading.
    """
    targets = _behaviour_targets(rng, nframes, fps)
    sigma = SMOOTHING_SECONDS * fps
    speed, turn_rate, offset = (smooth(values, sigma) for values in targets)
    heading = rng.uniform(-np.pi, np.pi) + np.cumsum(turn_rate) / fps
    velocity = speed[:, None] * np.stack([np.sin(heading), np.zeros(nframes), np.cos(heading)], axis=-1)
    start = np.array([rng.uniform(-5, 5), 0.0, rng.uniform(-5, 5)])
    position = start + np.cumsum(velocity, axis=0) / fps
    return {"position": position, "facing": heading + offset, "speed": speed, "turn_rate": turn_rate}


def _behaviour_targets(rng, nframes, fps):
    """Piecewise-constant target speed, turn rate and facing offset, one (F,) array each."""
    deck = [index for index, behaviour in enumerate(BEHAVIOURS) for _ in range(behaviour[1])]
    dealt = []
    targets = np.zeros((3, nframes))
    frame = 0
    while frame < nframes:
        if not dealt:
            dealt = list(rng.permutation(deck))
        _, _, (low, high), spread, offsets = BEHAVIOURS[dealt.pop()]
        length = int(rng.uniform(0.8, 3.5) * fps)
        if high == 0.0:  # idle long enough to settle after the smoothing
            length = int(rng.uniform(1.5, 4.0) * fps)
        elif spread > 2.0:
            length = int(rng.uniform(0.4, 0.8) * fps)
        turn = rng.choice([-1.0, 1.0]) * spread * (1.0 if spread > 2.0 else abs(rng.standard_normal()))
        targets[:, frame:frame + length] = [[rng.uniform(low, high)], [turn], [offsets[rng.integers(len(offsets))]]]
        frame += length
    return targets


def smooth(values, sigma):
    """Gaussian-smoothed copy of ``values`` (F,) with ``sigma`` in frames; the ends repeat edge values."""
    radius = int(3 * sigma)
    kernel = np.exp(-0.5 * (np.arange(-radius, radius + 1) / sigma) ** 2)
    padded = np.pad(values, radius, mode="edge")
    return np.convolve(padded, kernel / kernel.sum(), mode="valid")
