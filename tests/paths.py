"""Where the tests find the project and the shared material beside it, and how a test skips without it.

The shared folder (``../shared``: traces and the peer reference) is not part of the repository; tests that read it
call :func:`require` (or take the ``traces_dir`` fixture) and skip, saying what is missing, when it is absent.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
TRACES = SHARED / "traces"
REFERENCE = SHARED / "reference"
LUBLIN = TRACES / "lublin-synthetic" / "lublin_256.swf"


def require(*paths: Path) -> None:
    """Skip the calling test unless every path exists."""
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        pytest.skip(f"shared material not found: {', '.join(missing)}")
