"""Files: YAML read safely (data only, never code), and files written atomically: the content goes to a file beside
the target, which then replaces it in one step, so a reader (or a run killed midway) sees the old file or the new
one, never a part of either."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from envs.core.errors import ConfigError


def read_yaml(path: str | Path, what: str) -> Any:
    """The data of the YAML file ``path`` (``yaml.safe_load``: plain data, no objects), or a one-line
    :class:`ConfigError` naming the file, what it should hold (``what``, e.g. "cluster file") and why it cannot be
    read."""
    path = Path(path)
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a directory, not a {what}") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read {what} ({exc.strerror or exc})") from None
    except (UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: not a valid {what} ({' '.join(str(exc).split())})") from None


def write_atomically(path: str | Path, write: Callable[[Path], object]) -> None:
    """Call ``write(partial)`` to write the content to ``PATH.partial``, then move it over ``path``.

    If ``write`` raises (or the process is interrupted), ``path`` is left as it was and the partial file removed.
    """
    target = Path(path)
    partial = target.with_name(target.name + ".partial")
    try:
        write(partial)
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)


def write_text_atomically(path: str | Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    write_atomically(path, lambda partial: partial.write_text(text, encoding="utf-8"))
