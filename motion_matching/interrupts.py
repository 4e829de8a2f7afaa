"""Ctrl-C at any moment of a command, its imports included: one line on stderr, exit status 130.

Free of imports beyond the standard library's ``sys`` and ``contextlib``, so that the console script and
the toolkit-named scripts can install it before they load click, numpy or torch.
"""
import _thread
import contextlib
import sys

INTERRUPTED_EXIT = 130  # the shell's code for a run stopped by Ctrl-C
# every file is written to a temporary name and renamed when complete, so a Ctrl-C leaves none half-written
INTERRUPTED_LINE = "interrupted; no file is half-written: run the same command again to continue"
__all__ = ["INTERRUPTED_EXIT", "INTERRUPTED_LINE", "exit_interrupted", "interrupts_exit"]


def exit_interrupted():
    """Print ``INTERRUPTED_LINE`` on stderr and exit with status 130."""
    try:
        sys.stderr.write(INTERRUPTED_LINE + "\n")
        sys.stderr.flush()
    finally:
        sys.exit(INTERRUPTED_EXIT)


def _interrupt_again(unraisable, *, default=sys.unraisablehook):
    """``sys.unraisablehook``: a Ctrl-C that landed in a finaliser (a weakref callback during garbage
    collection) cannot propagate and Python would print it as "Exception ignored"; deliver it to the main
    thread again instead, where it stops the command with the one line. Other unraisables go to ``default``."""
    if isinstance(unraisable.exc_value, KeyboardInterrupt):
        _thread.interrupt_main()
        return
    default(unraisable)


@contextlib.contextmanager
def interrupts_exit():
    """A ``with`` block in which a ``KeyboardInterrupt`` becomes ``exit_interrupted()``, also one that lands
    in a finaliser (``_interrupt_again``)."""
    sys.unraisablehook = _interrupt_again
    try:
        yield
    except KeyboardInterrupt:
        exit_interrupted()
