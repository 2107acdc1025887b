"""Human-readable labels for figures, tables and reports: metric titles and units, short policy names, wrapped
workload names and a line saying what a metrics window left out.

Metrics: :func:`metric_unit` reads the unit from the trailing brackets of the key's meaning in
:data:`evaluation.aggregate.METRIC_KEYS_DOC` (``"mean of the wait ... [s]"`` → ``"s"``); :func:`metric_title` makes
a short title from the key's words (``mean_wait_s`` → "Mean wait": unit suffixes dropped, ``bsld``, ``jct``,
``gpu`` spelled out or capitalised), with :data:`METRIC_TITLES` overriding the keys whose words read badly;
:func:`metric_label` is the axis label, title and unit (``"Mean wait [s]"``).

Policies: a trained model's policy name is its file's path (``runs/train-default-20261201-101010/model.zip``,
``rls:runs/x/model.zip+sjf@0.5``). :func:`policy_label` names it by its run folder instead, keeping the ``rls:``
prefix, the ``+ORDER@RATIO`` decoding and which file of the run it is (``best_model.zip`` → ``x (best)``, a
checkpoint ``x/checkpoints/model_2000_steps.zip`` → ``x (2000 steps)``); every other name is its own label.
:func:`policy_labels` labels several names at once and keeps the labels distinct: two models whose short labels
collide get more of their folders (``a/x``, ``b/x``), and names that still collide keep their full text.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import PurePath

from agents.model_file import CHECKPOINT_DIR
from agents.peer_policy import is_model_name, parse_model_name
from baselines.registry import RLS_PREFIX
from envs.core.errors import ConfigError
from envs.core.metrics import WHOLE_RUN
from evaluation.aggregate import METRIC_KEYS_DOC

DIMENSIONLESS = "dimensionless"
"""The unit of a pure number (the bounded slowdown): axis labels leave it out."""

METRIC_TITLES: dict[str, str] = {
    "n_jobs": "Jobs submitted",
    "n_completed": "Jobs completed",
    "n_rejected": "Jobs rejected",
    "n_failed": "Jobs failed",
    "timed_out": "Jobs timed out",
    "utilization": "GPU utilization",
    "jain_fairness": "Jain's fairness index",
    "sim_wall_s": "Simulation wall time",
    "decision_p50_us": "Decision latency, median",
    "decision_p99_us": "Decision latency, P99",
    **{f"{stat}_wait_s_{end}_class": f"{stat.capitalize()} wait, {end} priority class"
       for stat in ("mean", "p95") for end in ("top", "bottom")},
}
"""Titles of the metric keys whose words alone read badly; :func:`metric_title` makes the others."""

_UNIT_WORDS = {"s", "us"}
"""Key words that only name the unit (``mean_wait_s``, ``decision_p50_us``): left out of titles."""
_WORDS = {"bsld": "bounded slowdown", "jct": "JCT", "gpu": "GPU", "gpus": "GPUs", "cpu": "CPU", "ram": "RAM",
          "mig": "MIG", "p50": "P50", "p95": "P95", "p99": "P99"}
"""Key words spelled out or capitalised in titles."""


def metric_unit(key: str) -> str:
    """The unit of metric ``key``: the trailing brackets of its meaning in :data:`METRIC_KEYS_DOC` (``"s"``,
    ``"fraction"``, ``"count"``, ``"GPU-hours"``, :data:`DIMENSIONLESS`, ...); ``""`` for an undocumented key."""
    match = re.search(r"\[([^\[\]]+)\]\s*$", METRIC_KEYS_DOC.get(key, ""))
    return match[1] if match else ""


def metric_title(key: str) -> str:
    """A short title of metric ``key`` (``mean_wait_s`` → "Mean wait", ``p95_bsld`` → "P95 bounded slowdown"):
    :data:`METRIC_TITLES`'s, else the key's words without the unit suffix, first letter capitalised."""
    if key in METRIC_TITLES:
        return METRIC_TITLES[key]
    words = [_WORDS.get(word, word) for word in key.split("_") if word and word not in _UNIT_WORDS]
    text = " ".join(words).replace("GPU hours", "GPU-hours") or key
    return text[0].upper() + text[1:]


def metric_label(key: str) -> str:
    """An axis label of metric ``key``: its title and unit (``"Mean wait [s]"``); the title alone for a
    dimensionless or undocumented key."""
    unit = metric_unit(key)
    title = metric_title(key)
    return f"{title} [{unit}]" if unit and unit != DIMENSIONLESS else title


def _model_parts(name: str) -> tuple[str, str, str] | None:
    """(the ``rls:`` prefix as written or "", the model file's path, the decoding suffix as written or "") of a
    model's policy name; None for any other name, or a model's with a malformed decoding suffix."""
    name = name.strip()
    cut = len(RLS_PREFIX) if name.lower().startswith(RLS_PREFIX) else 0
    rest = name[cut:]
    if not is_model_name(rest):
        return None
    try:
        path = parse_model_name(rest)[0]
    except ConfigError:
        return None
    return name[:cut], path, rest[len(path):]


def _run_folders(path: str) -> tuple[str, ...]:
    """The folders above model file ``path`` that name its run (above ``checkpoints/`` for a checkpoint), without
    the root."""
    parent = PurePath(path).parent
    folders = parent.parts[1:] if parent.anchor else parent.parts
    return folders[:-1] if folders and folders[-1] == CHECKPOINT_DIR else folders


def _model_label(path: str, depth: int) -> str:
    """Model file ``path`` named by the last ``depth`` (at least 1) folders of its run and which file of the run it
    is: nothing for ``model``, "best" for ``best_model``, the file's name less ``model_`` for others."""
    run = "/".join(_run_folders(path)[-depth:])
    stem = PurePath(path).stem
    which = "" if stem == "model" else "best" if stem == "best_model" else stem.removeprefix("model_").replace("_", " ")
    if not run:
        return stem
    return f"{run} ({which})" if which else run


def _label(name: str, depth: int) -> str:
    """``name``'s label with ``depth`` folders of a model's run (module docstring): ``name`` itself for a name that
    is not a model's, or when the run has fewer folders."""
    parts = _model_parts(name)
    if parts is None or depth > max(len(_run_folders(parts[1])), 1):
        return name
    prefix, path, suffix = parts
    return prefix + _model_label(path, depth) + suffix


def policy_label(name: str) -> str:
    """A short label of policy ``name``: a model by its run folder's name (``runs/x/model.zip`` → ``x``,
    ``runs/x/best_model.zip`` → ``x (best)``, ``rls:runs/x/model.zip+sjf@0.5`` → ``rls:x+sjf@0.5``), any other
    name as it is. Labels of different names may collide: :func:`policy_labels` keeps them apart."""
    return _label(name, 1)


def policy_labels(names: Iterable[str]) -> dict[str, str]:
    """A distinct label per distinct name of ``names`` (in first-appearance order): :func:`policy_label`'s, with
    more of a model's folders while it collides with another name's label, and the full name where folders run
    out."""
    depth = dict.fromkeys(names, 1)
    while True:
        labels = {name: _label(name, level) for name, level in depth.items()}
        counts = Counter(labels.values())
        clashing = [name for name, label in labels.items() if counts[label] > 1 and label != name]
        if not clashing:
            return labels
        for name in clashing:
            depth[name] += 1


def _breakable(text: str) -> list[str]:
    """``text`` cut into pieces that a line may end after: after a space, ``/``, ``_``, ``,``, ``:``, ``+`` or
    ``-``, and before ``[``, ``(`` or ``@``."""
    return [piece for piece in re.split(r"(?<=[ /_,:+-])|(?=[\[(@])", text) if piece]


def wrap_label(text: str, width: int) -> str:
    """``text`` on lines of at most ``width`` characters (at least 1), joined by newlines, for tick labels and
    titles. Lines break where :func:`_breakable` allows; a piece longer than ``width`` is cut. Names such as
    ``philly_trace.csv.gz[100000:102000]@30 (high)`` have no spaces to break at, which is why this is not
    :func:`textwrap.wrap`."""
    width = max(width, 1)
    lines = [""]
    for piece in _breakable(text):
        if lines[-1] and len(lines[-1]) + len(piece.rstrip()) > width:
            lines.append("")
        lines[-1] += piece
        while len(lines[-1].rstrip()) > width:
            lines[-1], rest = lines[-1][:width], lines[-1][width:]
            lines.append(rest)
    return "\n".join(line.strip() for line in lines if line.strip())


def window_label(window: Sequence[float] = WHOLE_RUN) -> str:
    """What a metrics window (``(head, tail)`` fractions of the jobs) leaves out, for a figure's or a table's
    caption: ``"first 10% and last 10% of the jobs by submit time left out"``; ``""`` for the whole run."""
    head, tail = (float(part) for part in window)
    ends = [f"{end} {fraction * 100:g}%" for end, fraction in (("first", head), ("last", tail)) if fraction > 0]
    return f"{' and '.join(ends)} of the jobs by submit time left out" if ends else ""
