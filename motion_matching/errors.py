"""One error hierarchy for every problem a user can fix: each names the file and the problem."""


class MotionMatchingError(Exception):
    """Base of every user-facing error; ``str(error)`` is ``"<path>: <problem>"``."""

    def __init__(self, path, problem):
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")


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
