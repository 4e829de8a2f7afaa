"""Train the Learned Motion Matching projector fast, exactly and reproducibly."""

from motion_matching.threads import prefer_short_spinning

__version__ = "0.1.0"

prefer_short_spinning()  # here, before torch or faiss loads libgomp: every entry point imports this package first
