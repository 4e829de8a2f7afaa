"""The query stream and the exact nearest-frame search behind every training batch and every cache."""
