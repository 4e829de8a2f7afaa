"""Drop-in for the toolkit's resources/train_projector.py: run it in a folder holding database.bin,
features.bin and latent.bin to train projector.bin with the toolkit's settings (every one an option).

    python train_projector.py                         # the toolkit's run: BallTree searches, 500,000 iterations
    python train_projector.py build-cache             # exact neighbours of the query stream, once
    python train_projector.py --offline projector_cache.h5   # the same run, neighbours read from the cache
"""
import logging

import click

from motion_matching.cli.cache import build_cache_command
from motion_matching.cli.group import CONTEXT, OneLineErrors, reports_errors
from motion_matching.cli.train import run_training, training_options


class ScriptGroup(OneLineErrors, click.Group):
    """The script's group: usage errors print one line, as mm-projector's do."""


@click.group(cls=ScriptGroup, invoke_without_command=True, context_settings=CONTEXT)
@training_options
@click.pass_context
@reports_errors
def main(context, **options):
    """Train the Learned Motion Matching projector (no command) or build its neighbour cache."""
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    logging.getLogger("faiss").setLevel(logging.WARNING)
    if context.invoked_subcommand is None:
        run_training(**options)


main.add_command(build_cache_command, "build-cache")

if __name__ == "__main__":
    main()
