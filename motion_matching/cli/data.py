"""Commands: generate-database (the toolkit's database.bin, features.bin and latent.bin)."""
import click

from motion_matching.cli.group import SEED, main, reports_errors, summary
from motion_matching.cli.paths import INPUT_FILE, OUTPUT_FILE, OUTPUT_FOLDER
from motion_matching.data import features, generate, latent
from motion_matching.data.synthetic import locomotion

_FILE = INPUT_FILE


def _weights(context, parameter, value):
    try:
        return features.DEFAULT_WEIGHTS if value is None else features.parse_weights(value)
    except ValueError as error:
        raise click.BadParameter(str(error)) from None


def _windows(context, parameter, values):
    windows = []
    for value in values:
        start, _, stop = value.partition(":")
        try:
            windows.append((int(start), int(stop)))
        except ValueError:
            raise click.BadParameter(f"{value!r} is not START:STOP (two frame numbers)") from None
    return windows or None


def _frame_count(frames, seconds):
    if frames is not None and seconds is not None:
        raise click.UsageError("give --frames or --seconds, not both")
    if seconds is not None:
        return int(round(seconds * locomotion.FPS))
    return locomotion.DEFAULT_FRAMES if frames is None else frames


def _check_sources(database, bvh, windows):
    if database is not None and bvh:
        raise click.UsageError("give --database or --bvh, not both")
    if windows is not None and len(windows) != len(bvh):
        raise click.UsageError(f"{len(windows)} --window option(s) for {len(bvh)} --bvh file(s): give one per file")


@main.command("generate-database", short_help=summary("generate-database"))
@click.option("--out", default=".", show_default=True, type=OUTPUT_FOLDER, metavar="FOLDER",
              help="Folder for the files.")
@click.option("--seed", default=0, show_default=True, type=SEED, help="Seed of the synthetic database.")
@click.option("--frames", type=click.IntRange(min=locomotion.MIN_FRAMES),
              help=f"Synthetic frames, mirrors included [default: {locomotion.DEFAULT_FRAMES}].")
@click.option("--seconds", type=click.FloatRange(min=locomotion.MIN_FRAMES / locomotion.FPS),
              help="Synthetic length in seconds at 60 fps (instead of --frames).")
@click.option("--database", type=_FILE, help="Existing database.bin: write only its features.bin and latent.bin.")
@click.option("--bvh", multiple=True, type=_FILE, help="BVH file to import (repeat for several clips).")
@click.option("--window", multiple=True, callback=_windows, metavar="START:STOP",
              help="Source-frame window of each --bvh file, repeated in the same order.")
@click.option("--weights", callback=_weights, metavar="FP,FV,HV,TP,TD",
              help="Feature weights: foot position, foot velocity, hip velocity, trajectory positions, "
                   "trajectory directions [default: 0.75,1,1,1,1.5].")
@click.option("--latent", "latent_path", type=_FILE, help="Keep this latent.bin instead of the stand-in latent.")
@click.option("--nlatent", default=latent.DEFAULT_NLATENT, show_default=True, type=click.IntRange(min=1),
              help="Columns of the stand-in latent.")
@click.option("--write-bvh", type=OUTPUT_FOLDER, help="Also write every range as BVH into this folder.")
@click.option("--plot", type=OUTPUT_FILE, help="Also write a PNG of a few feature columns.")
@click.option("--force", is_flag=True,
              help="Replace database.bin, features.bin and latent.bin already in --out, an existing --plot and the "
                   "BVH files already in --write-bvh.")
@reports_errors
def generate_database(out, seed, frames, seconds, database, bvh, window, weights, latent_path, nlatent,
                      write_bvh, plot, force):
    """Write database.bin, features.bin and latent.bin (synthetic locomotion unless --database or --bvh).

    Examples: generate_database.py --out data/ ;
    generate_database.py --database data/database.bin --out data/ --weights 0.75,1,1,1,2
    """
    _check_sources(database, bvh, window)
    paths = generate.generate_files(out, database_path=database, bvh_paths=bvh, windows=window, seed=seed,
                                    nframes=_frame_count(frames, seconds), weights=weights, latent_path=latent_path,
                                    nlatent=nlatent, bvh_dir=write_bvh, plot_path=plot, force=force)
    for name in ("database", "features", "latent", "plot"):
        if name in paths:
            click.echo(f"wrote {name}: {paths[name]}")
    if database is not None:
        made = "features.bin" if latent_path else "features.bin and latent.bin"
        click.echo(f"recomputed {made} from {database} (kept as it is)")
    if "bvh" in paths:
        click.echo(f"wrote {len(paths['bvh'])} BVH files into {write_bvh}")
