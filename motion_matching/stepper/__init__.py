"""The stepper: the toolkit's third network, which advances features and latent by one frame."""
