"""Making the toolkit's files: matching features, the stand-in latent, synthetic locomotion and BVH clips."""
