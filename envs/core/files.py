"""Files written atomically: the content goes to a file beside the target, which then replaces it in one step, so a
reader (or a run killed midway) sees the old file or the new one, never a part of either."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path


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
