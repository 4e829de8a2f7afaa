"""Recognising a file by its shape, so that a file of the wrong kind is named ("an ONNX model") instead of
reported as truncated at some byte.

``file_kind`` reads only signatures and the toolkit layouts' u32 counts (seeking over the arrays), so it
costs a few small reads whatever the file's size.
"""
import functools
import os
import struct

from motion_matching.errors import InvalidFile, TruncatedFile

HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
ZIP_SIGNATURE = b"PK\x03\x04"  # torch.save writes a zip archive
ONNX_FIELDS = (0x12, 0x1a, 0x22, 0x2a, 0x3a, 0x42)  # ModelProto tags that follow ir_version (field 1)
TEXT_SNIFF_BYTES = 4096  # a file whose first bytes are printable UTF-8 is called a text file


class _Walker:
    """Reads u32 counts and skips arrays, returning None as soon as the layout does not fit the file."""

    def __init__(self, stream, size):
        self.stream, self.size = stream, size

    def counts(self, n):
        data = self.stream.read(4 * n)
        return struct.unpack(f"<{n}I", data) if len(data) == 4 * n else None

    def skip(self, nbytes):
        if self.stream.tell() + nbytes > self.size:
            return False
        self.stream.seek(nbytes, os.SEEK_CUR)
        return True

    def array(self, dims, width=1, item=4):
        """Skip an array with a header of ``dims`` counts; returns the counts, or None if it does not fit."""
        counts = self.counts(dims)
        if counts is None:
            return None
        total = item * width
        for count in counts:
            total *= count
        return counts if self.skip(total) else None

    def at_end(self):
        return self.stream.tell() == self.size


def _features(walk):
    shape = walk.array(2)
    if shape is None or walk.array(1) != (shape[1],) or walk.array(1) != (shape[1],) or not walk.at_end():
        return None
    return f"a features.bin ({shape[0]:,} frames x {shape[1]} features)"


def _latent(walk):
    shape = walk.array(2)
    return f"a latent.bin ({shape[0]:,} frames x {shape[1]} columns)" if shape is not None and walk.at_end() else None


def _network(walk):
    vectors = [walk.array(1) for _ in range(4)]
    layers = walk.counts(1)
    if None in vectors or layers is None or not 0 < layers[0] <= 64:
        return None
    for _ in range(layers[0]):
        if walk.array(2) is None or walk.array(1) is None:
            return None
    if not walk.at_end():
        return None
    return f"a network .bin ({vectors[0][0]} inputs, {layers[0]} layers, {vectors[2][0]} outputs)"


def _database(walk):
    shapes = [walk.array(2, width) for width in (3, 3, 4, 3)]
    if None in shapes or len(set(shapes)) != 1 or None in [walk.array(1) for _ in range(3)] or \
            walk.array(2, item=1) is None or not walk.at_end():
        return None
    return f"a database.bin ({shapes[0][0]:,} frames x {shapes[0][1]} bones)"


LAYOUTS = {"features.bin": _features, "latent.bin": _latent, "network .bin": _network, "database.bin": _database}


def _text(head):
    """"a BVH file" or "a text file" when ``head`` (the file's first bytes) reads as text, else None."""
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as error:
        if error.start < len(head) - 3:  # only a character cut by the end of ``head`` is forgiven
            return None
        text = head[:error.start].decode("utf-8")
    if not text or any(not (char.isprintable() or char in "\t\r\n\f") for char in text):
        return None
    return "a BVH file" if text.lstrip("\ufeff \t\r\n").startswith("HIERARCHY") else "a text file"


def _signature(head):
    if head.startswith(HDF5_SIGNATURE):
        return "an HDF5 file (a projector cache, for example)"
    if head.startswith(ZIP_SIGNATURE):
        return "a zip archive (a training checkpoint, for example)"
    if len(head) >= 3 and head[0] == 0x08 and 3 <= head[1] <= 20 and head[2] in ONNX_FIELDS:
        return "an ONNX model"
    return None


def file_kind(path):
    """What the file at ``path`` looks like, as a phrase (str: "an ONNX model", "a features.bin (2,000 frames
    x 27 features)", "an empty file", "a text file", ...), or None when it matches no known signature,
    toolkit layout or text."""
    try:
        size = os.path.getsize(path)
        if size == 0:
            return "an empty file"
        with open(path, "rb") as stream:
            head = stream.read(TEXT_SNIFF_BYTES)
            kind = _signature(head)
            for describe in () if kind else LAYOUTS.values():
                stream.seek(0)
                kind = describe(_Walker(stream, size))
                if kind:
                    break
    except (OSError, struct.error):
        return None
    return kind or _text(head)


def recognised(expected):
    """Decorate a loader of the toolkit layout ``expected`` (a key of ``LAYOUTS``): when it refuses a file
    that is recognisably something else, the error says what the file is instead of where parsing failed."""
    def decorate(load):
        @functools.wraps(load)
        def loader(path, *args, **kwargs):
            try:
                return load(path, *args, **kwargs)
            except (InvalidFile, TruncatedFile) as error:
                problem = another_kind(path, f"a {expected}")
                if problem is None:
                    raise
                raise InvalidFile(path, problem) from error
        return loader
    return decorate


def another_kind(path, expected):
    """``"is <what it is>, not <expected>"`` (str) when the file at ``path`` is recognisably something else
    than ``expected`` (a phrase: "a features.bin", "a training checkpoint (.pt)"), else None."""
    kind = file_kind(path)
    if kind is None or kind.startswith(expected):
        return None
    return f"is {kind}, not {expected}"
