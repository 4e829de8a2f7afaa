"""Content fingerprints of input files: what caches, checkpoints and reports record they were made from."""
import hashlib

from motion_matching.errors import MissingFile


def file_sha256(path):
    """Hex SHA-256 (64 lowercase characters) of the bytes of ``path``; ``MissingFile`` if it cannot be read."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as stream:
            for block in iter(lambda: stream.read(1 << 20), b""):
                digest.update(block)
    except OSError as error:
        raise MissingFile(path, f"cannot read it ({error.strerror or error})") from None
    return digest.hexdigest()
