"""A small trained decompressor for the decompressor's tests: its files and run, made once per test folder."""
from motion_matching.data import generate

FRAMES = 1200  # the synthetic generator cuts this into 4 clips


def small_run(folder, *, iterations=12, hidden=64, **settings):
    """Generate a FRAMES-frame database in ``folder`` and train a decompressor on it into ``folder/run``;
    returns ``(files, result)`` (the generator's paths, the ``TrainResult``)."""
    from motion_matching.decompressor.config import DecompressorConfig
    from motion_matching.decompressor.train import train_decompressor
    files = generate.generate_files(folder, nframes=FRAMES)
    config = DecompressorConfig(iterations=iterations, hidden=hidden, threads=1, **settings)
    result = train_decompressor(config, database_path=files["database"], features_path=files["features"],
                                out_dir=folder / "run")
    return files, result
