"""Commands: checking the toolkit's files."""
import click

from motion_matching.cli.group import main, reports_errors, summary
from motion_matching.cli.paths import INPUT_FILE
from motion_matching.toolkit.check import check_toolkit_files
from motion_matching.toolkit.provenance import latent_status

_FILE = INPUT_FILE


@main.command("check-files", short_help=summary("check-files"))
@click.option("--database", type=_FILE, help="database.bin to check.")
@click.option("--features", type=_FILE, help="features.bin to check.")
@click.option("--latent", type=_FILE, help="latent.bin to check.")
@reports_errors
def check_files(database, features, latent):
    """Validate toolkit files strictly and check they describe the same frames; say whether latent.bin is
    train-decompressor's for these files (its latent.json), stale, or of unknown origin.

    Example: mm-projector check-files --database database.bin --features features.bin --latent latent.bin
    """
    if not (database or features or latent):
        raise click.UsageError("give at least one of --database, --features, --latent")
    summary = check_toolkit_files(database=database, features=features, latent=latent)
    click.echo("\n".join(summary.lines()))
    if latent:  # where the latent came from: train-decompressor's for these files, stale, or unrecorded
        click.echo(latent_status(latent, database_path=database, features_path=features)[1])
    click.echo("ok: the files are valid and agree")
