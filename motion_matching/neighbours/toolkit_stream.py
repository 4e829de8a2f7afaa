"""The query stream of the toolkit's own ``train_projector.py``, draw for draw (``--exact-toolkit``).

The script seeds numpy's global generator once (``np.random.seed(seed)``) and then, every iteration
``i``, draws ``randint(0, nframes, size=[batch])``, ``uniform(size=[batch, 1])`` and
``normal(size=[batch, nfeatures])``, and makes ``Xhat = X[samples] + X_noise_std * nsigma * noise`` in
float32 with ``X_noise_std = X.std(axis=0) + 1.0`` computed in float32. After iteration ``i`` with
``i % save_every == 0`` its preview draws ``uniform`` and ``normal`` for ``preview_rows`` more rows
(``min(1000, length of database.bin's range 2)``), plots or not. ``ToolkitStream`` repeats exactly
those calls on a private ``np.random.RandomState``; unlike ``queries.py`` the stream cannot be sliced,
only continued from a saved generator state (``state()`` / ``restore()``).
"""
import numpy as np

from motion_matching.toolkit import recipe

RECIPE = ("toolkit train_projector.py: np.random.seed(seed); per iteration randint(0, F, [B]), "
          "uniform([B, 1]).astype(f32), normal([B, n]).astype(f32), Xhat = X[s] + (X.std(0) + 1) * u * n in f32; "
          "after iteration i % save_every == 0 uniform([P, 1]), normal([P, n])")
PREVIEW_CLIP, PREVIEW_MAX_ROWS = recipe.PREVIEW_CLIP, recipe.PREVIEW_MAX_ROWS
STATE_WORDS = 624        # MT19937 key words


class PreviewClipMissing(ValueError):
    """database.bin has fewer than three ranges: the toolkit's preview (range 2) cannot run."""


def toolkit_noise_scale(features):
    """``X.std(axis=0) + 1.0`` (n,) float32, in the script's float32 arithmetic."""
    X = np.ascontiguousarray(features, dtype=np.float32)
    return X.std(axis=0) + 1.0


def preview_rows(range_starts, range_stops):
    """Rows (int) the toolkit's preview draws noise for: ``min(1000, length of range 2)``."""
    if len(range_starts) <= PREVIEW_CLIP:
        raise PreviewClipMissing(f"has {len(range_starts)} ranges; the toolkit's preview needs range "
                                 f"{PREVIEW_CLIP} (at least {PREVIEW_CLIP + 1} ranges)")
    start = int(range_starts[PREVIEW_CLIP])
    return max(0, min(start + PREVIEW_MAX_ROWS, int(range_stops[PREVIEW_CLIP])) - start)


class ToolkitStream:
    """The script's batches, iteration by iteration, from ``np.random.RandomState(seed)``.

    ``features`` (F, n) float32; ``iteration`` is the index of the next batch. ``preview`` holds the
    noise draws (nsigma (P, 1), noise (P, n) float32) of the last save iteration, for the plots.
    """

    def __init__(self, features, *, seed, batch_size, save_every, preview_rows):
        self.X = np.ascontiguousarray(features, dtype=np.float32)
        self.X_noise_std = toolkit_noise_scale(self.X)
        self.nframes, self.nfeatures = self.X.shape
        self.batch_size, self.save_every, self.preview_rows = int(batch_size), int(save_every), int(preview_rows)
        self.rng = np.random.RandomState(seed)
        self.iteration, self.preview = 0, None

    def next_batch(self):
        """Queries ``Xhat`` (batch, n) float32 and their source frames ``samples`` (batch,) int64 of the
        next iteration; after a save iteration the preview's draws are taken too."""
        samples = self.rng.randint(0, self.nframes, size=[self.batch_size])
        nsigma = self.rng.uniform(size=[self.batch_size, 1]).astype(np.float32)
        noise = self.rng.normal(size=[self.batch_size, self.nfeatures]).astype(np.float32)
        Xhat = self.X[samples] + self.X_noise_std * nsigma * noise
        if self.iteration % self.save_every == 0:
            self.preview = (self.rng.uniform(size=[self.preview_rows, 1]).astype(np.float32),
                            self.rng.normal(size=[self.preview_rows, self.nfeatures]).astype(np.float32))
        self.iteration += 1
        return Xhat, samples.astype(np.int64)

    def batches(self, count):
        """The next ``count`` iterations' queries, stacked: ``(count * batch, n)`` float32 and sources int64."""
        drawn = [self.next_batch() for _ in range(count)]
        if not drawn:
            return np.zeros((0, self.nfeatures), np.float32), np.zeros(0, np.int64)
        return np.concatenate([part[0] for part in drawn]), np.concatenate([part[1] for part in drawn])

    def skip(self, count):
        """Draw and drop ``count`` iterations (the generator ends where it would after them)."""
        for _ in range(count):
            self.next_batch()

    def state(self):
        """The generator state before iteration ``iteration``: a dict of numpy values (see ``restore``)."""
        _, keys, pos, has_gauss, cached_gaussian = self.rng.get_state()
        return {"iteration": self.iteration, "keys": np.asarray(keys, np.uint32).copy(), "pos": int(pos),
                "has_gauss": int(has_gauss), "cached_gaussian": float(cached_gaussian)}

    def restore(self, state):
        """Continue from a ``state()`` dict: the next batch is that of iteration ``state["iteration"]``."""
        keys = np.asarray(state["keys"], np.uint32)
        if keys.shape != (STATE_WORDS,):
            raise ValueError(f"a generator state needs {STATE_WORDS} key words, not {keys.shape}")
        self.rng.set_state(("MT19937", keys, int(state["pos"]), int(state["has_gauss"]),
                            float(state["cached_gaussian"])))
        self.iteration = int(state["iteration"])
