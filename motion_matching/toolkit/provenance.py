"""What a latent.bin was made from: ``latent.json`` beside it, written with it by decompressor training.

Layout (JSON object): ``format`` "mm-latent-provenance", ``version`` 1, ``made_by`` "decompressor"
(``decompressor.train``), ``latent_sha256`` (the latent.bin it describes),
``database_sha256`` and ``features_sha256`` (the files it was trained from), ``iterations`` (done when
it was written), ``seed`` and ``recipe``. ``latent_status`` reads it back for ``check-files`` and
``train``: one line saying whether a latent.bin is the decompressor's for these files (fresh), was
trained from other files (stale), or has no record (the toolkit's own, generate-database's stand-in, a
copy). The record names the latent.bin's own SHA-256, so a latent.bin replaced since has none.
"""
import json
import os

from motion_matching.atomic import atomic_write
from motion_matching.fingerprint import file_sha256

FORMAT, VERSION = "mm-latent-provenance", 1


def provenance_path(latent_path):
    """The record's path beside ``latent_path`` (str): latent.bin -> latent.json."""
    return os.path.splitext(os.fspath(latent_path))[0] + ".json"


def write_record(latent_path, *, made_by, hashes, **details):
    """Write the record of the latent.bin at ``latent_path`` (atomically); ``hashes`` {"database", "features"}."""
    record = {"format": FORMAT, "version": VERSION, "made_by": made_by, "latent_sha256": file_sha256(latent_path),
              "database_sha256": hashes.get("database"), "features_sha256": hashes.get("features"), **details}
    with atomic_write(provenance_path(latent_path), "w") as stream:
        json.dump(record, stream, indent=1)


def read_record(latent_path):
    """The record (dict) of the latent.bin at ``latent_path``, or None when it has none, or not its own
    (another latent.bin's: the digest differs), or one that cannot be read."""
    try:
        with open(provenance_path(latent_path)) as stream:
            record = json.load(stream)
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        return None
    if record.get("latent_sha256") != file_sha256(latent_path):
        return None
    return record


def latent_status(latent_path, *, database_path=None, features_path=None):
    """``(state, line)``: state "fresh", "stale" or "unknown", and one line saying it for
    the latent.bin at ``latent_path`` against the given database.bin and features.bin (None: not checked)."""
    record = read_record(latent_path)
    if record is None:
        return "unknown", (f"{latent_path}: no record of what it was trained from (no latent.json of its own: not "
                           "written by train-decompressor; the toolkit's own, generate-database's synthetic "
                           "stand-in, or a copy)")
    changed = [name for name, path in (("database", database_path), ("features", features_path))
               if path and record.get(f"{name}_sha256") != file_sha256(path)]
    if changed:
        files = " and ".join(f"{name}.bin" for name in changed)
        return "stale", (f"{latent_path}: stale: trained from another {files} (run train-decompressor again)")
    return "fresh", (f"{latent_path}: written by train-decompressor after {record['iterations']:,} iterations "
                     "from these files")
