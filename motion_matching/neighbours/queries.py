"""The deterministic stream of noisy training queries shared by the online and the offline paths.

Query ``i`` is ``X[s_i] + (X.std(0) + 1) * u_i * n_i`` with ``s_i`` a uniform frame, ``u_i ~ U(0, 1)`` and
``n_i ~ N(0, I)``. The stream is cut into fixed blocks of ``QUERY_BLOCK`` queries, each drawn from its own
generator seeded by ``(seed, block index)``, so query ``i`` depends only on the seed and ``i``: any slice
can be regenerated, whatever chunk or batch size a caller uses.
"""
import numpy as np

QUERY_BLOCK = 4096
HELD_OUT_SEED = 271828
"""The seed of the stream held-out losses and ``evaluate`` draw; training (seed 1234 by default) never uses it."""
RECIPE = "X[s] + (X.std(0) + 1) * u * n; s ~ U{0..F-1}, u ~ U(0,1) per query, n ~ N(0,I); float32"


def noise_scale(features):
    """Per-column noise scale ``X.std(0) + 1`` (n,) float32, computed in float64."""
    return (np.asarray(features, dtype=np.float64).std(axis=0) + 1.0).astype(np.float32)


def _block(features, scale, seed, block):
    rng = np.random.default_rng([seed, block])
    sources = rng.integers(0, features.shape[0], size=QUERY_BLOCK)
    levels = rng.random(QUERY_BLOCK, dtype=np.float32)
    noise = rng.standard_normal((QUERY_BLOCK, features.shape[1]), dtype=np.float32)
    queries = features[sources] + scale * (levels[:, None] * noise)
    return queries, sources, levels


def generate_queries(features, *, seed, start, stop, scale=None, with_levels=False):
    """Queries ``start .. stop-1`` of the stream for ``features`` (F, n) float32.

    Returns ``(queries (stop-start, n) float32, sources (stop-start,) int64)``, plus the noise levels
    ``u`` (stop-start,) float32 when ``with_levels``. Pass ``scale`` to skip recomputing ``noise_scale``.
    """
    features = np.ascontiguousarray(features, dtype=np.float32)
    scale = noise_scale(features) if scale is None else scale
    first, last = start // QUERY_BLOCK, (stop - 1) // QUERY_BLOCK
    parts = [_block(features, scale, seed, block) for block in range(first, last + 1)] if stop > start else []
    if not parts:
        empty = (np.zeros((0, features.shape[1]), np.float32), np.zeros(0, np.int64), np.zeros(0, np.float32))
        return empty if with_levels else empty[:2]
    cut = slice(start - first * QUERY_BLOCK, stop - first * QUERY_BLOCK)
    queries, sources, levels = (np.concatenate(column)[cut] for column in zip(*parts))
    return (queries, sources, levels) if with_levels else (queries, sources)
