"""Ctrl-C at any moment of a command, its imports included: one line on stderr, exit status 130. SIGTERM (``kill``,
a build machine's timeout or cancel) stops a command the same way, with exit status 143.

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
TERMINATED_EXIT = 143  # 128 + SIGTERM: the shell's code for a run stopped by kill
# every file is written to a temporary name and renamed when complete, so a Ctrl-C leaves none half-written
INTERRUPTED_LINE = "interrupted; no file is half-written: run the same command again to continue"
REDELIVERY_DELAY_S = 0.01  # long enough for the hook to return first, short beside any human's wait
__all__ = ["INTERRUPTED_EXIT", "INTERRUPTED_LINE", "TERMINATED_EXIT", "exit_interrupted", "interrupted_exit",
           "interrupts_exit", "note_stop_signal"]
_stop_signals = []  # the signals that asked this process to stop (SIGINT is also Python's KeyboardInterrupt)


def note_stop_signal(signum):
    """Record that signal ``signum`` asked this process to stop, for ``interrupted_exit``."""
    _stop_signals.append(signum)


def interrupted_exit():
    """The exit status (int) of a command stopped by a signal: 143 after a SIGTERM, else 130 (Ctrl-C)."""
    return TERMINATED_EXIT if signal.SIGTERM in _stop_signals else INTERRUPTED_EXIT


def exit_interrupted():
    """Print ``INTERRUPTED_LINE`` on stderr and exit with ``interrupted_exit()``'s status."""
    try:
        sys.stderr.write(INTERRUPTED_LINE + "\n")
        sys.stderr.flush()
    finally:
        sys.exit(interrupted_exit())


def _terminate_as_interrupt(signum, frame):
    """SIGTERM's handler: stop as Ctrl-C stops (a ``KeyboardInterrupt`` where the main thread is), so what
    Ctrl-C writes on the way out (a checkpoint at a step boundary, a cache's rows) is written."""
    note_stop_signal(signum)
    raise KeyboardInterrupt


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
        # SIGTERM again after a SIGTERM: a job started in the background ignores SIGINT
        signal.pthread_kill(thread_id, signal.SIGTERM if signal.SIGTERM in _stop_signals else signal.SIGINT)
    else:
        _thread.interrupt_main()


@contextlib.contextmanager
def interrupts_exit():
    """A ``with`` block in which a ``KeyboardInterrupt`` becomes ``exit_interrupted()``, also one that lands
    in a finaliser (``_interrupt_again``), and SIGTERM is a ``KeyboardInterrupt`` (unless the process ignores
    it; the outermost block installs the handler and puts the previous one back)."""
    sys.unraisablehook = _interrupt_again
    replaced = _handle_terminate()
    try:
        yield
    except KeyboardInterrupt:
        exit_interrupted()
    finally:
        if replaced is not None:
            signal.signal(signal.SIGTERM, replaced)


def _handle_terminate():
    """Make SIGTERM ``_terminate_as_interrupt`` where it has its default action; returns the handler
    replaced, or None where none was (another handler, or not the main thread: the only one that may set one)."""
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return None
    try:
        return signal.signal(signal.SIGTERM, _terminate_as_interrupt)
    except ValueError:  # not the main thread
        return None
