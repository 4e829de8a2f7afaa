"""Drop-in for the toolkit's resources/train_stepper.py: run it in a folder holding database.bin,
features.bin and latent.bin to train stepper.bin with the toolkit's settings (every one an option).

    python train_stepper.py                     # the toolkit's run: 500,000 iterations
    python train_stepper.py --exact-toolkit     # byte for byte the script's stepper.bin
    python train_stepper.py --plots             # with the script's preview plots at each save
"""
from motion_matching.interrupts import interrupts_exit

with interrupts_exit():  # from the first import on, Ctrl-C prints one line and exits 130
    from motion_matching.cli.stepper import script_main as main

    if __name__ == "__main__":
        main()
