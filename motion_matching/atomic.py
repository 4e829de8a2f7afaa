"""Atomic file writing: the final name appears only once the file is complete."""
import contextlib
import os
import tempfile


@contextlib.contextmanager
def atomic_write(path, mode="wb"):
    """Yield a file object for a temporary file beside ``path``; on success rename it to ``path``.

    On any exception the temporary file is removed and an existing ``path`` is left untouched.
    """
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=os.path.basename(path) + ".", suffix=".partial")
    try:
        os.chmod(temporary, 0o666 & ~_current_umask())  # mkstemp makes 0600; users expect ordinary files
        with os.fdopen(handle, mode) as stream:
            yield stream
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.remove(temporary)
        raise


def _current_umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask
