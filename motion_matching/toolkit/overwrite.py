"""What a command may write over: never its own input, and another existing file only where --force says so.

The commands own the rules (build-cache never replaces a non-cache, export and generate-database ask for
--force, ``toolkit.sniff`` says what a file is); this module answers the question they share.
"""
import os


def same_file(first, second):
    """True if ``first`` and ``second`` name one existing file (the same spelling or not: ``./a``, a symlink,
    a hard link); False when either is absent or unreadable."""
    try:
        return os.path.samefile(first, second)
    except (OSError, TypeError, ValueError):
        return False

