"""The run folder: ``results.csv`` (one row per run), ``timing.csv`` (wall-clock figures, machine-dependent),
``summary.json`` (per policy × case × metric: the mean over seeds and its bootstrap 95% interval), ``run.json`` (what
the run was: command, inputs and their digests, code version, seeds, metric docs, decision latency), the plots and
``report.html`` (:mod:`evaluation.html_report`).

``summary.json`` is a list of records, one per (policy, case, metric), that ``pandas.read_json`` reads as a table;
:data:`SUMMARY_RECORD_DOC` says what each field holds. The metric keys and their units are those of
:data:`evaluation.aggregate.METRIC_KEYS_DOC` (``mean_wait_s``, ``p95_wait_s``, ``mean_bsld``, ``utilization``, ...),
also written to ``run.json``'s ``metric_docs``. ``run.json``'s ``metrics_window`` holds the fractions of the jobs, by
submit time, that the metrics left out at the start and at the end ([0, 0]: the whole run); with a window,
``window_docs`` says what it does to each key (:data:`envs.core.metrics.WINDOW_DOCS`) and ``results.csv`` has a
``metrics_window`` column. :func:`read_summary` reads a run folder back as one document: the summary entries of
:func:`evaluation.aggregate.aggregate` under ``results``, beside ``run.json``'s fields.

``python -m evaluation.report RUN`` writes ``RUN/report.html`` again from the run folder's files.
"""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from envs.core.cli import ArgumentParser, run_cli
from envs.core.errors import ConfigError
from envs.core.files import write_atomically, write_text_atomically
from envs.core.metrics import WHOLE_RUN, WINDOW_DOCS
from evaluation.aggregate import METRIC_KEYS_DOC, aggregate, group_by
from evaluation.records import RUNS_FILE, read_records


def write_csv(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    """Rows as CSV, columns in first-row order (floats written with repr: exact round trip), written atomically."""
    def write(partial: Path) -> None:
        with partial.open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)

    write_atomically(path, write)


SUMMARY_RECORD_DOC: dict[str, str] = {
    "policy": "policy name",
    "workload": "the case: workload name with its window, load and scenario folded in (as in results.csv)",
    "cluster": "cluster name",
    "load": "load factor [dimensionless]",
    "scenario": "dynamics scenario: failures and outages (none: neither)",
    "window": "trace window, FIRST:END job indices ('' : the whole workload)",
    "n_seeds": "runs (seeds) averaged [count]",
    "metric": "metric key; its meaning and unit are in run.json's metric_docs",
    "mean": "mean over the seeds, in the metric's unit",
    "ci95_low": "low bound of the percentile-bootstrap 95% interval of the mean, in the metric's unit",
    "ci95_high": "high bound of that interval, in the metric's unit",
}
"""The fields of one record of summary.json."""

ENTRY_FIELDS = ("policy", "workload", "cluster", "load", "scenario", "window", "n_seeds")
"""The fields a summary record copies from its summary entry (:func:`evaluation.aggregate.aggregate`)."""
SUMMARY_FILE, RUN_FILE, REPORT_FILE = "summary.json", "run.json", "report.html"


