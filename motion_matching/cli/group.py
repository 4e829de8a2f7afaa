"""The ``mm-projector`` click group and the one place library errors become CLI errors."""
import functools
import logging

import click

from ..errors import MotionMatchingError


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="motion-matching-projector")
def main():
    """Train the Learned Motion Matching projector from the toolkit's files, fast and exactly."""
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    logging.getLogger("faiss").setLevel(logging.WARNING)  # its loader reports which CPU build it picked


def reports_errors(command):
    """Decorate a click callback so ``MotionMatchingError`` becomes ``Error: <path>: <problem>``, exit 1."""
    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except MotionMatchingError as error:
            raise click.ClickException(str(error)) from None
    return wrapper
