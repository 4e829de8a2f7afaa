"""One error hierarchy for every problem a user can fix: each names the file and the problem."""


class MotionMatchingError(Exception):
    """Base of every user-facing error, as data: ``path`` (str), ``problem`` (str, what is wrong), and
    optionally ``command`` (str, a shell line that fixes it) and ``option`` (str, options that avoid it).

    ``str(error)`` is composed from them here only: ``"<path>: <problem>"``, then ``"; run: <command>"``,
    ``"; pass <option>"`` or ``"; pass <option> or run: <command>"``.
    """

    def __init__(self, path, problem, *, command=None, option=None):
        self.path, self.problem, self.command, self.option = str(path), problem, command, option
        super().__init__(self.message)

    @property
    def message(self):
        """The one line (str) a user sees."""
        remedy = " or ".join(part for part in (self.option and f"pass {self.option}",
                                                self.command and f"run: {self.command}") if part)
        return f"{self.path}: {self.problem}" + (f"; {remedy}" if remedy else "")

    def __reduce__(self):  # pickle by fields (the default would call __init__ with the message alone)
        return _rebuild, (type(self), self.path, self.problem, self.command, self.option)


def _rebuild(kind, path, problem, command, option):
    return kind(path, problem, command=command, option=option)


class MissingFile(MotionMatchingError):
    """The file does not exist or cannot be opened."""


class TruncatedFile(MotionMatchingError):
    """The file ends before a header or array it announces."""


class InvalidFile(MotionMatchingError):
    """The file is complete but its contents break the layout's rules."""


class MismatchedFiles(MotionMatchingError):
    """Two files that belong together disagree (for example frame counts)."""


class StaleCache(MotionMatchingError):
    """The cache was built from other inputs than the ones given now."""


class CorruptCache(MotionMatchingError):
    """The cache file is damaged, incomplete or not a cache at all."""


class CacheLocked(MotionMatchingError):
    """Another process is writing the same cache."""


class BvhError(MotionMatchingError):
    """A BVH file cannot be parsed; the problem names the line."""


class InvalidOption(MotionMatchingError, ValueError):
    """An option's value cannot work (with these inputs); ``path`` names the option, e.g. ``--nlatent``.

    Also a ``ValueError``, as the library raised before this class existed.
    """


class OverwriteRefused(MotionMatchingError):
    """Writing would replace a file the command did not write (an input, a user's own file): refused without
    ``--force``, or always where no ``--force`` may replace it."""


class WriteFailed(MotionMatchingError):
    """Writing a file failed part-way (disk full, file too large, permission); the previous file is untouched."""
