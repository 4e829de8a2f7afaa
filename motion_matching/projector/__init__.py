"""The projector: query stream, exact neighbour search, cache, network, training, export."""
