"""Plots of an evaluation (SPEC §9): wait CDF, metric bars with 95 % CIs, GPU utilization over time, a Gantt chart.

Each plot function returns a :class:`matplotlib.figure.Figure` built without pyplot (no global state, no
backend switch; files are written through the Agg canvas), so that callers and tests can inspect its axes;
:func:`plot_all` writes them as PNGs. matplotlib is the optional extra ``plot`` and is imported only when a plot is
made.

Inputs: ``summary`` is :func:`evaluation.aggregate.aggregate`'s result; a *trace* is the dict of one run with
"policy", "workload", "seed", "total_gpus", "wait_s" (one wait per completed job [s]), "intervals" ([start_s,
finish_s, gpu_share] per completed job) and "gantt" ([job_id, start_s, finish_s, [gpu indices]], maybe empty).

Choices: plots of traces have one subplot per workload (in first-appearance order) and one line per policy; every
policy keeps its colour across the subplots of a figure. Time axes are in hours since the earliest job start of the
subplot's traces (the same origin for every policy of a workload), so traces with absolute timestamps stay readable.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from envs.core.files import write_atomically
from evaluation.aggregate import group_by

if TYPE_CHECKING:
    from matplotlib.figure import Figure

Trace = Mapping[str, Any]

MISSING_MATPLOTLIB = "plots need matplotlib: pip install 'gpusched[plot]'"
SUBPLOT_SIZE_IN = (5.0, 3.6)
"""Width and height of one subplot [inch]."""
LOG_SPAN = 100.0
"""The wait CDF gets a (symmetric) log x axis when the largest positive wait is at least this many times the
smallest one (floored at 1 s) [dimensionless]."""
GANTT_MAX_JOBS = 500
"""The Gantt chart draws at most this many jobs, the earliest-starting ones."""
DPI = 120
"""Resolution of the written PNGs [dots per inch]."""


def _new_figure(n_cols: int, n_rows: int = 1) -> tuple[Figure, np.ndarray]:
    """A figure with an (n_rows × n_cols) array of axes, attached to the Agg canvas."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise ImportError(MISSING_MATPLOTLIB) from exc
    fig = Figure(figsize=(SUBPLOT_SIZE_IN[0] * n_cols, SUBPLOT_SIZE_IN[1] * n_rows), layout="constrained")
    FigureCanvasAgg(fig)
    return fig, fig.subplots(n_rows, n_cols, squeeze=False)


def _policy_colors(policies: Sequence[str]) -> dict[str, str]:
    """A colour of matplotlib's default cycle per policy, in first-appearance order."""
    ordered = list(dict.fromkeys(policies))
    return {policy: f"C{i % 10}" for i, policy in enumerate(ordered)}


