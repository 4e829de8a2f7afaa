"""A progress bar with rate and time left, fed through the ``progress(done, total)`` callbacks of the library."""
import sys
import time


def format_duration(seconds):
    """``seconds`` as ``H:MM:SS`` (str)."""
    seconds = max(int(round(seconds)), 0)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


class ProgressBar:
    """Callable ``bar(done, total)`` that redraws one line on ``stream`` (default stderr).

    The rate counts only the units done since the first call, so a resumed job shows its real speed.
    Call ``close()`` to end the line.
    """

    def __init__(self, *, unit="queries", stream=None, width=24, clock=time.monotonic):
        self.unit, self.stream, self.width, self.clock = unit, stream or sys.stderr, width, clock
        self.first = None
        self.drawn = False

    def line(self, done, total):
        """The text of the bar (str) for ``done`` of ``total`` units at the current rate."""
        now = self.clock()
        if self.first is None:
            self.first = (done, now)
        elapsed = now - self.first[1]
        rate = (done - self.first[0]) / elapsed if elapsed > 0 else 0.0
        filled = int(self.width * done / total) if total else self.width
        left = f"ETA {format_duration((total - done) / rate)}" if rate > 0 else "ETA --:--:--"
        percent = 100.0 * done / total if total else 100.0
        return (f"[{'#' * filled}{'.' * (self.width - filled)}] {done:,}/{total:,} {self.unit} "
                f"{percent:5.1f}%  {rate:,.0f} {self.unit}/s  {left}")

    def __call__(self, done, total):
        self.stream.write("\r" + self.line(done, total))
        self.stream.flush()
        self.drawn = True

    def close(self):
        """End the bar's line, if one was drawn."""
        if self.drawn:
            self.stream.write("\n")
            self.stream.flush()
            self.drawn = False
