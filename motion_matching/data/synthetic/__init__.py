"""The deterministic synthetic locomotion database: a gait generator and the clips built from it."""
