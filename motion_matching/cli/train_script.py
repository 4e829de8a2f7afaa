"""The click group of ``python train_projector.py`` (the toolkit's script name, at the repository's top):
training with no command, ``build-cache`` as its one command, both with ``mm-projector``'s options."""
import logging

import click

from motion_matching.cli.cache import build_cache_command
from motion_matching.cli.group import CONTEXT, OneLineErrors, reports_errors
from motion_matching.cli.train import run_training, training_options


class ScriptGroup(OneLineErrors, click.Group):
    """The script's group: usage errors and Ctrl-C print one line, as mm-projector's do."""


@click.group(cls=ScriptGroup, invoke_without_command=True, context_settings=CONTEXT)
@training_options
@click.pass_context
@reports_errors
def main(context, **options):
    """Train the Learned Motion Matching projector (no command) or build its neighbour cache."""
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    logging.getLogger("faiss").setLevel(logging.WARNING)
    logging.getLogger("torch").setLevel(logging.WARNING)  # as mm-projector's group does, before torch loads
    if context.invoked_subcommand is None:
        run_training(**options)


main.add_command(build_cache_command, "build-cache")
