"""An exclusive, non-blocking lock on ``<path>.lock`` so two builds never write the same cache.

POSIX uses ``fcntl.flock`` and Windows ``msvcrt.locking``; both locks vanish when their process dies,
so a killed build never leaves a cache locked.
"""
import contextlib
import os

from motion_matching.errors import CacheLocked

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None
    import msvcrt


def _try_lock(descriptor):
    """Lock ``descriptor`` without waiting; returns False if another process holds it."""
    try:
        if fcntl is not None:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        else:
            msvcrt.locking(descriptor, msvcrt.LK_NBLCK, 1)
    except OSError:
        return False
    return True


def _holder(lock_path):
    with contextlib.suppress(OSError, ValueError):
        with open(lock_path, encoding="ascii") as stream:
            return f" by process {int(stream.read().strip())}"
    return ""


def _acquire(path, lock_path):
    for _ in range(10):
        descriptor = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        if not _try_lock(descriptor):
            os.close(descriptor)
            raise CacheLocked(path, f"another build-cache is writing this cache (lock {lock_path} is held"
                                    f"{_holder(lock_path)}); wait for it to finish or stop it")
        try:
            # The holder before us may have unlinked the file between our open and our lock.
            current = os.fstat(descriptor).st_ino == os.stat(lock_path).st_ino or fcntl is None
        except FileNotFoundError:
            current = False
        if current:
            os.ftruncate(descriptor, 0)
            os.write(descriptor, str(os.getpid()).encode("ascii"))
            return descriptor
        os.close(descriptor)
    raise CacheLocked(path, f"could not take the lock {lock_path}: it keeps being replaced")


def _unlock(descriptor):
    if fcntl is not None:
        fcntl.flock(descriptor, fcntl.LOCK_UN)
    else:
        msvcrt.locking(descriptor, msvcrt.LK_UNLCK, 1)


def lock_holder(path):
    """Who holds the lock of the cache at ``path``: "process N" (or "another process"), None if nobody.

    Probes by taking the lock for an instant (never creating the lock file), so a build is seen whatever
    process runs it.
    """
    lock_path = os.fspath(path) + ".lock"
    try:
        descriptor = os.open(lock_path, os.O_RDWR)
    except OSError:
        return None
    try:
        if _try_lock(descriptor):
            _unlock(descriptor)
            return None
    finally:
        os.close(descriptor)
    return _holder(lock_path).strip().removeprefix("by ") or "another process"


@contextlib.contextmanager
def exclusive_lock(path):
    """Hold the lock of the cache at ``path`` (the file ``<path>.lock``) for the ``with`` block.

    Raises ``CacheLocked`` at once if another process holds it. Yields the lock file's path (str).
    """
    path = os.fspath(path)
    lock_path = path + ".lock"
    descriptor = _acquire(path, lock_path)
    try:
        yield lock_path
    finally:
        with contextlib.suppress(OSError):
            os.remove(lock_path)  # while still locked, so a waiting process re-checks the inode
        os.close(descriptor)
