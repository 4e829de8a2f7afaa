"""The commands and options that error messages suggest, built in one place.

Every word is quoted with ``shlex.quote``, so a suggested line pastes into a POSIX shell as it is, even
when a path holds spaces or quotes; ``shlex.split`` gives the words back.
"""
import os
import shlex

from motion_matching.cache.targets import suggested_out

DEFAULT_FEATURES = "features.bin"  # the toolkit's name, and build-cache's default --features


def command_line(*words):
    """``words`` (str, os.PathLike or int) as one shell line (str), each word quoted where it needs it."""
    return " ".join(shlex.quote(os.fspath(word) if isinstance(word, os.PathLike) else str(word)) for word in words)


def build_cache_command(out, *, features_path, nqueries, seed, toolkit=None, force=True):
    """The ``mm-projector build-cache ... --force`` line (str) that writes, replacing what is there, the cache
    of ``nqueries`` queries of seed ``seed`` for ``features_path`` at ``out`` (without ``force``: the line
    that builds it, or resumes its interrupted build); ``toolkit`` (dict: batch_size, save_every,
    database_path) asks for the toolkit script's stream (``--exact-toolkit``). Where ``out`` cannot be a
    cache (a features.bin given as the cache), the line writes a new cache beside it instead, without --force."""
    out, may_force = suggested_out(out)
    words = ["--queries", nqueries, "--seed", seed]
    if toolkit:
        words += ["--exact-toolkit", "--database", toolkit.get("database_path") or "database.bin",
                  "--batch-size", toolkit["batch_size"], "--save-every", toolkit["save_every"]]
    return command_line("mm-projector", "build-cache", "--features", features_path, "--out", out, *words,
                        *(["--force"] if force and may_force else []))
