"""The ``mm-projector`` console script: one click group, commands grouped by job in sibling modules."""
from . import cache, data, demo, export, files, train  # noqa: F401  (each module registers its commands)
from .group import main

__all__ = ["main"]
