"""Progress of long jobs (build-cache, train, demo) in one style, tqdm's, fed through ``bar(done, total)``.

On a terminal, a tqdm bar redraws one line; elsewhere (a log file, a pipe) a plain line is printed every
``PLAIN_EVERY`` seconds and at the end, so a redirected 16 M-query build writes a readable log, not
hundreds of carriage-return redraws.
"""
import sys
import time

from tqdm import tqdm

PLAIN_EVERY = 5.0  # seconds between lines when stderr is not a terminal


def format_duration(seconds):
    """``seconds`` as ``H:MM:SS`` (str)."""
    seconds = max(int(round(seconds)), 0)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def _is_terminal(stream):
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class ProgressBar:
    """Callable ``bar(done, total, note="", eta=None)`` reporting on ``stream`` (default stderr); ``note``
    (str) follows the rate (the training loss, for example). ``eta`` (seconds) replaces tqdm's estimate,
    which assumes every unit costs the same: a run whose iterations do not gives its own.

    The rate counts only the units done since the first call, so a resumed job shows its real speed.
    ``terminal`` (default: whether ``stream`` is one) picks the tqdm bar or the plain lines; a bar made
    with ``quiet`` shows nothing. Call ``close()`` to end the bar's line.
    """

    def __init__(self, *, unit="queries", label="", stream=None, terminal=None, clock=time.monotonic,
                 every=PLAIN_EVERY, quiet=False):
        self.unit, self.label, self.stream, self.clock, self.every = unit, label, stream or sys.stderr, clock, every
        self.quiet = quiet
        self.terminal = _is_terminal(self.stream) if terminal is None else terminal
        self.bar, self.first, self.last_line = None, None, None

    def line(self, done, total, note="", eta=None):
        """The plain line (str) for ``done`` of ``total`` units at the rate since the first call."""
        now = self.clock()
        if self.first is None:
            self.first = (done, now)
        return tqdm.format_meter(done, total, now - self.first[1], prefix=self.label, ascii=True,
                                 unit=f" {self.unit}", initial=self.first[0], postfix=note or None,
                                 bar_format=_bar_format(eta))

    def __call__(self, done, total, note="", eta=None):
        if self.quiet:
            return
        if self.terminal:
            self._draw(done, total, note, eta)
            return
        text = self.line(done, total, note, eta)
        now = self.clock()
        if self.last_line is None or now - self.last_line >= self.every or done >= total:
            self.stream.write(text + "\n")
            self.stream.flush()
            self.last_line = now

    def _draw(self, done, total, note, eta):
        if self.bar is None or self.bar.total != total:
            self.close()
            self.bar = tqdm(total=total, initial=done, unit=f" {self.unit}", desc=self.label or None,
                            file=self.stream, dynamic_ncols=True, leave=True)
        self.bar.bar_format = _bar_format(eta)
        if note:
            self.bar.set_postfix_str(note, refresh=False)
        self.bar.update(done - self.bar.n)

    def close(self):
        """End the bar's line, if one was drawn (plain lines need no ending)."""
        if self.bar is not None:
            self.bar.close()
            self.bar = None
        self.first = self.last_line = None


def _bar_format(eta):
    """tqdm's format with ``eta`` (seconds) in place of its own estimate; None (tqdm's own) when ``eta`` is."""
    if eta is None:
        return None
    left = "?" if eta == float("inf") else tqdm.format_interval(eta)
    return "{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}<" + left + ", {rate_fmt}{postfix}]"


def training_note(report):
    """The note (str) after a training bar's rate: rolling loss and learning rate of a ``Progress`` report."""
    return f"loss {report.rolling_loss:.4f}, lr {report.lr:.3g}"
