"""Plots of an evaluation (SPEC §9): wait CDF, metric bars with 95 % CIs, GPU utilization over time, a Gantt chart.

Each plot function returns a :class:`matplotlib.figure.Figure` built without pyplot (no global state, no
backend switch; files are written through the Agg canvas), so that callers and tests can inspect its axes;
:func:`make_figures` makes all four and :func:`plot_all` writes them as PNGs. matplotlib is the optional extra
``plot`` and is imported only when a plot is made.

Inputs: ``summary`` is :func:`evaluation.aggregate.aggregate`'s result; a *trace* is the dict of one run with
"policy", "workload", "seed", "total_gpus", "wait_s" (one wait per completed job [s]), "intervals" ([start_s,
finish_s, gpu_share] per run of a completed job) and "jobs" (its job table, :mod:`evaluation.jobs`: the Gantt
chart draws each run of a job on the GPUs it held).

Choices:

- Plots of traces have one subplot per workload (in first-appearance order, at most :data:`MAX_COLUMNS` to a row)
  and one line per policy. Time axes are in hours since the earliest job start of the subplot's traces (the same
  origin for every policy of a workload), so traces with absolute timestamps stay readable.
- Every policy keeps its colour, line style and hatch across the subplots of a figure; line styles differ between
  neighbouring policies, so that two policies with identical results still show as two lines. Policies are
  labelled by :func:`evaluation.labels.policy_labels` (a trained model by its run folder's name, not its path), in
  one legend per figure, outside the axes, to their right (the figure is widened by the legend's width).
- The metric bars are titled and labelled by :mod:`evaluation.labels` (title, unit from the metric docs); their
  y axis starts at 1 for the bounded slowdown (at least 1 by definition), so that 1.04 against 1.06 shows, and
  at 0 for the others, never above 1 for a fraction. The bars of one workload share a group at least
  :data:`BAR_GROUP_IN` wide, whose tick label (the workload's name) is wrapped to fit it.
- A subplot with nothing to draw says why in its middle instead of drawing a line at 0 (no completed jobs, every
  wait 0 s, no GPU interval).
- :func:`make_figures` with a steady-state metrics window says so above each figure: the waits and the metrics are
  those of the window, the utilization and the Gantt chart draw the whole run.
- The Gantt chart colours each job by its id (the golden-ratio sequence over the ``turbo`` colormap), so that jobs
  next to each other get far-apart colours and no colour repeats periodically; the same job keeps its colour in
  every chart.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from envs.core.files import write_atomically
from envs.core.metrics import WHOLE_RUN
from evaluation.aggregate import format_number, group_by
from evaluation.jobs import JOB_COLUMNS, run_spans
from evaluation.labels import (
    metric_label,
    metric_title,
    metric_unit,
    policy_label,
    policy_labels,
    window_label,
    wrap_label,
)

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

Trace = Mapping[str, Any]

MISSING_MATPLOTLIB = "plots need matplotlib: pip install 'gpusched[plot]'"
SUBPLOT_SIZE_IN = (5.0, 3.6)
"""Width and height of one subplot [inch]."""
MAX_COLUMNS = 3
"""Subplots per row of a figure with one subplot per workload [count]."""
MAX_FIGURE_WIDTH_IN = 16.0
"""The metric bars' subplots go side by side up to this width, then below each other [inch]."""
BAR_GROUP_IN = 1.4
"""Least width of one workload's group of bars [inch]."""
BAR_KEYS = ("mean_wait_s", "mean_bsld", "utilization")
"""The metrics :func:`metric_bars` draws unless told otherwise."""
CHAR_EM = 0.65
"""Width of an average character of a label, as a fraction of the font size, for wrapping [dimensionless]."""
TICK_FONT_PT = 9.0
"""Font size of the workload names under the bars [pt]."""
VALUE_FONT_PT = 7.0
"""Font size of the values written in the bars [pt]."""
TITLE_FONT_PT = 11.0
"""Font size of subplot titles [pt]."""
LOG_SPAN = 100.0
"""The wait CDF gets a (symmetric) log x axis when the largest positive wait is at least this many times the
smallest one (floored at 1 s) [dimensionless]."""
GANTT_MAX_JOBS = 500
"""The Gantt chart draws at most this many jobs, the earliest-starting ones."""
GANTT_SIZE_IN = (9.0, 4.5)
"""Width and height of the Gantt chart [inch]."""
GOLDEN = (math.sqrt(5) - 1) / 2
"""Step between the colours of consecutive job ids along the Gantt chart's colormap [fraction of the colormap]."""
DPI = 120
"""Resolution of the written PNGs [dots per inch]."""
LINE_STYLES = ("-", "--", "-.", ":")
"""Line styles of consecutive policies (with the ten colours: 20 distinct styles)."""
HATCHES = ("", "//", "..", "xx")
"""Hatches of the bars of policies 1-10, 11-20, ... (their colours repeat every ten)."""


