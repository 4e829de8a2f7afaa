"""Drop-in for the toolkit's resources/train_decompressor.py: run it in a folder holding database.bin and
features.bin to train decompressor.bin and latent.bin with the toolkit's settings (every one an option).

    python train_decompressor.py                     # the toolkit's run: 500,000 iterations
    python train_decompressor.py --exact-toolkit     # byte for byte the script's decompressor.bin and latent.bin
    python train_decompressor.py --recipe fast       # the fast recipe (docs/decompressor.md)
"""
from motion_matching.interrupts import interrupts_exit

with interrupts_exit():  # from the first import on, Ctrl-C prints one line and exits 130
    from motion_matching.cli.decompressor import script_main as main

    if __name__ == "__main__":
        main()
