"""One rule for numbers read from text: trace and export fields, node inventories and command-line values.

Python's ``float()`` and ``int()`` accept more than a trace or a flag means: underscores (``3_0`` is 30),
non-ASCII digits (``٣`` is 3, while ``str.isdigit`` also accepts ``²``, which ``int`` refuses), ``inf``, ``nan`` and
surrounding whitespace; and ``int()`` refuses more than 4,300 digits with an error of its own. Here a number is
plain ASCII:

- a decimal: an optional sign, digits with an optional decimal point (``12``, ``12.``, ``.5``, ``1.5``), and an
  optional exponent (``e-3``);
- an integer: an optional sign and at most :data:`MAX_INTEGER_DIGITS` digits.

Anything else is no number (None), and callers turn that into their one-line error naming the field. A decimal
too large for a float (``1e999``) reads as ``inf``: callers that need finite values say so.
"""

from __future__ import annotations

import re

MAX_CHARS = 64
"""The longest text read as a number (longer is no number: no field of a trace needs more)."""
MAX_INTEGER_DIGITS = 18
"""The most digits of an integer (up to 10¹⁸, inside a 64-bit integer)."""

_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_INTEGER = re.compile(rf"[+-]?[0-9]{{1,{MAX_INTEGER_DIGITS}}}")


def decimal(text: str) -> float | None:
    """``text`` as a float when it is a plain ASCII decimal (module docstring; ``inf`` when it overflows), else
    None."""
    if len(text) > MAX_CHARS or _DECIMAL.fullmatch(text) is None:
        return None
    return float(text)


def integer(text: str) -> int | None:
    """``text`` as an int when it is a plain ASCII integer of at most :data:`MAX_INTEGER_DIGITS` digits, else
    None."""
    if len(text) > MAX_CHARS or _INTEGER.fullmatch(text) is None:
        return None
    return int(text)
