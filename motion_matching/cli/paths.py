"""The click types of every path option. A mistake about a path (a folder given for a file, a file for a
folder, an unreadable file) is the library's one line ``Error: <path>: <problem>``, exit 1, in every command,
not click's usage error (exit 2) in some. A missing input is left to the reader that opens it, whose line
is the same everywhere (``<path>: no such file``) and may carry a fix (the cache's build command).
"""
import os

import click

from motion_matching.atomic import check_file_name, check_folder_name
from motion_matching.errors import MotionMatchingError
from motion_matching.toolkit.binary_io import open_for_reading


def _given(ctx, param):
    """Whether ``param``'s value was given (command line, environment), not left at its default."""
    source = None if ctx is None or param is None else ctx.get_parameter_source(param.name)
    return source is not None and source not in (click.core.ParameterSource.DEFAULT,
                                                 click.core.ParameterSource.DEFAULT_MAP)


def _option(param):
    return param.opts[0] if param is not None and param.opts else "--out"


def _one_line(check, *args, **kwargs):
    try:
        check(*args, **kwargs)
    except MotionMatchingError as error:
        raise click.ClickException(str(error)) from None


class InputFile(click.Path):
    """A file the command reads: a given one that exists must be a readable file (a default is left to its
    reader, as the command may not need it)."""

    def __init__(self):
        super().__init__(dir_okay=False)

    def convert(self, value, param, ctx):
        path = os.fspath(value)
        if path and os.path.exists(path) and _given(ctx, param):
            _one_line(lambda: open_for_reading(path).close())
        return path


class OutputFile(click.Path):
    """A file the command writes: it must not be an existing folder."""

    def __init__(self):
        super().__init__(dir_okay=False)

    def convert(self, value, param, ctx):
        path = os.fspath(value)
        _one_line(check_file_name, path, option=_option(param))
        return path


class OutputFolder(click.Path):
    """A folder the command writes files into: not an existing file, nor a new name like a file's."""

    def __init__(self):
        super().__init__(file_okay=False)

    def convert(self, value, param, ctx):
        path = os.fspath(value)
        _one_line(check_folder_name, path, option=_option(param))
        return path


INPUT_FILE, OUTPUT_FILE, OUTPUT_FOLDER = InputFile(), OutputFile(), OutputFolder()
