"""Drop-in for the toolkit's resources/train_projector.py: run it in a folder holding database.bin,
features.bin and latent.bin to train projector.bin with the toolkit's settings (every one an option).

    python train_projector.py                         # the toolkit's run: BallTree searches, 500,000 iterations
    python train_projector.py build-cache             # exact neighbours of the query stream, once
    python train_projector.py --offline projector_cache.h5   # the same run, neighbours read from the cache
"""
from motion_matching.interrupts import interrupts_exit

with interrupts_exit():  # from the first import on, Ctrl-C prints one line and exits 130
    from motion_matching.cli.train_script import main

    if __name__ == "__main__":
        main()
