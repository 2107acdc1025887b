"""Typed configuration sections from YAML data: frozen dataclasses built from mappings with their keys and value
types checked (:func:`build`, and :func:`plain` back to YAML data), and the field checks their ``__post_init__``
methods run. Every error is a :class:`~envs.core.errors.ConfigError` naming the full key (``section.field``, a
section's ``_where`` giving its prefix).
"""

from __future__ import annotations

import dataclasses
import math
import typing
from collections.abc import Mapping, Sequence

from envs.core.errors import ConfigError


def require(ok: bool, key: str, rule: str, value: object) -> None:
    """Raise ``ConfigError("key: rule, got value")`` unless ``ok``."""
    if not ok:
        raise ConfigError(f"{key}: {rule}, got {value!r}")


def field_key(obj: object, name: str) -> str:
    """The full key of field ``name`` of config section ``obj``, e.g. ``runtime.median_s``."""
    where = obj._where  # type: ignore[attr-defined]
    return f"{where}.{name}" if where else name


def check(obj: object, names: Sequence[str], ok: typing.Callable[[float], bool], rule: str) -> None:
    """Each field of ``names`` satisfies ``ok`` (every predicate used here is False for NaN)."""
    for name in names:
        require(ok(getattr(obj, name)), field_key(obj, name), rule, getattr(obj, name))


def positive(obj: object, *names: str) -> None:
    check(obj, names, lambda v: math.isfinite(v) and v > 0, "must be finite and > 0")


def non_negative(obj: object, *names: str) -> None:
    check(obj, names, lambda v: math.isfinite(v) and v >= 0, "must be finite and >= 0")


def probability(obj: object, *names: str) -> None:
    check(obj, names, lambda v: 0.0 <= v <= 1.0, "must be a probability in [0, 1]")


def choice(obj: object, values_name: str, probs_name: str) -> None:
    """Fields ``values_name`` and ``probs_name`` form a discrete distribution: same non-zero length, values > 0,
    probabilities >= 0 summing to 1."""
    values, values_key = getattr(obj, values_name), field_key(obj, values_name)
    require(len(values) > 0, values_key, "needs at least one value", values)
    require(all(math.isfinite(v) and v > 0 for v in values), values_key, "values must be finite and > 0", values)
    probabilities(obj, probs_name, values_name)


def probabilities(obj: object, probs_name: str, values_name: str) -> None:
    """Field ``probs_name`` holds one probability per entry of field ``values_name`` (numbers or names), each >= 0,
    summing to 1."""
    probs, values = getattr(obj, probs_name), getattr(obj, values_name)
    probs_key, values_key = field_key(obj, probs_name), field_key(obj, values_name)
    require(len(probs) == len(values), probs_key, f"needs one probability per value of {values_key}", probs)
    require(all(p >= 0 for p in probs), probs_key, "probabilities must be >= 0", probs)
    require(math.isclose(sum(probs), 1.0, abs_tol=1e-6), probs_key, "probabilities must sum to 1", probs)


def build(cls: type, data: object, path: str) -> typing.Any:
    """Instantiate dataclass ``cls`` from ``data``, checking keys and value types; ``path`` prefixes error keys."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{path or 'workload config'}: expected a mapping, got {data!r}")
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    for key in data:
        if key not in names:
            raise ConfigError(f"{path}{key}: unknown key (known: {', '.join(sorted(names))})")
    for f in dataclasses.fields(cls):
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        if required and f.name not in data:
            raise ConfigError(f"{path}{f.name}: missing required key")
    kwargs = {key: _convert(value, hints[key], f"{path}{key}") for key, value in data.items()}
    return cls(**kwargs)


def _convert(value: object, hint: object, key: str) -> object:
    """``value`` checked against type ``hint`` (scalars, tuples, frozensets, nested dataclasses)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if dataclasses.is_dataclass(hint):
        return build(hint, value, f"{key}.")  # type: ignore[arg-type]
    if origin in (tuple, frozenset):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{key}: expected a list, got {value!r}")
        items = [_convert(v, args[0], f"{key}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else frozenset(items)
    if hint is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        return _typed(ok, key, "a number", value, float)
    if hint is int:
        return _typed(isinstance(value, int) and not isinstance(value, bool), key, "an integer", value, int)
    if hint is bool:
        return _typed(isinstance(value, bool), key, "true or false", value, bool)
    return _typed(isinstance(value, str), key, "a string", value, str)


def _typed(ok: bool, key: str, what: str, value: object, kind: type) -> object:
    require(ok, key, f"expected {what}", value)
    return kind(value)


def plain(value: object) -> object:
    """Dataclasses → dicts, tuples → lists, frozensets → sorted lists; for YAML dumps and run folders."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, frozenset):
        return sorted(value)
    if isinstance(value, tuple):
        return [plain(v) for v in value]
    return value
