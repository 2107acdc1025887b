"""Shared fixtures: the shared traces folder, skipping when it is absent."""

from __future__ import annotations

from pathlib import Path

import pytest
from paths import TRACES, require


@pytest.fixture
def traces_dir() -> Path:
    """``../shared/traces`` beside the project root; skips the test when the folder is absent."""
    require(TRACES)
    return TRACES
