"""The ``mm-projector`` console script: one click group, commands grouped by job in sibling modules
(each registers its commands on ``main`` when imported; ``group.COMMAND_MODULES`` says which)."""
from motion_matching.interrupts import interrupts_exit

with interrupts_exit():  # the console script imports this first: Ctrl-C while click loads is one line too
    from motion_matching.cli.group import main

__all__ = ["main"]
