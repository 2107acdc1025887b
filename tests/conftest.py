"""Shared fixtures: where the shared traces live, and a skip when they are absent."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TRACES = ROOT.parent / "shared" / "traces"
REFERENCE = ROOT.parent / "shared" / "reference"


@pytest.fixture
def traces_dir() -> Path:
    """``../shared/traces`` beside the project root; skips the test when the folder is absent."""
    if not TRACES.is_dir():
        pytest.skip(f"shared traces not found at {TRACES}")
    return TRACES
