"""Train the Learned Motion Matching projector fast, exactly and reproducibly."""

__version__ = "0.1.0"
