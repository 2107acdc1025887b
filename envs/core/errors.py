"""Typed errors raised by the simulated world; each message says what is wrong and where."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


class GpuschedError(Exception):
    """Base class of every error raised by gpusched."""


class ConfigError(GpuschedError, ValueError):
    """A configuration (cluster preset, runtime model, generator config) is invalid.

    The message names the offending key, e.g. ``tiny.yaml: node_groups[0].gpus: must be >= 1, got 0``.
    """


class JobSpecError(GpuschedError, ValueError):
    """A job description is impossible (negative runtime, fractional multi-GPU request, ...)."""


class TraceFormatError(GpuschedError, ValueError):
    """A trace file holds a malformed record; the message names the file and the 1-based line."""

    def __init__(self, path: str, line: int, message: str) -> None:
        super().__init__(f"{path} line {line}: {message}")
        self.path = path
        self.line = line
        self.reason = message


class ActionRefused(GpuschedError):
    """The simulator refused a policy's action; ``reason`` is a :class:`~envs.core.job.RefusalReason`."""

    def __init__(self, reason: object, message: str) -> None:
        super().__init__(f"{getattr(reason, 'name', reason)}: {message}")
        self.reason = reason


class SimulationStalled(GpuschedError):
    """The policy waited while nothing could ever happen again (no running job, no future event)."""


def check_keys(data: Any, allowed: Iterable[str], where: str) -> None:
    """Raise :class:`ConfigError` unless ``data`` is a mapping whose keys are all in ``allowed``; the message names
    the first unknown key as ``{where}.{key}`` and lists the allowed ones."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where}: must be a mapping, got {type(data).__name__}")
    allowed = set(allowed)
    unknown = sorted(set(map(str, data)) - allowed)
    if unknown:
        raise ConfigError(f"{where}.{unknown[0]}: unknown key (allowed: {', '.join(sorted(allowed))})")
