"""A small trained stepper for the stepper's tests: its files and run, made once per test folder."""
from motion_matching.data import generate

FRAMES = 1200  # the synthetic generator cuts this into 4 clips


def small_run(folder, *, iterations=12, hidden=64, **settings):
    """Generate a FRAMES-frame database (with its stand-in latent.bin) in ``folder`` and train a stepper on it
    into ``folder/run``; returns ``(files, result)`` (the generator's paths, the ``TrainResult``)."""
    from motion_matching.stepper.config import StepperConfig
    from motion_matching.stepper.train import train_stepper
    files = generate.generate_files(folder, nframes=FRAMES)
    config = StepperConfig(iterations=iterations, hidden=hidden, threads=1, **settings)
    result = train_stepper(config, database_path=files["database"], features_path=files["features"],
                           latent_path=files["latent"], out_dir=folder / "run")
    return files, result
