"""Ctrl-C at any moment of a command, its imports included: one line on stderr, exit status 130.

Free of imports beyond the standard library's ``_thread``, ``contextlib``, ``signal``, ``sys`` and
``time``, so that the console script and the toolkit-named scripts can install it before they load
click, numpy or torch.
"""
import _thread
import contextlib
import signal
import sys
import time

INTERRUPTED_EXIT = 130  # the shell's code for a run stopped by Ctrl-C
# every file is written to a temporary name and renamed when complete, so a Ctrl-C leaves none half-written
INTERRUPTED_LINE = "interrupted; no file is half-written: run the same command again to continue"
REDELIVERY_DELAY_S = 0.01  # long enough for the hook to return first, short beside any human's wait
__all__ = ["INTERRUPTED_EXIT", "INTERRUPTED_LINE", "exit_interrupted", "interrupts_exit"]


def exit_interrupted():
    """Print ``INTERRUPTED_LINE`` on stderr and exit with status 130."""
    try:
        sys.stderr.write(INTERRUPTED_LINE + "\n")
        sys.stderr.flush()
    finally:
        sys.exit(INTERRUPTED_EXIT)


def _interrupt_again(unraisable, *, default=sys.unraisablehook):
    """``sys.unraisablehook``: a Ctrl-C that landed in a finaliser (``__del__``, a weakref callback during
    garbage collection) cannot propagate and Python would print it as "Exception ignored"; deliver it to the
    main thread again instead, where it stops the command with the one line. Other unraisables go to ``default``.

    The new interrupt comes from a short-lived thread a moment later: one raised from here at once would land
    in this hook itself, whose exceptions Python also only prints."""
    if isinstance(unraisable.exc_value, KeyboardInterrupt):
        try:
            _thread.start_new_thread(_interrupt_main_later, (_thread.get_ident(),))
            return
        except RuntimeError:  # no new threads while the interpreter shuts down: nothing is left to stop
            pass
    default(unraisable)


def _interrupt_main_later(thread_id):
    """SIGINT to the thread ``thread_id`` (the main one: only it runs signal handlers) after a moment; a real
    signal, unlike ``_thread.interrupt_main``, also ends a blocking wait of that thread."""
    time.sleep(REDELIVERY_DELAY_S)
    if hasattr(signal, "pthread_kill"):
        signal.pthread_kill(thread_id, signal.SIGINT)
    else:
        _thread.interrupt_main()


@contextlib.contextmanager
def interrupts_exit():
    """A ``with`` block in which a ``KeyboardInterrupt`` becomes ``exit_interrupted()``, also one that lands
    in a finaliser (``_interrupt_again``)."""
    sys.unraisablehook = _interrupt_again
    try:
        yield
    except KeyboardInterrupt:
        exit_interrupted()
