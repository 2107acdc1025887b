"""One schema layer for the files users write: each file kind is a pydantic v2 model that declares every field's type,
range and finiteness once (:class:`FileModel`), and :func:`validated` turns the first thing wrong into the project's
one-line :class:`~envs.core.errors.ConfigError` naming the file (or flag), the key and the value. The same models
give the JSON Schemas in ``docs/schemas/`` (``python docs/make_schemas.py``), so that an editor completes and
checks the YAML.

Models are strict about types (``"3"`` is not a number, ``true`` is not 1; an integer is a number), forbid unknown
keys, and refuse NaN and infinities unless a field says otherwise.
"""

from __future__ import annotations

import re
import typing
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from envs.core.errors import ConfigError

M = TypeVar("M", bound=BaseModel)

_TYPE_TAG = re.compile(r"^(?:float|int|str|bool|list|dict|tuple|none|literal)$|[\[\-'(]")
"""Entries of a pydantic error location that name a type of a union, not a key (``float``, ``dict[str,float]``,
``function-after[...]``)."""


class FileModel(BaseModel):
    """The base of every file schema: unknown keys refused, types strict, no NaN or infinity, read-only."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)


def location(loc: tuple[Any, ...]) -> str:
    """A pydantic error location as the key a user wrote: ``failures.schedule[0].node``."""
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        elif not _TYPE_TAG.search(str(part)):
            text += f".{part}" if text else str(part)
    return text


def _model_at(model: type[BaseModel], loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The model that holds the key at ``loc`` (the location of an unknown key), or None when none does."""
    for part in loc[:-1]:
        if isinstance(part, int) or _TYPE_TAG.search(str(part)):
            continue
        field = model.model_fields.get(str(part))
        found = _model_in(field.annotation) if field is not None else None
        if found is None:
            return None
        model = found
    return model


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The first model class inside a type annotation (``X | None``, ``list[X]``), or None."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def validated(model: type[M], data: Any, where: str) -> M:
    """``data`` checked by ``model``; the first thing wrong is a one-line :class:`ConfigError`
    ``{where}: KEY: what was wrong, got VALUE`` (``where`` names the file or flag). Of the errors of a value that
    may take several forms (a number or a mapping), the one deepest in the data is reported; an unknown key comes
    before anything else."""
    try:
        return model.model_validate({} if data is None else data)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        # an unknown key first (a misspelt key explains the missing one), then the first of the deepest
        error = max(errors, key=lambda e: (e["type"] == "extra_forbidden", len(location(e["loc"]))))
        key = location(error["loc"])
        message = error["msg"][:1].lower() + error["msg"][1:]
        message = re.sub(r" or instance of \w+", "", message).removeprefix("value error, ")
        value = error.get("input")
        shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
        if error["type"] == "extra_forbidden":
            holder = _model_at(model, error["loc"])
            allowed = f" (allowed: {', '.join(holder.model_fields)})" if holder is not None else ""
            raise ConfigError(f"{where}: {key}: unknown key{allowed}") from None
        if error["type"] == "literal_error" and "[key]" in map(str, error["loc"]):  # a key of a closed set
            raise ConfigError(f"{where}: {key}: unknown key (allowed: {error['ctx']['expected']})") from None
        if error["type"] == "missing":
            raise ConfigError(f"{where}: {key}: missing") from None
        raise ConfigError(f"{where}: {key + ': ' if key else ''}{message}, got {shown}") from None
