"""Strict little-endian readers and writers for the toolkit's length-prefixed arrays."""
import math
import os

import numpy as np

from motion_matching.errors import InvalidFile, MissingFile, TruncatedFile

U32 = np.dtype("<u4")
MAP_BYTES = 1 << 24  # arrays larger than this are memory-mapped instead of read


class BinaryReader:
    """Reads length-prefixed headers and arrays from one open file, checking every byte count.

    Arrays are read with ``np.fromfile`` or, above ``MAP_BYTES``, memory-mapped copy-on-write; never
    element by element, so reading runs at the disk's sequential speed. A mapped file must not be
    truncated in place while its arrays live (this package only ever replaces files by renaming).
    """

    def __init__(self, path, stream):
        self.path = os.fspath(path)
        self.stream = stream
        self.size = os.fstat(stream.fileno()).st_size

    @property
    def offset(self):
        return self.stream.tell()

    def _require(self, nbytes, field):
        left = self.size - self.offset
        if nbytes > left:
            raise TruncatedFile(
                self.path, f"truncated in {field} at byte {self.offset}: needs {nbytes} bytes, {left} left")

    def counts(self, field, n):
        """Read ``n`` u32 counts of the header of ``field``; returns a tuple of ints."""
        self._require(4 * n, f"{field} header")
        return tuple(int(v) for v in np.fromfile(self.stream, dtype=U32, count=n))

    def array(self, field, dtype, shape):
        """Read an array of ``shape`` and little-endian ``dtype``; float arrays must be finite."""
        dtype = np.dtype(dtype)
        count = math.prod(shape)  # Python ints: huge header counts must not wrap around
        self._require(count * dtype.itemsize, field)
        if count * dtype.itemsize <= MAP_BYTES:
            values = np.fromfile(self.stream, dtype=dtype, count=count)
            if dtype.kind == "f":
                self._check_finite(field, values, 0)
            return values.reshape(shape)
        return self._map(field, dtype, count).reshape(shape)

    def _map(self, field, dtype, count):
        # large arrays are memory-mapped copy-on-write (writable, private to this process): the
        # finiteness check then pulls the file through the page cache at the disk's sequential speed,
        # with no copy into a second buffer
        start = self.offset
        values = np.memmap(self.stream, dtype=dtype, mode="c", offset=start, shape=(count,)).view(np.ndarray)
        self.stream.seek(start + count * dtype.itemsize)
        if dtype.kind == "f":
            self._check_finite(field, values, 0)
        return values

    def _check_finite(self, field, flat, first):
        # a finite sum proves every element finite without a full-size boolean temporary;
        # a non-finite sum may be overflow, so only then look element by element
        with np.errstate(over="ignore", invalid="ignore"):
            if np.isfinite(np.add.reduce(flat)):
                return
        bad = np.flatnonzero(~np.isfinite(flat))
        if bad.size:
            raise InvalidFile(self.path, f"{field} holds NaN or Inf (first at element {first + int(bad[0])})")

    def array1d(self, field, dtype):
        """Read ``[u32 n, n values]``; returns a 1-D array."""
        (n,) = self.counts(field, 1)
        return self.array(field, dtype, (n,))

    def array2d(self, field, dtype):
        """Read ``[u32 rows, u32 cols, rows*cols values]``; returns a 2-D array."""
        rows, cols = self.counts(field, 2)
        return self.array(field, dtype, (rows, cols))

    def finish(self):
        """Refuse trailing bytes after the last field."""
        if self.offset != self.size:
            raise InvalidFile(self.path, f"{self.size - self.offset} trailing bytes after byte {self.offset}")


def open_for_reading(path):
    """Open ``path`` for binary reading, turning a missing file into ``MissingFile``."""
    try:
        return open(path, "rb")
    except FileNotFoundError:
        raise MissingFile(path, "no such file") from None
    except IsADirectoryError:
        raise MissingFile(path, "is a folder, not a file") from None
    except PermissionError:
        raise MissingFile(path, "permission denied") from None


def write_counts(stream, *counts):
    np.asarray(counts, dtype=U32).tofile(stream)


def write_array(stream, header, values, dtype):
    """Write the u32 ``header`` counts, then ``values`` as contiguous little-endian ``dtype``."""
    write_counts(stream, *header)
    np.ascontiguousarray(values, dtype=np.dtype(dtype).newbyteorder("<")).tofile(stream)
