"""Command-line conventions of the project's CLIs (``evaluate.py``, ``train.py``, ``python -m envs.workload``): a
user error is one line on standard error, ``PROG: error: what and where``, and exit status 2; ``--debug`` shows the
traceback instead. Bad arguments are user errors too, in the same one line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import NoReturn

from envs.core.errors import GpuschedError
from envs.core.numbers import integer

USAGE = 2
"""Exit status of a user error: bad arguments, input or files."""

USER_ERRORS: tuple[type[BaseException], ...] = (GpuschedError, OSError)
"""What counts as a user error: the project's typed errors, and files that are missing, unreadable or unwritable."""


class ArgumentParser(argparse.ArgumentParser):
    """argparse with one-line errors: ``PROG: error: argument --x: ...`` and exit status 2 (no usage block)."""

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(USAGE)


def one_line(exc: BaseException) -> str:
    """The message of ``exc`` on one line; a file error names the file."""
    if isinstance(exc, OSError) and exc.filename is not None:
        return f"{exc.filename}: {exc.strerror or exc}"
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


def run_cli(prog: str, main: Callable[[], int], debug: bool = False) -> int:
    """``main()``, with user errors turned into one line on standard error and exit status 2 (unless ``debug``)."""
    try:
        return main()
    except USER_ERRORS as exc:
        if debug:
            raise
        print(f"{prog}: error: {one_line(exc)}", file=sys.stderr)
        return USAGE


def at_least(minimum: int) -> Callable[[str], int]:
    """An argparse ``type``: an integer >= ``minimum``, else the one-line message that says so."""
    def parse(text: str) -> int:
        value = integer(text.strip())
        if value is None:
            raise argparse.ArgumentTypeError(f"must be an integer >= {minimum}, got {text!r}")
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be an integer >= {minimum}, got {value}")
        return value
    return parse
