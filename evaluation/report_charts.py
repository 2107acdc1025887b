"""The interactive charts of report.html (plotly): wait CDFs, GPU utilization over time, metric bars with 95%
intervals, and the data the Gantt chart's script draws from.

Each chart function returns a ``plotly.graph_objects.Figure`` (tests read its traces and layout); the page puts them
in with :func:`figure_div`. Policies keep one colour across every chart (plotly's default qualitative palette, in
first-appearance order); labels come from :mod:`evaluation.labels`. The same inputs as :mod:`evaluation.plots`:
summary entries (:func:`evaluation.aggregate.aggregate`) and traces (:mod:`evaluation.runner`), whose ``jobs`` is a
job table (:mod:`evaluation.jobs`). plotly is the optional extra ``plot`` and is imported only here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from evaluation.aggregate import group_by
from evaluation.labels import DIMENSIONLESS, metric_label, metric_title, metric_unit, policy_labels
from evaluation.plots import LOG_SPAN, ecdf, utilization_steps

MISSING_PLOTLY = "report.html needs plotly: pip install 'gpusched[plot]'"
CDF_POINTS = 400
"""A wait CDF line keeps at most this many points (evenly spaced quantiles) [count]."""
BAR_KEYS = ("mean_wait_s", "p95_wait_s", "mean_bsld", "utilization", "jain_fairness")
"""The metrics drawn as bars, when the summary has them."""
SLOWDOWN_KEYS = ("mean_bsld", "median_bsld", "p95_bsld", "p99_bsld")
"""Bounded slowdowns: at least 1 by definition, so their axes start at 1."""
GANTT_MAX_RUNS = 60
"""The report embeds the job tables of at most this many runs for the Gantt chart (smallest seeds first)."""

Trace = Mapping[str, Any]


def go() -> Any:
    """``plotly.graph_objects``, or ImportError with :data:`MISSING_PLOTLY`."""
    try:
        import plotly.graph_objects as graph_objects
    except ImportError as exc:
        raise ImportError(MISSING_PLOTLY) from exc
    return graph_objects


def palette(policies: Sequence[str]) -> dict[str, str]:
    """A colour per policy (plotly's qualitative palette, in first-appearance order, cycling after 24)."""
    from plotly.colors import qualitative

    colours = qualitative.Plotly + qualitative.Dark24
    return {policy: colours[i % len(colours)] for i, policy in enumerate(dict.fromkeys(policies))}


def styled(fig: Any, title: str, x_title: str, y_title: str) -> Any:
    """``fig`` with its title, axis titles and a legend below the plot area (outside the data)."""
    fig.update_layout(title=title, xaxis_title=x_title, yaxis_title=y_title, template="plotly_white",
                      legend={"orientation": "h", "yanchor": "top", "y": -0.2, "xanchor": "left", "x": 0},
                      margin={"t": 60, "b": 40}, height=460)
    return fig


def _note(fig: Any, text: str) -> Any:
    """``fig`` with ``text`` in the middle of its plot area: why a panel has nothing to draw."""
    fig.add_annotation(text=text, xref="paper", yref="paper", x=0.5, y=0.5, showarrow=False, font={"size": 15})
    return fig


def wait_cdf(traces: Sequence[Trace], workload: str) -> Any:
    """The empirical CDF of the job wait per policy on one case (``workload``), seeds pooled; log x axis when the
    waits span :data:`LOG_SPAN` or more. A case whose waits are all 0 gets a note instead of lines."""
    runs = [trace for trace in traces if trace["workload"] == workload]
    labels = policy_labels([trace["policy"] for trace in traces])
    colours = palette([trace["policy"] for trace in traces])
    fig = styled(go().Figure(), f"Wait CDF — {workload}", "wait [s]", "fraction of jobs")
    waits = {policy: np.concatenate([np.asarray(t["wait_s"], dtype=np.float64) for t in group] or [np.zeros(0)])
             for policy, group in group_by(runs, lambda t: t["policy"]).items()}
    pooled = np.concatenate(list(waits.values()) or [np.zeros(0)])
    if pooled.size == 0:
        return _note(fig, "no completed jobs")
    if not np.any(pooled > 0):
        return _note(fig, f"every job started at once: all {pooled.size:,} waits are 0 s")
    positive = pooled[pooled > 0]
    log = positive.max() >= LOG_SPAN * max(positive.min(), 1.0)
    for policy, values in waits.items():
        x, y = ecdf(values)
        keep = np.unique(np.linspace(0, x.size - 1, min(CDF_POINTS, x.size)).round().astype(int))
        fig.add_scatter(x=np.maximum(x[keep], 1.0) if log else x[keep], y=y[keep], mode="lines", name=labels[policy],
                        line={"shape": "hv", "color": colours[policy]}, customdata=x[keep],
                        hovertemplate="wait %{customdata:,.0f} s: %{y:.1%} of jobs")
    if log:
        fig.update_xaxes(type="log", title="wait [s] (log axis: waits under 1 s drawn at 1 s)")
    fig.update_yaxes(range=[0, 1.02])
    return fig


def utilization(traces: Sequence[Trace], workload: str) -> Any:
    """GPU utilization over time (allocated share / total GPUs) of each policy's smallest-seed run on one case,
    hours since the case's earliest job start."""
    runs = [min(group, key=lambda t: t["seed"]) for group in
            group_by([t for t in traces if t["workload"] == workload], lambda t: t["policy"]).values()]
    labels = policy_labels([trace["policy"] for trace in traces])
    colours = palette([trace["policy"] for trace in traces])
    fig = styled(go().Figure(), f"GPU utilization over time — {workload}", "time [h]", "GPU utilization [fraction]")
    starts = [span[0] for trace in runs for span in trace["intervals"]]
    if not starts:
        return _note(fig, "no job held a GPU")
    origin_s = min(starts)
    for trace in runs:
        times_s, level = utilization_steps(trace["intervals"], trace["total_gpus"])
        fig.add_scatter(x=(times_s - origin_s) / 3600, y=level, mode="lines", line={"shape": "hv", "width": 1,
                        "color": colours[trace["policy"]]}, name=f"{labels[trace['policy']]} (seed {trace['seed']})",
                        hovertemplate="%{x:.2f} h: %{y:.1%}")
    fig.update_yaxes(range=[0, 1.02])
    return fig


def metric_bars(entries: Sequence[Mapping[str, Any]], key: str) -> Any:
    """The mean of one metric per policy and case with its 95% interval as error bars; slowdowns from 1."""
    labels = policy_labels([entry["policy"] for entry in entries])
    colours = palette([entry["policy"] for entry in entries])
    unit = metric_unit(key)
    unit = "" if unit == DIMENSIONLESS else unit
    fig = styled(go().Figure(), metric_title(key), "case", metric_label(key))
    for policy, group in group_by(entries, lambda entry: entry["policy"]).items():
        means = [entry["metrics"].get(key, np.nan) for entry in group]
        lows = [mean - entry["ci95"].get(key, [mean, mean])[0] for mean, entry in zip(means, group, strict=True)]
        highs = [entry["ci95"].get(key, [mean, mean])[1] - mean for mean, entry in zip(means, group, strict=True)]
        fig.add_bar(x=[entry["workload"] for entry in group], y=means, name=labels[policy],
                    marker_color=colours[policy], error_y={"type": "data", "array": highs, "arrayminus": lows},
                    hovertemplate=f"{labels[policy]}<br>%{{x}}: %{{y:,.4g}} {unit}<extra></extra>")
    fig.update_layout(barmode="group")
    if key in SLOWDOWN_KEYS:
        top = max((entry["ci95"][key][1] for entry in entries if key in entry["ci95"]), default=1.0)
        fig.update_yaxes(range=[1, 1 + 1.08 * max(top - 1, 1e-3)])
    return fig


def bar_keys(entries: Sequence[Mapping[str, Any]]) -> list[str]:
    """The keys of :data:`BAR_KEYS` that every summary entry has."""
    return [key for key in BAR_KEYS if entries and all(key in entry["metrics"] for entry in entries)]


TIME_COLUMNS = ("submit_s", "requested_s", "start_s", "finish_s", "wait_s")
"""The job table's columns of times [s], rounded to :data:`TIME_DECIMALS` in the page."""
TIME_DECIMALS = 1
"""Decimals of a time [s] in the page's job tables (a tenth of a second: the page stays small)."""


def _rounded(jobs: Mapping[str, list[Any]]) -> dict[str, list[Any]]:
    """A job table with its times rounded to :data:`TIME_DECIMALS` (None stays None)."""
    def cut(value: float | None) -> float | None:
        return None if value is None else round(value, TIME_DECIMALS)

    return {**jobs, **{key: [cut(v) for v in jobs[key]] for key in TIME_COLUMNS},
            "runs": [[[cut(start), cut(end)] for start, end in runs] for runs in jobs["runs"]]}


def gantt_runs(traces: Sequence[Trace]) -> tuple[list[dict[str, Any]], int]:
    """The runs the Gantt chart can show (at most :data:`GANTT_MAX_RUNS`, smallest seeds first, then in order),
    each ``{"label", "policy", "workload", "seed", "total_gpus", "jobs"}`` (its job table, times rounded to
    :data:`TIME_DECIMALS`), and how many runs were left out."""
    with_jobs = [trace for trace in traces if trace.get("jobs")]
    ordered = sorted(range(len(with_jobs)), key=lambda i: (with_jobs[i]["seed"], i))[:GANTT_MAX_RUNS]
    labels = policy_labels([trace["policy"] for trace in traces])
    runs = [{"label": f"{labels[t['policy']]} · {t['workload']} · seed {t['seed']}", "policy": t["policy"],
             "workload": t["workload"], "seed": t["seed"], "total_gpus": t["total_gpus"], "jobs": _rounded(t["jobs"])}
            for t in (with_jobs[i] for i in ordered)]
    return runs, len(with_jobs) - len(runs)


def figure_div(fig: Any, div_id: str) -> str:
    """A figure as an HTML ``<div>`` that draws it with the page's plotly.js (included once by the page)."""
    return fig.to_html(full_html=False, include_plotlyjs=False, div_id=div_id,
                       config={"displaylogo": False, "responsive": True})


def plotly_js() -> str:
    """plotly.js, the whole bundle, to inline in the page (so that it opens offline)."""
    from plotly.offline import get_plotlyjs

    return get_plotlyjs()
