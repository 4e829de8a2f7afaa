"""Atomic file writing: the final name appears only once the file is complete."""
import contextlib
import os
import tempfile

from motion_matching.errors import InvalidFile


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


# names that end like the files the project writes or reads: refused as folder names
FILE_SUFFIXES = (".bin", ".pt", ".onnx", ".h5", ".hdf5", ".json", ".png", ".bvh", ".csv", ".txt", ".npy")


def check_folder_name(path):
    """Raise ``InvalidFile`` if ``path`` is no folder yet and is named like a file (``newrun.bin``)."""
    path = os.fspath(path)
    if not os.path.isdir(path) and path.lower().endswith(FILE_SUFFIXES):
        raise InvalidFile(path, f"is named like a file but this --out names a folder (files are written into it); "
                                f"give a folder name such as {os.path.splitext(path)[0] or 'out'}")


@contextlib.contextmanager
def output_folder(path):
    """Make the folder ``path`` (and missing parents) for a ``with`` block; if the block raises, remove the
    folders it made that are still empty, so a refused run leaves nothing behind. Yields ``path`` (str)."""
    path = os.fspath(path)
    check_folder_name(path)
    made, folder = [], os.path.abspath(path)
    while not os.path.isdir(folder):
        made.append(folder)
        folder = os.path.dirname(folder)
    os.makedirs(path, exist_ok=True)
    try:
        yield path
    except BaseException:
        for folder in made:  # deepest first
            with contextlib.suppress(OSError):
                os.rmdir(folder)  # fails, and keeps the folder, when it holds anything
        raise
