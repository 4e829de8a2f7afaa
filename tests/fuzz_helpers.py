"""Fuzzing the readers: damage a small valid file every way asked, and check each read's outcome.

An outcome is fine if the reader returns (the file still reads as valid) or raises the project's
one-line error (a ``MotionMatchingError``); anything else, a read that runs past ``TIME_LIMIT``
seconds, or a read that allocates more than ``allowed_bytes(file size)`` fails.
"""
import contextlib
import signal
import tracemalloc

from motion_matching.errors import MotionMatchingError

TIME_LIMIT = 10


def allowed_bytes(size, *, per_byte=8):
    """The most a reader may allocate for a file of ``size`` bytes: a few copies of it, plus 1 MiB."""
    return (1 << 20) + per_byte * size


def truncations(data):
    """Every proper prefix of ``data`` (bytes), shortest first."""
    return (data[:length] for length in range(len(data)))


def flipped(data, flips):
    """``data`` with each (position, mask) of ``flips`` XORed in; positions wrap around the length."""
    damaged = bytearray(data)
    for position, mask in flips:
        damaged[position % len(damaged)] ^= mask
    return bytes(damaged)


def write_over(path, data):
    """Replace the bytes of ``path`` (fast on ext4: no O_TRUNC, which flushes the old contents)."""
    path.touch()
    with open(path, "r+b") as stream:
        stream.write(data)
        stream.truncate()


class Hung(Exception):
    """A read ran past the time limit."""


@contextlib.contextmanager
def time_limit(seconds):
    """Raise ``Hung`` inside the block after ``seconds`` (SIGALRM: main thread, POSIX)."""
    def expire(signum, frame):
        raise Hung(f"still reading after {seconds} s")
    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def outcome(read, path, data, *, per_byte=8):
    """Write ``data`` to ``path``, call ``read(path)``; returns "valid" or the error's class name.

    Raises AssertionError for any other exception, a hang, a message of more than one line or an
    allocation beyond ``allowed_bytes``.
    """
    write_over(path, data)
    tracemalloc.start()
    try:
        with time_limit(TIME_LIMIT):
            read(path)
        result = "valid"
    except MotionMatchingError as error:
        assert "\n" not in str(error) and str(error).startswith(f"{path}: "), repr(str(error))
        result = type(error).__name__
    except Exception as error:  # noqa: BLE001 - the point: nothing but the project's errors
        raise AssertionError(f"{type(error).__name__}: {error} (file of {len(data)} bytes)") from error
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert peak <= allowed_bytes(len(data), per_byte=per_byte), f"allocated {peak} bytes for {len(data)}"
    return result
