"""The decompressor and compressor of Learned Motion Matching (the toolkit's train_decompressor.py)."""
