"""Aggregate per-run result rows over seeds (SPEC §9): means, bootstrap 95 % confidence intervals, Markdown tables.

A *row* is the flat dict of one run (policy × workload × seed × load): the identifying keys :data:`ID_KEYS` plus
every key of :func:`envs.core.metrics.summarize` and the run keys of :data:`RUN_KEYS_DOC`. :func:`aggregate` turns the
rows into one *summary entry* per (policy, workload), whose fields :data:`SUMMARY_FIELDS_DOC` documents; the units of
every metric are in :data:`METRIC_KEYS_DOC`.

The confidence interval is a percentile bootstrap of the mean over the group's rows: resample the rows with
replacement ``n_boot`` times, take the 2.5th and 97.5th percentiles of the resampled means. All metrics of a group
share the same resampled rows, and every group draws from a fresh generator seeded with the same ``seed``, so a
group's interval does not depend on which other groups are in the table, and groups with equally many rows are
resampled identically (common random numbers: seed-paired comparisons between policies stay paired). The bounds are
clipped to the [min, max] of the group's values, which removes floating-point overshoot (a constant metric gets
exactly [value, value]). With a single row the interval is [value, value].
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np

from envs.core.metrics import METRIC_DOCS

ID_KEYS = ("policy", "workload", "cluster", "seed", "load", "scenario", "window", "metrics_window")
"""Keys of a row that identify the run; every other key is a numeric metric. ``workload`` names the case in tables
(the workload with its window, load and scenario folded in: ``philly[0:1024]@1.5 (high)``); ``scenario`` (the
dynamics scenario, ``none`` without failures or outages) and ``window`` (``FIRST:END`` job indices of a trace, ""
for a whole workload) are its parts as columns of their own. ``metrics_window`` (``"HEAD,TAIL"``,
the fractions of the jobs the metrics left out at each end) is there only in the rows of a steady-state window."""

CI_LEVEL = 0.95
"""Coverage of the bootstrap confidence intervals [fraction]."""

DEFAULT_TABLE_KEYS = ("mean_wait_s", "p95_wait_s", "mean_bsld", "utilization", "makespan_s")
"""Metrics shown by :func:`markdown_table` unless told otherwise."""

RUN_KEYS_DOC: dict[str, str] = {
    "decision_p50_us": "median wall-clock latency of one policy decision [µs]",
    "decision_p99_us": "99th percentile of the wall-clock latency of one policy decision [µs]",
    "sim_wall_s": "wall-clock time of the whole simulation run [s]",
}
"""Metric keys of a row that the harness adds to :func:`envs.core.metrics.summarize`'s (wall-clock, not simulated)."""

METRIC_KEYS_DOC: dict[str, str] = {**METRIC_DOCS, **RUN_KEYS_DOC}
"""Every metric key of a row (and of a summary entry's ``metrics`` and ``ci95``), with its meaning and unit."""

SUMMARY_FIELDS_DOC: dict[str, str] = {
    "policy": "policy name",
    "workload": "workload name",
    "cluster": "cluster name (of the group's first row)",
    "load": "load factor of the rows, None when they differ [dimensionless]",
    "scenario": "dynamics scenario of the rows (none: no failures or outages), None when they differ",
    "window": "trace window of the rows, FIRST:END job indices ('' : the whole workload), None when they differ",
    "n_seeds": "number of rows (runs) aggregated [count]",
    "metrics": "mean over the rows of every metric key (see METRIC_KEYS_DOC for units)",
    "ci95": "[low, high] percentile-bootstrap 95 % confidence interval of each mean, in the metric's unit",
}
"""The fields of one summary entry returned by :func:`aggregate` (as written to summary.json)."""

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)


def group_by(items: Iterable[T], key: Callable[[T], K]) -> dict[K, list[T]]:
    """``items`` grouped by ``key(item)``, groups and their members in first-appearance order."""
    groups: dict[K, list[T]] = {}
    for item in items:
        groups.setdefault(key(item), []).append(item)
    return groups


