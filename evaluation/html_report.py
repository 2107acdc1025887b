"""report.html: one self-contained page per run folder that opens offline (plotly.js inlined, no CDN).

The page holds, in order: what the run was (command, code version and git commit, seeds, input files with their
SHA-256, the metrics window, skipped trace records and rejected jobs); the comparison table, per case, with each
mean and its 95% interval as ``mean [low, high]`` and the mean wait paired seed by seed against the case's
reference; interactive wait CDFs, GPU utilization over time and per-metric bars with units
(:mod:`evaluation.report_charts`); and a Gantt chart of a chosen run (policy × case × seed), coloured by a chosen
field, whose jobs show their record on hover (``gantt.js``).

The *reference* of a case here is the policy with the lowest mean wait on the run's own seeds: it is chosen on the
seeds it is compared on, so the paired column describes this run and is not a held-out claim (the learning suite,
``evaluate.py --suite learning``, chooses its reference on validation seeds).
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from envs.core.files import write_text_atomically
from evaluation.aggregate import format_cell, format_interval, group_by
from evaluation.labels import metric_label, policy_labels
from evaluation.paired import paired_comparison
from evaluation.report_charts import (
    bar_keys,
    figure_div,
    gantt_runs,
    metric_bars,
    plotly_js,
    utilization,
    wait_cdf,
)

TABLE_KEYS = ("mean_wait_s", "p95_wait_s", "p99_wait_s", "mean_bsld", "utilization", "jain_fairness", "n_rejected")
"""The metric columns of the comparison table (those the summary has)."""
HEADLINE = "mean_wait_s"
"""The metric that picks a case's reference and is paired against it."""
COLOUR_FIELDS = ("user", "size", "priority", "outcome", "team")
"""The fields the Gantt chart can colour jobs by (``gantt.js``)."""

STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5em auto; max-width: 1300px; padding: 0 1em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 1.6em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; font-size: 0.9em; margin: 0.6em 0; }
th, td { border: 1px solid #ddd; padding: 3px 7px; text-align: right; } td { white-space: nowrap; }
.scroll { overflow-x: auto; }
th:first-child, td:first-child { text-align: left; }
tr.reference td { font-weight: 600; background: #f3f7ff; }
dl { display: grid; grid-template-columns: max-content auto; gap: 2px 12px; font-size: 0.9em; }
dt { font-weight: 600; } dd { margin: 0; word-break: break-all; }
code, pre { font-size: 0.85em; } pre { background: #f7f7f7; padding: 0.6em; max-height: 20em; overflow: auto; }
.grid { display: grid; grid-template-columns: repeat(2, minmax(0, 1fr)); gap: 8px; }
@media (max-width: 1000px) { .grid { grid-template-columns: minmax(0, 1fr); } }
.grid > div { min-width: 0; }
.note { color: #555; font-size: 0.9em; } .ci { color: #666; font-size: 0.85em; }
.banner { background: #fff4d6; padding: 0.5em 0.8em; }
"""


def esc(value: Any) -> str:
    return html.escape(str(value))


def _json_script(element_id: str, data: Any) -> str:
    """``data`` as JSON in a ``<script type="application/json">`` (``</`` escaped so it cannot close the tag)."""
    text = json.dumps(data, separators=(",", ":"), allow_nan=False).replace("</", "<\\/")
    return f'<script type="application/json" id="{element_id}">{text}</script>'


def provenance_section(document: Mapping[str, Any]) -> str:
    """What the run was: command, code, seeds, inputs, window, skipped records and rejected jobs."""
    items = [("command", f"<code>{esc(document.get('command', '(not recorded)'))}</code>"),
             ("git commit", esc(document.get("git_commit") or "(not a git checkout)")),
             ("code version", f"<code>{esc(document.get('code_version', '(not recorded)'))}</code> "
                              "(SHA-256 of the project's code and presets)"),
             ("seeds", esc(", ".join(map(str, document.get("seeds", []))) or "(not recorded)")),
             ("runs", esc(document.get("runs", "")))]
    inputs = document.get("inputs") or {}
    items.append(("inputs", "<br>".join(f"{esc(path)}: <code>{esc(digest)}</code>" for path, digest in
                                        inputs.items()) or "none but the project's presets (in the code version)"))
    skipped = document.get("skipped_records") or {}
    items.append(("skipped trace records", "<br>".join(
        f"{esc(path)}: " + ", ".join(f"{esc(k)} {v:,}" for k, v in reasons.items())
        for path, reasons in skipped.items()) or "none"))
    rejected = sum(entry["metrics"].get("n_rejected", 0) * entry["n_seeds"] for entry in document["results"])
    items.append(("rejected jobs", f"{rejected:,.0f} over all runs (the table's n_rejected column, per run)"))
    rows = "".join(f"<dt>{name}</dt><dd>{value}</dd>" for name, value in items)
    return f"<h2>The run</h2><dl>{rows}</dl>"


def _cell(text: str) -> str:
    """A table cell's HTML: ``mean [low, high]`` as the mean over its interval, smaller."""
    mean, bracket, interval = text.partition(" [")
    return f'{esc(mean)}<br><span class="ci">[{esc(interval)}</span>' if bracket else esc(text)


def _paired(rows: Sequence[Mapping[str, Any]], reference: str) -> tuple[dict[str, Mapping[str, Any]], str]:
    """Each policy's paired comparison of :data:`HEADLINE` against ``reference`` on one case's rows, by policy;
    empty with the reason when it cannot be made (seeds differ, the reference never waits)."""
    try:
        return {entry["policy"]: entry for entry in paired_comparison(rows, reference, HEADLINE)}, ""
    except ValueError as exc:
        return {}, f"no paired comparison: {exc}"


def table_section(entries: Sequence[Mapping[str, Any]], rows: Sequence[Mapping[str, Any]]) -> str:
    """The comparison table: per case, one row per policy, each metric as ``mean [low, high]``, the reference
    marked, the mean wait's ratio to the reference's, paired by seed."""
    labels = policy_labels([entry["policy"] for entry in entries])
    keys = [key for key in TABLE_KEYS if any(key in entry["metrics"] for entry in entries)]
    head = "".join(f"<th>{esc(metric_label(key))}</th>" for key in keys)
    parts = ["<h2>Comparison</h2>", '<p class="note">Each cell: the mean over the seeds and its 95% bootstrap '
             "interval [low, high]. The reference of a case (highlighted) is its policy with the lowest mean wait on "
             "these same seeds; “vs reference” is the ratio of mean waits, paired seed by seed, with its 95% "
             "interval: below 1 waits less.</p>"]
    for workload, group in group_by(entries, lambda entry: entry["workload"]).items():
        reference = min(group, key=lambda entry: entry["metrics"].get(HEADLINE, float("inf")))["policy"]
        paired, why = _paired([row for row in rows if row["workload"] == workload], reference)
        body = []
        for entry in group:
            ratio = paired.get(entry["policy"])
            cell = format_interval(ratio["ratio"], *ratio["ratio_ci"], decimals=3) if ratio else "—"
            css = ' class="reference"' if entry["policy"] == reference else ""
            body.append(f'<tr{css}><td title="{esc(entry["policy"])}">{esc(labels[entry["policy"]])}</td>'
                        f'<td>{entry["n_seeds"]}</td>'
                        + "".join(f"<td>{_cell(format_cell(entry, key))}</td>" for key in keys)
                        + f"<td>{_cell(cell)}</td></tr>")
        note = f"reference: {esc(labels[reference])}{'; ' + esc(why) if why else ''}"
        parts.append(f'<h3>{esc(workload)}</h3><p class="note">{note}</p><div class="scroll"><table><tr>'
                     f"<th>policy</th><th>seeds</th>{head}<th>mean wait vs reference</th></tr>{''.join(body)}"
                     "</table></div>")
    return "".join(parts)


def charts_section(entries: Sequence[Mapping[str, Any]], traces: Sequence[Mapping[str, Any]]) -> str:
    """Wait CDFs and utilization over time per case, then one bar chart per metric of :data:`BAR_KEYS`."""
    workloads = list(dict.fromkeys(trace["workload"] for trace in traces))
    divs = [figure_div(wait_cdf(traces, workload), f"cdf-{i}") for i, workload in enumerate(workloads)]
    divs += [figure_div(utilization(traces, workload), f"util-{i}") for i, workload in enumerate(workloads)]
    bars = "".join(figure_div(metric_bars(entries, key), f"bars-{key}") for key in bar_keys(entries))
    return f'<h2>Charts</h2>{"".join(divs)}<div class="grid">{bars}</div>'



def gantt_section(traces: Sequence[Mapping[str, Any]]) -> str:
    """The Gantt chart's controls, its data and its script, or a note when no run kept a job table."""
    runs, left_out = gantt_runs(traces)
    if not runs:
        return "<h2>Gantt chart</h2><p class=\"note\">No run of this folder kept its jobs.</p>"
    options = "".join(f'<option value="{field}">{field}</option>' for field in COLOUR_FIELDS)
    more = (f'<p class="note">{left_out} more run(s) left out of the page (it keeps {len(runs)}, smallest seeds '
            "first).</p>") if left_out else ""
    script = resources.files("evaluation").joinpath("gantt.js").read_text()
    return (f'<h2>Gantt chart</h2><p>run <select id="gantt-run"></select> colour by <select id="gantt-colour">'
            f'{options}</select></p>{more}<div id="gantt"></div><pre id="gantt-detail"></pre>'
            f'{_json_script("gantt-data", {"runs": runs})}<script>{script}</script>')


def page(title: str, body: str) -> str:
    """A whole self-contained page: ``title``, the style, plotly.js inlined, then ``body`` (HTML)."""
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>'
            f'<link rel="icon" href="data:,"><style>{STYLE}</style><script>{plotly_js()}</script></head><body>'
            f"<h1>{esc(title)}</h1>{body}</body></html>")


def render(document: Mapping[str, Any], traces: Sequence[Mapping[str, Any]],
           rows: Sequence[Mapping[str, Any]]) -> str:
    """The whole page for a summary document (:func:`evaluation.report.read_summary`), its traces and rows."""
    entries = document["results"]
    window = document.get("metrics_window", [0, 0])
    banner = (f'<p class="banner">Steady state: the metrics leave out the first {window[0]:.0%} and the last '
              f"{window[1]:.0%} of the jobs by submit time.</p>") if any(window) else ""
    return page("gpusched evaluation", f"{banner}{provenance_section(document)}{table_section(entries, rows)}"
                f"{charts_section(entries, traces)}{gantt_section(traces)}")


def write_report(path: Path, document: Mapping[str, Any], traces: Sequence[Mapping[str, Any]],
                 rows: Sequence[Mapping[str, Any]]) -> Path:
    """Write report.html (atomically) at ``path``; return the path."""
    write_text_atomically(path, render(document, traces, rows))
    return path
