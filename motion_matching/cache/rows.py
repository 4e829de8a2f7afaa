"""Where a build's rows come from: the default stream (any slice) or the toolkit's (chunk after chunk).

Both give ``rows(first, stop) -> (queries, sources, state)`` for the chunk ``first .. stop-1`` and
``record(handle, stop, state)`` to store what a resume at row ``stop`` needs, and ``regenerate(handle,
first, stop)`` for the check of a resumed or verified chunk. The toolkit stream must be read in order:
``start(handle, first)`` puts it at chunk ``first`` from the generator state stored for that chunk.
"""
from motion_matching.cache import streams
from motion_matching.neighbours import queries as query_stream
from motion_matching.neighbours import toolkit_stream


class DefaultRows:
    """Rows of ``queries.generate_queries``: query i depends only on the seed and i."""

    def __init__(self, features, attributes):
        self.features, self.seed, self.scale = features, attributes["seed"], attributes["noise_scale"]
        self.unit = query_stream.QUERY_BLOCK  # rows regenerated together by a check

    def batch_end(self, stop):
        """Any row can end a slice."""
        return stop

    def create(self, handle):
        """Nothing to add to a new file."""

    def start(self, handle, first):
        """Any row can come first."""

    def rows(self, first, stop):
        """``(queries (k, n) float32, sources (k,) int64, None)`` of rows ``first .. stop-1``."""
        queries, sources = query_stream.generate_queries(self.features, seed=self.seed, start=first, stop=stop,
                                                         scale=self.scale)
        return queries, sources, None

    def record(self, handle, stop, state):
        """Nothing to store: the stream can be sliced."""

    def regenerate(self, handle, first, stop):
        """Queries (k, n) float32 of rows ``first .. stop-1``."""
        return self.rows(first, stop)[0]


class ToolkitRows:
    """Rows of ``toolkit_stream.ToolkitStream``, with the generator state stored at every chunk start."""

    def __init__(self, features, attributes):
        self.features, self.attributes = features, attributes
        self.chunk_rows, self.batch_size = attributes["chunk_rows"], attributes["batch_size"]
        self.nchunks = -(-attributes["nqueries"] // self.chunk_rows)
        self.stream = self._new_stream()
        self.position = 0
        self.unit = self.chunk_rows  # a chunk regenerates from its stored start state

    def batch_end(self, stop):
        """``stop`` rounded up to a whole batch (int)."""
        return -(-stop // self.batch_size) * self.batch_size

    def _new_stream(self):
        return toolkit_stream.ToolkitStream(self.features, seed=self.attributes["seed"], batch_size=self.batch_size,
                                            save_every=self.attributes["save_every"],
                                            preview_rows=self.attributes["preview_rows"])

    def create(self, handle):
        """Allocate the ``toolkit_stream`` state datasets of a new file and store chunk 0's state."""
        group = handle.create_group(streams.STATE_GROUP)
        for name, dtype in streams.STATE_DATASETS.items():
            shape = (self.nchunks, toolkit_stream.STATE_WORDS) if name == "keys" else (self.nchunks,)
            group.create_dataset(name, shape=shape, dtype=dtype, track_times=False, fletcher32=True)
        self.record(handle, 0, self.stream.state())

    def _stored_state(self, handle, chunk):
        group = handle[streams.STATE_GROUP]
        state = {name: group[name][chunk] for name in streams.STATE_DATASETS}
        state["iteration"] = chunk * self.chunk_rows // self.batch_size
        return state

    def start(self, handle, first):
        """Continue the stream at row ``first`` (a chunk start) from the state stored for that chunk."""
        self.stream.restore(self._stored_state(handle, first // self.chunk_rows))
        self.position = first

    def rows(self, first, stop):
        """``(queries, sources, state after them)`` of rows ``first .. stop-1``, which must follow the last."""
        if first != self.position:
            raise ValueError(f"the toolkit stream is at row {self.position}, not {first}")
        queries, sources = self.stream.batches((stop - first) // self.batch_size)
        self.position = stop
        return queries, sources, self.stream.state()

    def record(self, handle, stop, state):
        """Store ``state`` as the start state of the chunk beginning at row ``stop`` (if there is one)."""
        chunk = stop // self.chunk_rows
        if chunk < self.nchunks:
            group = handle[streams.STATE_GROUP]
            for name in streams.STATE_DATASETS:
                group[name][chunk] = state[name]

    def regenerate(self, handle, first, stop):
        """Queries (k, n) float32 of rows ``first .. stop-1`` (within one chunk), from the chunk's state."""
        chunk = first // self.chunk_rows
        stream = self._new_stream()
        stream.restore(self._stored_state(handle, chunk))
        stream.skip((first - chunk * self.chunk_rows) // self.batch_size)
        return stream.batches((stop - first) // self.batch_size)[0]


def rows_for(features, attributes):
    """The row source (``DefaultRows`` or ``ToolkitRows``) of a cache with these attributes."""
    kind = attributes.get("stream", streams.DEFAULT)
    return ToolkitRows(features, attributes) if kind == streams.TOOLKIT else DefaultRows(features, attributes)


def chunk_rows_for(chunk_rows, nqueries, batch_size=None):
    """Rows per chunk (int): at most ``nqueries``; for the toolkit stream a whole number of batches."""
    rows = min(chunk_rows, nqueries)
    if batch_size:
        rows = max(1, rows // batch_size) * batch_size
    return rows

