"""The code base stays ruff-clean (lint rules in pyproject.toml)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest
from paths import ROOT


def test_ruff_check_is_clean():
    if importlib.util.find_spec("ruff") is None:
        pytest.skip("ruff is not installed (pip install -e '.[dev]')")
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "."], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