def summary_records(entries: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """summary.json's records (:data:`SUMMARY_RECORD_DOC`): one per metric of each summary entry, in order."""
    return [{**{key: entry.get(key) for key in ENTRY_FIELDS}, "metric": metric, "mean": mean,
             "ci95_low": entry["ci95"][metric][0], "ci95_high": entry["ci95"][metric][1]}
            for entry in entries for metric, mean in entry["metrics"].items()]


def summary_entries(records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The summary entries that :func:`summary_records` wrote as ``records`` (its inverse), in first-appearance
    order of (policy, workload)."""
    entries: dict[tuple[Any, Any], dict[str, Any]] = {}
    for record in records:
        key = (record["policy"], record["workload"])
        entry = entries.setdefault(key, {**{k: record.get(k) for k in ENTRY_FIELDS}, "metrics": {}, "ci95": {}})
        entry["metrics"][record["metric"]] = record["mean"]
        entry["ci95"][record["metric"]] = [record["ci95_low"], record["ci95_high"]]
    return list(entries.values())


def build_run_info(timings: Sequence[dict[str, Any]], runs: int, metrics_window: tuple[float, float] = WHOLE_RUN,
                   skipped: Mapping[str, Mapping[str, int]] | None = None,
                   provenance: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The content of run.json: ``provenance`` (:func:`evaluation.provenance.run_provenance`: command, inputs and
    their digests, code version, seeds, the run keys), the metric docs, the mean p50 and p99 decision latency of
    each policy [µs], the number of runs, the metrics window and the trace records the loaders skipped (per trace,
    by reason)."""
    latency = {
        policy: {"p50": float(np.mean([t["decision_p50_us"] for t in runs])),
                 "p99": float(np.mean([t["decision_p99_us"] for t in runs]))}
        for policy, runs in group_by(timings, lambda t: t["policy"]).items()
    }
    window = {} if metrics_window == WHOLE_RUN else {"window_docs": dict(WINDOW_DOCS)}
    return {**dict(provenance or {}), "metric_docs": dict(METRIC_KEYS_DOC), "decision_latency_us": latency,
            "runs": runs, "metrics_window": list(metrics_window), **window, "skipped_records": dict(skipped or {})}


def write_run_folder(out: Path, rows: Sequence[dict[str, Any]], traces: Sequence[dict[str, Any]],
                     timings: Sequence[dict[str, Any]], plots: bool = True,
                     metrics_window: tuple[float, float] = WHOLE_RUN,
                     skipped: Mapping[str, Mapping[str, int]] | None = None,
                     provenance: Mapping[str, Any] | None = None) -> tuple[dict[str, Any], list[Path]]:
    """Write results.csv, timing.csv, summary.json, run.json and, with ``plots``, the plots (matplotlib) and
    report.html (plotly); return the summary document (:func:`read_summary`'s) and the files drawn.

    ``metrics_window``: the (head, tail) window of the rows' metrics; ``skipped``: per trace, the records its loader
    skipped by reason; ``provenance``: what the run was (:func:`build_run_info`). A missing plotting library skips
    its files with a one-line note on standard error."""
    out.mkdir(parents=True, exist_ok=True)
    write_csv(out / "results.csv", rows)
    write_csv(out / "timing.csv", timings)
    entries = aggregate(rows)
    info = build_run_info(timings, len(rows), metrics_window, skipped, provenance)
    write_text_atomically(out / SUMMARY_FILE, json.dumps(summary_records(entries), indent=1))
    write_text_atomically(out / RUN_FILE, json.dumps(info, indent=2))
    document = {"results": entries, **info}
    return document, (_draw(out, document, traces, rows) if plots else [])


def _draw(out: Path, document: Mapping[str, Any], traces: Sequence[dict[str, Any]],
          rows: Sequence[dict[str, Any]]) -> list[Path]:
    """The plots and report.html of a run folder; a missing library is a one-line note, not an error."""
    drawn: list[Path] = []
    try:
        from evaluation.plots import plot_all

        drawn += plot_all(document["results"], traces, out, metrics_window=tuple(document["metrics_window"]))
    except ImportError as exc:
        print(f"no plots: {exc}", file=sys.stderr)
    try:
        from evaluation.html_report import write_report

        drawn.append(write_report(out / REPORT_FILE, document, traces, rows))
    except ImportError as exc:
        print(f"no report.html: {exc}", file=sys.stderr)
    return drawn


def read_summary(folder: Path) -> dict[str, Any]:
    """A run folder's summary document: its summary entries (summary.json read back) under ``results``, beside
    run.json's fields. A :class:`ConfigError` naming the file when one is missing or is not what it should be."""
    records = _read_json(folder / SUMMARY_FILE, list)
    info = _read_json(folder / RUN_FILE, dict)
    try:
        return {"results": summary_entries(records), **info}
    except (KeyError, TypeError, IndexError) as exc:
        raise ConfigError(f"{folder / SUMMARY_FILE}: not a summary written by evaluate.py ({exc!r})") from None


def _read_json(path: Path, kind: type) -> Any:
    """The JSON document of ``path``, which must be a ``kind``; a one-line :class:`ConfigError` otherwise."""
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not JSON ({exc})") from None
    if not isinstance(data, kind):
        raise ConfigError(f"{path}: expected a JSON {'list' if kind is list else 'object'}")
    return data


def folder_runs(folder: Path) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """A run folder's summary document, and the traces and rows of the runs it names (``run_keys``) in runs.jsonl,
    in order; a :class:`ConfigError` when one is missing."""
    document = read_summary(folder)
    records = read_records(folder, "evaluation.report", repair=False)  # a rebuild changes no file but the report
    keys = document.get("run_keys") or list(records)
    if not isinstance(keys, list) or not all(isinstance(key, str) for key in keys):
        raise ConfigError(f"{folder / RUN_FILE}: run_keys: expected a list of run keys (text)")
    missing = [key for key in keys if key not in records]
    if missing:
        raise ConfigError(f"{folder / RUNS_FILE}: {len(missing)} of the {len(keys)} runs of run.json are not there")
    runs = [records[key] for key in keys]
    return document, [trace for _, trace, _ in runs], [row for row, _, _ in runs]


def rebuild_report(folder: Path) -> list[Path]:
    """Write a run folder's report.html again from its files; for a train.py run folder, its final evaluation's
    (``eval/``, when there) and its own, with the learning curves. Returns the paths written."""
    from evaluation.html_report import write_report
    from evaluation.training_report import is_training_folder

    if not is_training_folder(folder):
        return [write_report(folder / REPORT_FILE, *folder_runs(folder))]
    final = folder / "eval"
    if not (final / SUMMARY_FILE).is_file():
        return [write_training_page(folder)]
    document, traces, rows = folder_runs(final)
    return [write_report(final / REPORT_FILE, document, traces, rows), write_training_page(folder, document, rows)]


def write_training_page(folder: Path, document: dict[str, Any] | None = None,
                        rows: Sequence[dict[str, Any]] = ()) -> Path:
    """Write a train.py run folder's report.html: its learning curves beside its final evaluation's table, that of
    ``document`` and ``rows`` when given, else read from ``eval/`` (none yet when it has no summary)."""
    from evaluation.training_report import write_training_report

    final = folder / "eval"
    if document is None and (final / SUMMARY_FILE).is_file():
        document, _, rows = folder_runs(final)
    return write_training_report(folder, document, rows)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m evaluation.report RUN``: write a run folder's report.html again (an evaluate.py run folder, or a
    train.py one: its learning curves and final table)."""
    parser = ArgumentParser(prog="python -m evaluation.report", description=main.__doc__)
    parser.add_argument("run", type=Path, help="the run folder of an evaluate.py or a train.py run")
    parser.add_argument("--screenshot", type=Path, metavar="PNG", help="also save a PNG of the report's top "
                        "(headless Chromium: evaluation/browser.py)")
    args = parser.parse_args(argv)
    return run_cli("evaluation.report", lambda: _rebuild(args.run, args.screenshot), False)


def _rebuild(folder: Path, png: Path | None) -> int:
    """Rebuild ``folder``'s report, and save its screenshot at ``png`` when given; print what was written."""
    paths = rebuild_report(folder)
    for path in paths:
        print(f"wrote {path}")
    if png is not None:
        from evaluation.browser import screenshot

        print(f"wrote {screenshot(paths[-1], png)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
