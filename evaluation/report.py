"""The run folder: ``results.csv`` (one row per run), ``timing.csv`` (wall-clock figures, machine-dependent),
``summary.json`` (per policy × workload means and bootstrap 95% intervals) and the plots.

``summary.json`` = ``{"results": [{"policy", "workload", "cluster", "n_seeds", "metrics": {...}, "ci95": {...}}],
"decision_latency_us": {policy: {"p50", "p99"}}, "metric_docs": {key: meaning and unit}, "runs": n,
"metrics_window": [head, tail]}``; the metric keys and their units are those of
:data:`envs.core.metrics.METRIC_DOCS` (``mean_wait_s``, ``p95_wait_s``, ``mean_bsld``, ``mean_jct_s``,
``utilization``, ``makespan_s``, ...). ``metrics_window`` holds the fractions of the jobs, by submit time, that the
metrics left out at the start and at the end ([0, 0]: the whole run); with a window, ``window_docs`` says what it
does to each key (:data:`envs.core.metrics.WINDOW_DOCS`) and ``results.csv`` has a ``metrics_window`` column.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from envs.core.files import write_atomically, write_text_atomically
from envs.core.metrics import METRIC_DOCS, WHOLE_RUN, WINDOW_DOCS
from evaluation.aggregate import aggregate, group_by


def write_csv(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    """Rows as CSV, columns in first-row order (floats written with repr: exact round trip), written atomically."""
    def write(partial: Path) -> None:
        with partial.open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)

    write_atomically(path, write)


def build_summary(rows: Sequence[dict[str, Any]], timings: Sequence[dict[str, Any]],
                  metrics_window: tuple[float, float] = WHOLE_RUN) -> dict[str, Any]:
    """The content of summary.json; ``metrics_window``: the (head, tail) window the rows' metrics were computed
    with."""
    latency = {
        policy: {"p50": float(np.mean([t["decision_p50_us"] for t in runs])),
                 "p99": float(np.mean([t["decision_p99_us"] for t in runs]))}
        for policy, runs in group_by(timings, lambda t: t["policy"]).items()
    }
    window = {} if metrics_window == WHOLE_RUN else {"window_docs": dict(WINDOW_DOCS)}
    return {"results": aggregate(rows), "decision_latency_us": latency, "metric_docs": dict(METRIC_DOCS),
            "runs": len(rows), "metrics_window": list(metrics_window), **window}


def write_run_folder(out: Path, rows: Sequence[dict[str, Any]], traces: Sequence[dict[str, Any]],
                     timings: Sequence[dict[str, Any]], plots: bool = True,
                     metrics_window: tuple[float, float] = WHOLE_RUN,
                     skipped: Mapping[str, Mapping[str, int]] | None = None) -> tuple[dict[str, Any], list[Path]]:
    """Write results.csv, timing.csv, summary.json and (if matplotlib is there) the plots; return the summary.
    ``metrics_window``: the (head, tail) window of the rows' metrics, recorded in summary.json; ``skipped``: per
    trace, the records its loader skipped by reason (summary.json's ``skipped_records``)."""
    out.mkdir(parents=True, exist_ok=True)
    write_csv(out / "results.csv", rows)
    write_csv(out / "timing.csv", timings)
    summary = {**build_summary(rows, timings, metrics_window), "skipped_records": dict(skipped or {})}
    write_text_atomically(out / "summary.json", json.dumps(summary, indent=2))
    figures: list[Path] = []
    if plots:
        from evaluation.plots import plot_all

        figures = plot_all(summary["results"], traces, out)
    return summary, figures
