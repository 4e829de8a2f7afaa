"""What a command may write over: never its own input, and another existing file only where --force says so.

The commands own the rules (build-cache never replaces a non-cache, export and generate-database ask for
--force, ``toolkit.sniff`` says what a file is); this module answers the question they share.
"""
import os

from motion_matching.errors import OverwriteRefused


def same_file(first, second):
    """True if ``first`` and ``second`` name one existing file (the same spelling or not: ``./a``, a symlink,
    a hard link); False when either is absent or unreadable."""
    try:
        return os.path.samefile(first, second)
    except (OSError, TypeError, ValueError):
        return False



def refuse_existing(paths, *, force=False, ours=lambda path: False, choose="--out", why=""):
    """Raise ``OverwriteRefused`` naming the first of ``paths`` that exists, unless ``force`` or ``ours(path)``
    (a file this command may replace: one it wrote, or its own input): ``"<path>: exists, as do a and b<why>;
    pass --force to replace them, or choose another <choose>"`` (more than two others: ``"a and 9 more"``)."""
    existing = [os.fspath(path) for path in paths if os.path.lexists(path) and not ours(os.fspath(path))]
    if force or not existing:
        return
    others = [os.path.basename(path) for path in existing[1:]]
    named = f"{others[0]} and {len(others) - 1} more" if len(others) > 2 else " and ".join(others)
    also = f", as {'do' if len(others) > 1 else 'does'} {named}" if others else ""
    raise OverwriteRefused(existing[0], f"exists{also}{why}",
                           option=f"--force to replace {'them' if others else 'it'}, or choose another {choose}")


PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
WRITER_KEY = "Software"  # the PNG text chunk naming the program that wrote the image


def writer_tag(command):
    """What the PNGs that ``command`` (str, "evaluate") writes carry under ``WRITER_KEY``: its name (str)."""
    return f"mm-projector {command}"


def png_writer(path):
    """The ``WRITER_KEY`` text of the PNG at ``path`` (str), or None: not a PNG, no such text, unreadable."""
    try:
        with open(path, "rb") as stream:
            data = stream.read(1 << 16)  # the text chunks come before the image data
    except OSError:
        return None
    at = len(PNG_SIGNATURE)
    if not data.startswith(PNG_SIGNATURE):
        return None
    while at + 8 <= len(data):
        size, kind = int.from_bytes(data[at:at + 4], "big"), data[at + 4:at + 8]
        if kind in (b"IDAT", b"IEND"):
            return None
        keyword, _, text = data[at + 8:at + 8 + size].partition(b"\0")
        if kind == b"tEXt" and keyword.decode("latin-1") == WRITER_KEY:
            return text.decode("latin-1")
        at += 12 + size
    return None
