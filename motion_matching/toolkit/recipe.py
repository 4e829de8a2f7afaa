"""The constants of the toolkit's own ``resources/train_projector.py`` (orangeduck/Motion-Matching).

Declared once here, below every layer that needs them: ``projector.config`` takes them as its
defaults, the cache as its default stream (seed and length) and the demo as its settings.
"""
SEED = 1234  # np.random.seed and torch.manual_seed
BATCH_SIZE = 32
ITERATIONS = 500_000
LEARNING_RATE = 0.001  # AdamW
WEIGHT_DECAY = 0.001
AMSGRAD = True
LR_DECAY = 0.99  # ExponentialLR gamma, stepped every LR_DECAY_EVERY iterations
LR_DECAY_EVERY = 1000
SAVE_EVERY = 1000  # iterations between writes of projector.bin
WEIGHT_FEATURES = 1.0  # loss = WEIGHT_FEATURES L1(X) + WEIGHT_LATENT L1(Z) + WEIGHT_DISTANCE L1(distance difference)
WEIGHT_LATENT = 5.0
WEIGHT_DISTANCE = 0.3
HIDDEN = 512  # width of each hidden layer
HIDDEN_LAYERS = 4
THREADS = 1  # torch.set_num_threads(1)
PREVIEW_CLIP = 2  # after each save the preview draws noise for range 2 of database.bin ...
PREVIEW_MAX_ROWS = 1000  # ... at most this many of its frames
QUERIES = BATCH_SIZE * ITERATIONS  # every query one full run draws: 16,000,000
