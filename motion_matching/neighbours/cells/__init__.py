"""``cells``, the default exact search: k-means cells with ball, axis and sketch bounds (compiled and numpy)."""
