"""The ``mm-projector`` console script: one click group, commands grouped by job in sibling modules
(each registers its commands on ``main`` when imported; ``group.COMMAND_MODULES`` says which)."""
from motion_matching.cli.group import main

__all__ = ["main"]