def metric_keys(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The metric keys of ``rows`` (every key but :data:`ID_KEYS`), in the first row's order.

    Raises ``ValueError`` when a row lacks one of them or a value is not a number.
    """
    keys = [key for key in rows[0] if key not in ID_KEYS]
    for i, row in enumerate(rows):
        missing = [key for key in keys if key not in row]
        if missing:
            raise ValueError(f"row {i} ({row.get('policy')!r} on {row.get('workload')!r}) lacks {missing}")
        bad = [key for key in keys if not isinstance(row[key], (int, float, np.number))]
        if bad:
            raise ValueError(f"row {i} ({row.get('policy')!r} on {row.get('workload')!r}): {bad} not numbers")
    return keys


def bootstrap_ci(values: np.ndarray, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """Percentile-bootstrap :data:`CI_LEVEL` interval of the column means of ``values`` (rows × metrics).

    Returns an array (metrics × 2) of [low, high], clipped to each column's [min, max]; [v, v] for one row.
    """
    n_rows = values.shape[0]
    lo, hi = values.min(axis=0), values.max(axis=0)
    if n_rows == 1:
        return np.stack([lo, hi], axis=1)
    draws = rng.integers(0, n_rows, size=(n_boot, n_rows))
    means = values[draws].mean(axis=1)  # (n_boot, metrics)
    tail = 100 * (1 - CI_LEVEL) / 2
    low, high = np.percentile(means, [tail, 100 - tail], axis=0)
    return np.stack([np.clip(low, lo, hi), np.clip(high, lo, hi)], axis=1)


CASE_PARTS = ("load", "scenario", "window")
"""The parts of a case (a row's ``workload``) that a summary entry carries as fields of their own."""


def _common(rows: Sequence[Mapping[str, Any]], key: str) -> Any:
    """The value of ``key`` in every row, or None when the rows differ."""
    values = {row.get(key) for row in rows}
    return values.pop() if len(values) == 1 else None


def _check_unique(rows: Sequence[Mapping[str, Any]]) -> None:
    """Two rows for the same (policy, workload, seed, load) would be averaged as if they were different seeds."""
    seen: set[tuple[Any, ...]] = set()
    for row in rows:
        key = (row["policy"], row["workload"], row.get("seed"), row.get("load"))
        if key in seen:
            raise ValueError(f"two runs share policy, workload, seed and load {key}: give the workloads distinct names")
        seen.add(key)


def aggregate(rows: Iterable[Mapping[str, Any]], n_boot: int = 2000, seed: int = 0) -> list[dict[str, Any]]:
    """One summary entry per (policy, workload) of ``rows``, in first-appearance order (module docstring).

    Each entry is ``{"policy", "workload", "cluster", "load", "scenario", "window", "n_seeds", "metrics": {key:
    mean}, "ci95": {key: [low, high]}}`` (:data:`SUMMARY_FIELDS_DOC`; the case's parts where the rows have them); the
    means and bounds are floats in the metric's unit. Deterministic for a given ``seed``. Rows of different loads are
    pooled: give each load its own workload name to keep them apart.
    """
    if n_boot < 1:
        raise ValueError(f"n_boot must be at least 1, got {n_boot}")
    rows = list(rows)
    _check_unique(rows)
    summary = []
    for (policy, workload), group in group_by(rows, lambda row: (row["policy"], row["workload"])).items():
        keys = metric_keys(group)
        values = np.array([[float(row[key]) for key in keys] for row in group], dtype=np.float64)
        ci = bootstrap_ci(values, n_boot, np.random.default_rng(seed))
        summary.append(
            {
                "policy": policy,
                "workload": workload,
                "cluster": group[0].get("cluster", ""),
                **{key: _common(group, key) for key in CASE_PARTS if key in group[0]},
                "n_seeds": len(group),
                "metrics": {key: float(mean) for key, mean in zip(keys, values.mean(axis=0), strict=True)},
                "ci95": {key: [float(low), float(high)] for key, (low, high) in zip(keys, ci, strict=True)},
            }
        )
    return summary


def _decimals(value: float) -> int:
    """Decimal places that show ``value`` with about three significant digits (none at or above 1000)."""
    magnitude = abs(value)
    if magnitude >= 1000:
        return 0
    if magnitude >= 100:
        return 1
    if magnitude >= 1 or magnitude == 0 or not math.isfinite(magnitude):
        return 2
    return min(6, 2 - math.floor(math.log10(magnitude)))


def format_number(value: float, decimals: int | None = None) -> str:
    """``value`` for a table: thousands separators, about three significant digits unless ``decimals`` is given."""
    return f"{value:,.{_decimals(value) if decimals is None else decimals}f}"


def format_interval(mean: float, low: float, high: float, decimals: int | None = None) -> str:
    """``mean [low, high]`` for a table, all three at the mean's precision (:func:`format_number`) unless
    ``decimals`` is given: ``"12.30 [8.10, 15.00]"``."""
    places = _decimals(mean) if decimals is None else decimals
    return f"{format_number(mean, places)} [{format_number(low, places)}, {format_number(high, places)}]"


def format_cell(entry: Mapping[str, Any], key: str) -> str:
    """One table cell: "mean [low, high]", the mean and the bounds of its 95 % CI, all at the mean's precision
    (:func:`format_interval`); the mean alone with a single seed; "—" when the entry lacks ``key``."""
    if key not in entry["metrics"]:
        return "—"
    mean = entry["metrics"][key]
    if entry["n_seeds"] <= 1:
        return format_number(mean)
    low, high = entry["ci95"][key]
    return format_interval(mean, low, high)


def _escape(text: object) -> str:
    return str(text).replace("|", "\\|")


def markdown_table(summary: Sequence[Mapping[str, Any]], keys: Sequence[str] = DEFAULT_TABLE_KEYS) -> str:
    """A Markdown table of ``summary`` (from :func:`aggregate`): one row per (policy, workload), one column per
    metric key, cells as :func:`format_cell` writes them. No trailing newline."""
    return comparison_table({"": summary}, keys)


def comparison_table(summaries: Mapping[str, Sequence[Mapping[str, Any]]],
                     keys: Sequence[str] = DEFAULT_TABLE_KEYS) -> str:
    """A Markdown table of labelled summaries of the same runs side by side (``{"whole run": ..., "steady state":
    ...}``, each from :func:`aggregate`): one row per (policy, workload) of the first summary, its seeds, and for
    each metric key one column per summary, headed ``key (label)`` (``key`` for an empty label); cells as
    :func:`format_cell` writes them, "—" where a summary lacks the (policy, workload). No trailing newline."""
    labels = list(summaries)
    tables = [{(e["policy"], e["workload"]): e for e in summary} for summary in summaries.values()]
    columns = [f"{key} ({label})" if label else key for key in keys for label in labels]
    lines = [
        "| " + " | ".join(_escape(name) for name in ["policy", "workload", "seeds", *columns]) + " |",
        "|---|---|---:|" + "---:|" * len(columns),
    ]
    for entry in summaries[labels[0]]:
        run = (entry["policy"], entry["workload"])
        cells = [entry["policy"], entry["workload"], entry["n_seeds"],
                 *(format_cell(table[run], key) if run in table else "—" for key in keys for table in tables)]
        lines.append("| " + " | ".join(_escape(cell) for cell in cells) + " |")
    return "\n".join(lines)