def ecdf(values: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """The empirical CDF of ``values``: sorted values and the fraction of values at or below each."""
    x = np.sort(np.asarray(values, dtype=np.float64))
    return x, np.arange(1, x.size + 1) / max(x.size, 1)


def utilization_steps(intervals: Sequence[Sequence[float]], total_gpus: int) -> tuple[np.ndarray, np.ndarray]:
    """Allocated GPU share / ``total_gpus`` over time, from [start_s, finish_s, gpu_share] intervals.

    Returns ``(times_s, utilization)``: the distinct event times, sorted [s], and the utilization [fraction] that
    holds from each time until the next (0 after the last finish). Empty arrays when there is no interval.
    """
    spans = np.asarray(intervals, dtype=np.float64).reshape(-1, 3)
    if spans.size == 0:
        return np.zeros(0), np.zeros(0)
    times = np.concatenate([spans[:, 0], spans[:, 1]])
    deltas = np.concatenate([spans[:, 2], -spans[:, 2]])
    order = np.argsort(times, kind="stable")
    times, level = times[order], np.cumsum(deltas[order])
    last_at_time = np.append(times[1:] != times[:-1], True)  # the level after every event at that time
    level = level[last_at_time] / total_gpus
    level[np.abs(level) < 1e-9] = 0.0  # cumulative sums of fractional shares leave rounding residue
    return times[last_at_time], level


def _by_workload(traces: Sequence[Trace]) -> dict[str, dict[str, list[Trace]]]:
    """Traces grouped by workload, then by policy, both in first-appearance order."""
    return {
        workload: group_by(runs, lambda trace: trace["policy"])
        for workload, runs in group_by(traces, lambda trace: trace["workload"]).items()
    }


def wait_cdf(traces: Sequence[Trace]) -> Figure:
    """Empirical CDF of the job wait per policy, pooled over seeds; one subplot per workload, one line per policy.

    The x axis is symmetric-log (linear below 1 s, so zero waits stay visible) when the waits span
    :data:`LOG_SPAN` or more, linear otherwise.
    """
    workloads = _by_workload(traces)
    colors = _policy_colors([trace["policy"] for trace in traces])
    fig, axes = _new_figure(max(len(workloads), 1))
    for ax, (workload, policies) in zip(axes[0], workloads.items(), strict=False):
        waits = {policy: np.concatenate([np.asarray(t["wait_s"], dtype=np.float64) for t in runs])
                 for policy, runs in policies.items()}
        for policy, wait_s in waits.items():
            ax.step(*ecdf(wait_s), where="post", color=colors[policy], label=policy)
        positive = np.concatenate(list(waits.values()))
        positive = positive[positive > 0]
        if positive.size and positive.max() >= LOG_SPAN * max(positive.min(), 1.0):
            ax.set_xscale("symlog", linthresh=1.0)
        ax.set(title=workload, xlabel="wait [s]", ylabel="fraction of jobs", ylim=(0.0, 1.02))
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    return fig


def metric_bars(summary: Sequence[Mapping[str, Any]], keys: Sequence[str] = ("mean_bsld", "utilization")) -> Figure:
    """Mean of each metric in ``keys`` per policy with its 95 % CI as error bars; one subplot per key.

    Bars are grouped by workload along x: one bar container per policy, one bar per workload (NaN, i.e. no bar,
    where the policy did not run on that workload).
    """
    workloads = list(dict.fromkeys(entry["workload"] for entry in summary))
    by_policy = group_by(summary, lambda entry: entry["policy"])
    colors = _policy_colors(list(by_policy))
    width = 0.8 / max(len(by_policy), 1)
    x = np.arange(len(workloads))
    fig, axes = _new_figure(len(keys))
    for ax, key in zip(axes[0], keys, strict=True):
        for i, (policy, entries) in enumerate(by_policy.items()):
            mean, err = np.full(len(workloads), np.nan), np.zeros((2, len(workloads)))
            for entry in entries:
                if key not in entry["metrics"]:
                    raise KeyError(f"metric {key!r} is not in the summary of {policy!r} on {entry['workload']!r}")
                j = workloads.index(entry["workload"])
                mean[j] = entry["metrics"][key]
                low, high = entry["ci95"][key]
                err[:, j] = max(mean[j] - low, 0.0), max(high - mean[j], 0.0)
            ax.bar(x + (i - (len(by_policy) - 1) / 2) * width, mean, width, yerr=err, capsize=3,
                   color=colors[policy], label=policy)
        ax.set_xticks(x, workloads)
        ax.set(title=key, ylabel=key)
        ax.grid(axis="y", alpha=0.3)
    axes[0][0].legend(fontsize="small")
    return fig


def _first_seed(runs: Sequence[Trace]) -> Trace:
    """The run with the smallest seed (the first such in order)."""
    return min(runs, key=lambda trace: trace["seed"])


def _start_origin_s(traces: Sequence[Trace]) -> float:
    """The earliest job start of ``traces`` [s], 0 when they have no interval."""
    starts = [span[0] for trace in traces for span in trace["intervals"]]
    return float(min(starts)) if starts else 0.0


def utilization_over_time(traces: Sequence[Trace]) -> Figure:
    """GPU utilization (allocated share / total GPUs) over time as a step function, for each policy's
    smallest-seed run; one subplot per workload, time in hours since the workload's earliest job start."""
    workloads = _by_workload(traces)
    colors = _policy_colors([trace["policy"] for trace in traces])
    fig, axes = _new_figure(max(len(workloads), 1))
    for ax, (workload, policies) in zip(axes[0], workloads.items(), strict=False):
        runs = [_first_seed(policy_runs) for policy_runs in policies.values()]
        origin_s = _start_origin_s(runs)
        for trace in runs:
            times_s, level = utilization_steps(trace["intervals"], trace["total_gpus"])
            ax.step((times_s - origin_s) / 3600, level, where="post", color=colors[trace["policy"]],
                    label=f"{trace['policy']} (seed {trace['seed']})")
        ax.set(title=workload, xlabel="time [h]", ylabel="GPU utilization")
        ax.set_ylim(bottom=0.0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    return fig


def gantt(trace: Trace, max_jobs: int = GANTT_MAX_JOBS) -> Figure:
    """Gantt chart of one run: a horizontal bar per (job, GPU index) from start to finish, a colour per job;
    time in hours since the first start. At most ``max_jobs`` jobs, the earliest-starting ones.

    Raises ``ValueError`` when the trace has no "gantt" entries.
    """
    entries = sorted(trace.get("gantt") or [], key=lambda entry: (entry[1], entry[0]))
    if not entries:
        raise ValueError(f"trace of {trace['policy']!r} on {trace['workload']!r} has no gantt entries")
    shown = entries[:max_jobs]
    origin_s = float(shown[0][1])
    gpu, left_h, width_h, color = [], [], [], []
    for number, (_job_id, start_s, finish_s, gpus) in enumerate(shown):
        for index in gpus:
            gpu.append(index)
            left_h.append((start_s - origin_s) / 3600)
            width_h.append((finish_s - start_s) / 3600)
            color.append(f"C{number % 10}")
    fig, axes = _new_figure(1)
    ax = axes[0][0]
    ax.barh(gpu, width_h, left=left_h, height=0.8, color=color, edgecolor="none")
    capped = f", first {len(shown)} of {len(entries)} jobs" if len(shown) < len(entries) else ""
    ax.set(title=f"{trace['policy']} on {trace['workload']} (seed {trace['seed']}{capped})",
           xlabel="time [h]", ylabel="GPU index", ylim=(trace["total_gpus"] - 0.5, -0.5))
    return fig


def plot_all(summary: Sequence[Mapping[str, Any]], traces: Sequence[Trace], out_dir: str | Path) -> list[Path]:
    """Write wait_cdf.png, bars.png, utilization.png and gantt.png into ``out_dir`` (created if needed).

    A plot whose input is empty is skipped; the Gantt chart shows the first trace with gantt entries. Returns the
    paths written, in that order.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    figures: dict[str, Figure] = {}
    if traces:
        figures["wait_cdf.png"] = wait_cdf(traces)
    if summary:
        figures["bars.png"] = metric_bars(summary)
    if traces:
        figures["utilization.png"] = utilization_over_time(traces)
    with_gantt = next((trace for trace in traces if trace.get("gantt")), None)
    if with_gantt is not None:
        figures["gantt.png"] = gantt(with_gantt)
    paths = []
    for name, fig in figures.items():
        write_atomically(out / name, lambda partial, fig=fig: fig.savefig(partial, dpi=DPI, format="png"))
        paths.append(out / name)
    return paths