@dataclass(frozen=True)
class PolicyStyle:
    """How one policy is drawn in every subplot of a figure."""

    label: str
    color: str
    linestyle: str
    hatch: str


def policy_styles(policies: Sequence[str]) -> dict[str, PolicyStyle]:
    """A style per distinct policy, in first-appearance order: its :func:`~evaluation.labels.policy_labels` label,
    a colour of matplotlib's default cycle, a line style that differs from its neighbours' and a hatch that tells
    the 11th to 20th colours (and so on) from the first ten."""
    labels = policy_labels(policies)
    return {policy: PolicyStyle(label, f"C{i % 10}", LINE_STYLES[i % len(LINE_STYLES)],
                                HATCHES[i // 10 % len(HATCHES)])
            for i, (policy, label) in enumerate(labels.items())}


def _wrap_width(width_in: float, font_pt: float) -> int:
    """How many average characters of a ``font_pt`` font fit in ``width_in`` inches."""
    return int(width_in * 72 / (CHAR_EM * font_pt))


def _new_figure(n_panels: int, panel_size_in: tuple[float, float] = SUBPLOT_SIZE_IN,
                max_columns: int = MAX_COLUMNS) -> tuple[Figure, list[Axes]]:
    """A figure with ``n_panels`` (at least 1) axes, at most ``max_columns`` to a row, attached to the Agg canvas."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise ImportError(MISSING_MATPLOTLIB) from exc
    n_panels = max(n_panels, 1)
    n_cols = min(n_panels, max(max_columns, 1))
    n_rows = math.ceil(n_panels / n_cols)
    fig = Figure(figsize=(panel_size_in[0] * n_cols, panel_size_in[1] * n_rows), layout="constrained")
    FigureCanvasAgg(fig)
    axes = list(fig.subplots(n_rows, n_cols, squeeze=False).flat)
    for ax in axes[n_panels:]:
        ax.remove()
    return fig, axes[:n_panels]


def _legend_outside(fig: Figure) -> None:
    """One legend of every labelled artist of ``fig``'s axes (first of each label), to the right of the axes; the
    figure is widened by the legend's width, so that the axes keep theirs."""
    handles: dict[str, Any] = {}
    for ax in fig.axes:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(label, handle)
    if not handles:
        return
    legend = fig.legend(list(handles.values()), list(handles), loc="outside right upper", fontsize="small")
    fig.set_figwidth(fig.get_figwidth() + legend.get_window_extent(fig.canvas.get_renderer()).width / fig.dpi)


def _say(ax: Axes, text: str) -> None:
    """Write why subplot ``ax`` has nothing to draw in its middle, instead of its ticks."""
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", wrap=True)
    ax.set(xticks=[], yticks=[])


def _footnote(ax: Axes, what: str, labels: Sequence[str]) -> None:
    """Name the policies of subplot ``ax`` that have nothing to draw, in its lower right corner."""
    if labels:
        ax.text(0.98, 0.03, f"{what}: {', '.join(labels)}", transform=ax.transAxes, ha="right", va="bottom",
                fontsize="small")


def _panel_title(ax: Axes, title: str, width_in: float = SUBPLOT_SIZE_IN[0]) -> None:
    """Title subplot ``ax`` with ``title`` wrapped to ``width_in``, the subplot's width [inch]."""
    ax.set_title(wrap_label(title, _wrap_width(width_in, TITLE_FONT_PT)), fontsize=TITLE_FONT_PT)


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


def _wait_panel(ax: Axes, waits: Mapping[str, np.ndarray], styles: Mapping[str, PolicyStyle]) -> None:
    """One workload's wait CDFs (``waits``: each policy's waits [s]) in ``ax``, or why there is none."""
    done = {policy: wait_s for policy, wait_s in waits.items() if wait_s.size}
    _footnote(ax, "no completed jobs", [styles[policy].label for policy in waits if policy not in done])
    if not done:
        _say(ax, "no completed jobs")
        return
    positive = np.concatenate(list(done.values()))
    positive = positive[positive > 0]
    if not positive.size:
        _say(ax, "every job started at once (all waits 0 s)")
        return
    for policy, wait_s in done.items():
        style = styles[policy]
        ax.step(*ecdf(wait_s), where="post", color=style.color, linestyle=style.linestyle, label=style.label)
    if positive.max() >= LOG_SPAN * max(positive.min(), 1.0):
        ax.set_xscale("symlog", linthresh=1.0)
    ax.set(xlabel="wait [s]", ylabel="fraction of jobs", ylim=(0.0, 1.02))
    ax.grid(alpha=0.3)


def wait_cdf(traces: Sequence[Trace]) -> Figure:
    """Empirical CDF of the job wait per policy, pooled over seeds; one subplot per workload, one line per policy.

    The x axis is symmetric-log (linear below 1 s, so zero waits stay visible) when the waits span
    :data:`LOG_SPAN` or more, linear otherwise. A subplot without a positive wait says so instead.
    """
    workloads = _by_workload(traces)
    styles = policy_styles([trace["policy"] for trace in traces])
    fig, axes = _new_figure(len(workloads))
    for ax, (workload, policies) in zip(axes, workloads.items(), strict=False):
        _panel_title(ax, workload)
        _wait_panel(ax, {policy: np.concatenate([np.asarray(t["wait_s"], dtype=np.float64) for t in runs])
                         for policy, runs in policies.items()}, styles)
    _legend_outside(fig)
    return fig


def _bar_axis(ax: Axes, key: str) -> None:
    """The y axis of metric ``key``'s bars: from 1 for a bounded slowdown (with a tick at 1), from 0 and never
    above 1 for a fraction, the top as autoscaled otherwise; tick labels with thousands separators."""
    from matplotlib.ticker import StrMethodFormatter

    top = ax.get_ylim()[1]
    if "bsld" in key.split("_"):
        ax.set_ylim(1.0, max(top, 1.1))
        ax.set_yticks(sorted({1.0, *(tick for tick in ax.get_yticks() if 1.0 < tick <= ax.get_ylim()[1])}))
    elif metric_unit(key) == "fraction":
        ax.set_ylim(0.0, min(top, 1.0))
    ax.yaxis.set_major_formatter(StrMethodFormatter("{x:,g}"))


def _policy_bars(ax: Axes, key: str, policy: str, entries: Sequence[Mapping[str, Any]], workloads: Sequence[str],
                 x: np.ndarray, width: float, style: PolicyStyle, values: bool) -> None:
    """One policy's bars of metric ``key`` at ``x``, ``width`` wide (one per workload, NaN where it did not run),
    with its CI, and with ``values`` each bar's value (:func:`_bar_values`)."""
    mean, err = np.full(len(workloads), np.nan), np.zeros((2, len(workloads)))
    for entry in entries:
        if key not in entry["metrics"]:
            raise KeyError(f"metric {key!r} is not in the summary of {policy!r} on {entry['workload']!r}")
        j = workloads.index(entry["workload"])
        mean[j] = entry["metrics"][key]
        low, high = entry["ci95"][key]
        err[:, j] = max(mean[j] - low, 0.0), max(high - mean[j], 0.0)
    ax.bar(x, mean, width, yerr=err, capsize=3, color=style.color, hatch=style.hatch,
           edgecolor="white" if style.hatch else None, label=style.label)
    if values:
        _bar_values(ax, x - width / 4, mean)


def _bar_values(ax: Axes, x: np.ndarray, mean: np.ndarray) -> None:
    """Each bar's value (:func:`~evaluation.aggregate.format_number`) written upwards at its foot, at ``x`` (left
    of the bar's middle, where its error bar is), so that a bar at the axis' bottom (a wait of 0 s, a slowdown of
    1) still reads."""
    from matplotlib import patheffects
    from matplotlib.transforms import blended_transform_factory

    at_foot = blended_transform_factory(ax.transData, ax.transAxes)
    for x_j, value in zip(x, mean, strict=True):
        if np.isfinite(value):
            ax.text(x_j, 0.02, format_number(value), transform=at_foot, rotation=90, ha="center", va="bottom",
                    fontsize=VALUE_FONT_PT, path_effects=[patheffects.withStroke(linewidth=2, foreground="white")])


def metric_bars(summary: Sequence[Mapping[str, Any]], keys: Sequence[str] = BAR_KEYS) -> Figure:
    """Mean of each metric in ``keys`` per policy with its 95 % CI as error bars; one subplot per key, titled and
    labelled with the metric's title and unit.

    Bars are grouped by workload along x: one bar container per policy, one bar per workload (NaN, i.e. no bar,
    where the policy did not run on that workload); each bar's value is written at its foot where the bars are
    wide enough for it. Raises ``KeyError`` when an entry lacks a key.
    """
    workloads = list(dict.fromkeys(entry["workload"] for entry in summary))
    by_policy = group_by(summary, lambda entry: entry["policy"])
    styles = policy_styles(list(by_policy))
    panel_in = max(SUBPLOT_SIZE_IN[0], BAR_GROUP_IN * len(workloads) + 1.0)
    fig, axes = _new_figure(len(keys), (panel_in, SUBPLOT_SIZE_IN[1]), int(MAX_FIGURE_WIDTH_IN // panel_in))
    width = 0.8 / max(len(by_policy), 1)
    group_in = (panel_in - 1.0) / max(len(workloads), 1)
    values = width * group_in * 72 >= VALUE_FONT_PT + 2  # room for a value written upwards in each bar
    x = np.arange(len(workloads))
    names = [wrap_label(workload, _wrap_width(0.9 * group_in, TICK_FONT_PT)) for workload in workloads]
    for ax, key in zip(axes, keys, strict=True):
        for i, (policy, entries) in enumerate(by_policy.items()):
            _policy_bars(ax, key, policy, entries, workloads, x + (i - (len(by_policy) - 1) / 2) * width, width,
                         styles[policy], values)
        ax.set_xticks(x, names, fontsize=TICK_FONT_PT)
        ax.set_ylabel(metric_label(key))
        _panel_title(ax, metric_title(key))
        _bar_axis(ax, key)
        ax.grid(axis="y", alpha=0.3)
    _legend_outside(fig)
    return fig


def _first_seed(runs: Sequence[Trace]) -> Trace:
    """The run with the smallest seed (the first such in order)."""
    return min(runs, key=lambda trace: trace["seed"])


def _start_origin_s(traces: Sequence[Trace]) -> float:
    """The earliest job start of ``traces`` [s], 0 when they have no interval."""
    starts = [span[0] for trace in traces for span in trace["intervals"]]
    return float(min(starts)) if starts else 0.0


def _seeds_text(runs: Sequence[Trace]) -> str:
    """Which seeds a subplot of ``runs`` (each policy's smallest-seed run) draws: ``"seed 0"``, or ``"seeds 0, 2
    (each policy's smallest)"``."""
    seeds = sorted({trace["seed"] for trace in runs})
    if len(seeds) == 1:
        return f"seed\N{NO-BREAK SPACE}{seeds[0]}"  # kept on one line by wrap_label
    return f"seeds {', '.join(map(str, seeds))} (each policy's smallest)"


def utilization_over_time(traces: Sequence[Trace]) -> Figure:
    """GPU utilization (allocated share / total GPUs) over time as a step function, for each policy's
    smallest-seed run; one subplot per workload (its title names the seed), time in hours since the workload's
    earliest job start. A subplot without a GPU interval says so instead."""
    workloads = _by_workload(traces)
    styles = policy_styles([trace["policy"] for trace in traces])
    fig, axes = _new_figure(len(workloads))
    for ax, (workload, policies) in zip(axes, workloads.items(), strict=False):
        runs = [_first_seed(policy_runs) for policy_runs in policies.values()]
        _panel_title(ax, f"{workload} ({_seeds_text(runs)})")
        ran = [trace for trace in runs if len(trace["intervals"])]
        _footnote(ax, "no job ran", [styles[trace["policy"]].label for trace in runs if trace not in ran])
        if not ran:
            _say(ax, "no job ran (no GPU intervals)")
            continue
        origin_s = _start_origin_s(ran)
        for trace in ran:
            style = styles[trace["policy"]]
            times_s, level = utilization_steps(trace["intervals"], trace["total_gpus"])
            ax.step((times_s - origin_s) / 3600, level, where="post", color=style.color, linestyle=style.linestyle,
                    label=style.label)
        ax.set(xlabel="time [h]", ylabel="GPU utilization [fraction]")
        ax.set_ylim(bottom=0.0)
        ax.grid(alpha=0.3)
    _legend_outside(fig)
    return fig


def job_color(job_id: int) -> tuple[float, float, float, float]:
    """The Gantt chart's colour of job ``job_id`` (RGBA): the colormap ``turbo`` at the fractional part of
    ``job_id`` × :data:`GOLDEN`, so that consecutive ids get far-apart colours and none repeats periodically."""
    from matplotlib import colormaps

    return colormaps["turbo"](job_id * GOLDEN % 1.0)


def gantt(trace: Trace, max_jobs: int = GANTT_MAX_JOBS) -> Figure:
    """Gantt chart of one run: a horizontal bar per (run of a job, GPU index) from its start to its end, coloured by
    job (:func:`job_color`); time in hours since the first start. The runs of at most ``max_jobs`` jobs, the
    earliest-starting ones (the trace's job table, :mod:`evaluation.jobs`).

    Raises ``ValueError`` when no job of the trace ran.
    """
    spans = run_spans(trace.get("jobs") or {key: [] for key in JOB_COLUMNS})
    if not spans:
        raise ValueError(f"trace of {trace['policy']!r} on {trace['workload']!r} has no job that ran")
    jobs = list(dict.fromkeys(job_id for job_id, _, _, _ in spans))
    kept = set(jobs[:max_jobs])
    origin_s = float(spans[0][1])
    fig, axes = _new_figure(1, GANTT_SIZE_IN)
    gpu, left_h, width_h, color = [], [], [], []
    for job_id, start_s, end_s, gpus in spans:
        if job_id not in kept:
            continue
        for index in gpus:
            gpu.append(index)
            left_h.append((start_s - origin_s) / 3600)
            width_h.append((end_s - start_s) / 3600)
            color.append(job_color(job_id))
    ax = axes[0]
    ax.barh(gpu, width_h, left=left_h, height=0.8, color=color, edgecolor="none")
    capped = f", first {len(kept)} of {len(jobs)} jobs" if len(kept) < len(jobs) else ""
    _panel_title(ax, f"{policy_label(trace['policy'])} on {trace['workload']} (seed {trace['seed']}{capped}; "
                     "a colour per job)", GANTT_SIZE_IN[0])
    ax.set(xlabel="time [h]", ylabel="GPU index", ylim=(trace["total_gpus"] - 0.5, -0.5))
    return fig


WHOLE_RUN_FIGURES = ("utilization.png", "gantt.png")
"""The figures that draw the whole run even with a metrics window (the others draw the window's jobs)."""


def _steady_state_caption(figures: Mapping[str, Figure], metrics_window: Sequence[float]) -> None:
    """Say above each figure that the metrics are a steady state's (nothing for the whole run)."""
    left_out = window_label(metrics_window)
    if not left_out:
        return
    for name, fig in figures.items():
        caption = f"steady-state metrics ({left_out}); the whole run drawn" if name in WHOLE_RUN_FIGURES \
            else f"steady state: {left_out}"
        fig.suptitle(caption, fontsize="medium")


def make_figures(summary: Sequence[Mapping[str, Any]], traces: Sequence[Trace],
                 metrics_window: Sequence[float] = WHOLE_RUN) -> dict[str, Figure]:
    """The figures :func:`plot_all` writes, by file name: wait_cdf.png, bars.png, utilization.png, gantt.png.

    A figure whose input is empty is left out; the Gantt chart shows the first trace with gantt entries. With a
    ``metrics_window`` (``(head, tail)`` fractions of the jobs left out) other than the whole run, each figure says
    so above it.
    """
    figures: dict[str, Figure] = {}
    if traces:
        figures["wait_cdf.png"] = wait_cdf(traces)
    if summary:
        figures["bars.png"] = metric_bars(summary)
    if traces:
        figures["utilization.png"] = utilization_over_time(traces)
    with_gantt = next((trace for trace in traces if trace.get("jobs") and run_spans(trace["jobs"])), None)
    if with_gantt is not None:
        figures["gantt.png"] = gantt(with_gantt)
    _steady_state_caption(figures, metrics_window)
    return figures


def plot_all(summary: Sequence[Mapping[str, Any]], traces: Sequence[Trace], out_dir: str | Path,
             metrics_window: Sequence[float] = WHOLE_RUN) -> list[Path]:
    """Write :func:`make_figures`'s figures as PNGs into ``out_dir`` (created if needed); return the paths written,
    in that order."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, fig in make_figures(summary, traces, metrics_window).items():
        write_atomically(out / name, lambda partial, fig=fig: fig.savefig(partial, dpi=DPI, format="png"))
        paths.append(out / name)
    return paths
