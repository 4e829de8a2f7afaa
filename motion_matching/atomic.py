"""Atomic file writing: the final name appears only once the file is complete."""
import contextlib
import os
import tempfile

from motion_matching.errors import InvalidFile, WriteFailed


@contextlib.contextmanager
def atomic_write(path, mode="wb"):
    """Yield a file object for a temporary file beside ``path``; on success rename it to ``path``.

    On any exception the temporary file is removed and an existing ``path`` is left untouched; an
    ``OSError`` while writing (disk full, file too large, permission) becomes ``WriteFailed``.
    """
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    try:
        handle, temporary = tempfile.mkstemp(dir=folder, prefix=os.path.basename(path) + ".", suffix=".partial")
    except OSError as error:
        raise WriteFailed(path, f"cannot create a file in {folder} ({_reason(error)})") from None
    try:
        os.chmod(temporary, 0o666 & ~_current_umask())  # mkstemp makes 0600; users expect ordinary files
        with os.fdopen(handle, mode) as stream:
            yield stream
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException as error:
        with contextlib.suppress(FileNotFoundError):
            os.remove(temporary)
        if isinstance(error, OSError):
            raise WriteFailed(path, f"cannot write it ({_reason(error)}); the previous file, if any, is "
                                    "untouched") from None
        raise


@contextlib.contextmanager
def staged_files(paths):
    """Yield {path: temporary path beside it} for files that must change together; when the block
    succeeds, rename every temporary onto its path, so every file is complete before the first one
    changes. On any exception every temporary is removed and every path left untouched.
    """
    staged = {}
    try:
        for path in map(os.fspath, paths):
            staged[path] = f"{path}.{os.getpid()}.{len(staged)}.staged"
        yield dict(staged)
        for path, temporary in staged.items():
            os.replace(temporary, path)
    except BaseException as error:
        for temporary in staged.values():
            with contextlib.suppress(FileNotFoundError):
                os.remove(temporary)
        real = {temporary: path for path, temporary in staged.items()}
        if isinstance(error, WriteFailed) and error.path in real:  # name the file the user asked for
            raise WriteFailed(real[error.path], error.problem) from None
        if isinstance(error, OSError):
            raise WriteFailed(next(iter(staged), "."), f"cannot write the files ({_reason(error)})") from None
        raise


def _reason(error):
    if error.strerror:
        return error.strerror
    text = str(error) or type(error).__name__
    if "requested and" in text:  # numpy's tofile reports a short write with byte counts only
        return f"the write stopped short ({text} bytes): is the disk full or the file size limited?"
    return text


def _current_umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


# names that end like the files the project writes or reads: refused as folder names
FILE_SUFFIXES = (".bin", ".pt", ".onnx", ".h5", ".hdf5", ".json", ".png", ".bvh", ".csv", ".txt", ".npy")


def check_folder_name(path, *, option="--out"):
    """Raise ``InvalidFile`` if ``path``, the folder that ``option`` names, is an existing file, or is no
    folder yet and is named like a file (``newrun.bin``)."""
    path = os.fspath(path)
    if os.path.exists(path) and not os.path.isdir(path):
        raise InvalidFile(path, f"is a file but this {option} names a folder (files are written into it); "
                                f"choose another {option}")
    if not os.path.isdir(path) and path.lower().endswith(FILE_SUFFIXES):
        raise InvalidFile(path, f"is named like a file but this {option} names a folder (files are written into "
                                f"it); give a folder name such as {os.path.splitext(path)[0] or 'out'}")


def check_file_name(path, *, option="--out"):
    """Raise ``InvalidFile`` if ``path``, the file that ``option`` names, is an existing folder."""
    if os.path.isdir(path):
        raise InvalidFile(path, f"is a folder but this {option} names a file to write; choose another {option}")


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
