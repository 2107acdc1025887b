"""Typed errors raised by the simulated world; each message says what is wrong and where."""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np


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


def action_index(action: Any, space: object) -> int:
    """``action`` as a Python int when it is an integer (a Python or numpy integer, or a 0-d integer array); else a
    :class:`TypeError` naming the action ``space`` (bools, floats, NaN, strings, None and other shapes included).

    The range is not checked here: an env refuses an out-of-range action as it refuses a masked one.
    """
    if type(action) is int:  # the common case, before the general checks
        return action
    value = action
    if isinstance(value, np.ndarray):
        if value.shape != () or value.dtype.kind not in "iu":
            raise TypeError(f"action: {space} takes one integer, got an array of shape {value.shape} and dtype "
                            f"{value.dtype}")
        value = value.item()
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"action: {space} takes one integer, got {action!r} ({type(action).__name__})")
    return int(value)
