"""Which query stream a cache holds: the project's sliceable stream, or the toolkit script's own.

``default`` caches hold ``neighbours.queries`` (row i depends only on the seed and i). ``toolkit``
caches (``build-cache --exact-toolkit``) hold ``neighbours.toolkit_stream``: the rows of the toolkit's
``train_projector.py`` for one batch size, save interval and preview length, in iteration order, plus
the generator state at the start of every chunk (group ``toolkit_stream``) so a build can resume and
a chunk can be regenerated.
"""
import numpy as np

from motion_matching.errors import InvalidFile, MotionMatchingError
from motion_matching.neighbours import queries as query_stream
from motion_matching.neighbours import toolkit_stream
from motion_matching.toolkit import formats

DEFAULT, TOOLKIT = "default", "toolkit"
KINDS = (DEFAULT, TOOLKIT)
TOOLKIT_INT_ATTRIBUTES = ("batch_size", "save_every", "preview_rows")
STATE_GROUP = "toolkit_stream"
STATE_DATASETS = {"keys": np.uint32, "pos": np.int64, "has_gauss": np.int64, "cached_gaussian": np.float64}


def stream_attributes(stream, features, *, batch_size=None, save_every=None, preview_rows=None):
    """The attributes (dict) that describe ``stream`` for ``features`` (F, n) float32."""
    if stream == DEFAULT:
        return {"stream": DEFAULT, "query_recipe": query_stream.RECIPE, "query_block": query_stream.QUERY_BLOCK,
                "noise_scale": query_stream.noise_scale(features)}
    return {"stream": TOOLKIT, "query_recipe": toolkit_stream.RECIPE, "query_block": int(batch_size),
            "noise_scale": toolkit_stream.toolkit_noise_scale(features), "batch_size": int(batch_size),
            "save_every": int(save_every), "preview_rows": int(preview_rows)}


def recipe_problem(attributes):
    """Why this package cannot regenerate the cache's stream (str), or None."""
    if attributes["stream"] == DEFAULT:
        known = (query_stream.RECIPE, query_stream.QUERY_BLOCK)
    else:
        known = (toolkit_stream.RECIPE, attributes["batch_size"])
    if (attributes["query_recipe"], attributes["query_block"]) != known:
        return "stale: built with another query recipe than this package's"
    return None


def noise_scale(attributes, features):
    """The noise scale (n,) float32 this package computes for the cache's stream and ``features``."""
    if attributes["stream"] == DEFAULT:
        return query_stream.noise_scale(features)
    return toolkit_stream.toolkit_noise_scale(features)


def toolkit_settings(attributes):
    """``{"batch_size", "save_every", "preview_rows"}`` of a toolkit cache, or None for a default one."""
    if attributes.get("stream", DEFAULT) != TOOLKIT:
        return None
    return {name: attributes[name] for name in TOOLKIT_INT_ATTRIBUTES}


def stream_problem(attributes, wanted):
    """Why an otherwise fresh cache holds another stream than ``wanted`` (str), or None."""
    have, want = toolkit_settings(attributes), toolkit_settings(wanted)
    if have == want:
        return None
    def describe(settings):
        return "the default query stream" if settings is None else (
            "the toolkit stream of batch {batch_size}, save interval {save_every}, preview {preview_rows} rows"
            .format(**settings))
    return f"holds {describe(have)}, not {describe(want)}"


def build_settings(database_path, *, nqueries, batch_size, save_every):
    """The toolkit stream's settings (dict) for ``database_path``'s preview clip; raises ``InvalidFile`` for a
    database without range 2 and ``MotionMatchingError`` unless ``nqueries`` is a whole number of batches."""
    if batch_size < 1 or save_every < 1:
        raise ValueError("batch_size and save_every must be positive")
    if nqueries % batch_size:
        raise MotionMatchingError("--queries", f"--exact-toolkit caches hold whole batches: {nqueries} is not a "
                                               f"multiple of --batch-size {batch_size} (try "
                                               f"{nqueries // batch_size * batch_size or batch_size})")
    database = formats.load_database(database_path)
    try:
        preview = toolkit_stream.preview_rows(database.range_starts, database.range_stops)
    except toolkit_stream.PreviewClipMissing as error:
        raise InvalidFile(database_path, str(error)) from None
    return {"batch_size": batch_size, "save_every": save_every, "preview_rows": preview}
