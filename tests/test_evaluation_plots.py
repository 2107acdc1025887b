"""Evaluation plots: figures built from hand-made traces and summaries, and the PNG files plot_all writes."""

from __future__ import annotations

import itertools
import sys
from collections.abc import Sequence

import numpy as np
import pytest

pytest.importorskip("matplotlib", reason="plots need the optional extra: pip install 'gpusched[plot]'")

from matplotlib.container import BarContainer

from evaluation.jobs import JOB_COLUMNS
from evaluation.plots import (
    BAR_KEYS,
    ecdf,
    gantt,
    make_figures,
    metric_bars,
    plot_all,
    policy_styles,
    utilization_over_time,
    utilization_steps,
    wait_cdf,
)

POLICIES = ("fifo", "sjf+easy")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def job_table_of(spans: Sequence[tuple[int, float, float, list[int]]]) -> dict[str, list]:
    """A job table (evaluation.jobs) of jobs that ran once: (job id, start [s], finish [s], GPUs) each."""
    rows = [{"job_id": job_id, "user": "-", "team": "-", "priority": 0, "partition": "", "submit_s": start,
             "requested_s": finish - start, "n_gpus": len(gpus), "gpu_share": float(len(gpus)), "state": "completed",
             "reason": "", "start_s": start, "finish_s": finish, "wait_s": 0.0, "gpus": gpus,
             "runs": [[start, finish]], "run_gpus": [gpus], "run_ends": ["completed"], "preemptions": 0,
             "failures": 0} for job_id, start, finish, gpus in spans]
    return {key: [row[key] for row in rows] for key in JOB_COLUMNS}


def make_trace(policy: str, seed: int, workload: str = "small", gantt_rows: bool = True) -> dict:
    """Two jobs of shares 1 and 2 on 4 GPUs, overlapping during [5, 10) s; waits span several decades."""
    return {
        "policy": policy,
        "workload": workload,
        "seed": seed,
        "total_gpus": 4,
        "wait_s": [0.0, 2.0 + seed, 5000.0],
        "intervals": [[0.0, 10.0, 1.0], [5.0, 15.0, 2.0]],
        "jobs": job_table_of([(0, 0.0, 10.0, [0]), (1, 5.0, 15.0, [1, 2])] if gantt_rows else []),
    }


def make_summary(policies: Sequence[str] = POLICIES, workloads: Sequence[str] = ("small",)) -> list[dict]:
    """An entry per (workload, policy); the i-th policy's means are mean_wait_s 100 + 10 i, mean_bsld 2 + i and
    utilization 0.5 + i / 10, each with a CI of ± 5 %."""
    means = [{"mean_wait_s": 100.0 + 10 * i, "mean_bsld": 2.0 + i, "utilization": 0.5 + i / 10}
             for i in range(len(policies))]
    return [
        {
            "policy": policy,
            "workload": workload,
            "cluster": "tiny",
            "n_seeds": 3,
            "metrics": mean,
            "ci95": {key: [0.95 * value, 1.05 * value] for key, value in mean.items()},
        }
        for workload in workloads
        for policy, mean in zip(policies, means, strict=True)
    ]


TRACES = [make_trace(policy, seed) for seed in (1, 0) for policy in POLICIES]


def test_utilization_steps_sweep_the_start_and_finish_events():
    times_s, level = utilization_steps([[0.0, 10.0, 1.0], [5.0, 15.0, 2.0]], total_gpus=4)
    np.testing.assert_allclose(times_s, [0.0, 5.0, 10.0, 15.0])
    np.testing.assert_allclose(level, [0.25, 0.75, 0.5, 0.0])


def test_utilization_steps_merge_simultaneous_events_and_leave_no_residue():
    times_s, level = utilization_steps([[0.0, 3.0, 0.1], [0.0, 3.0, 0.2], [3.0, 4.0, 0.7]], total_gpus=1)
    np.testing.assert_allclose(times_s, [0.0, 3.0, 4.0])
    np.testing.assert_allclose(level, [0.3, 0.7, 0.0])
    assert level[-1] == 0.0
    assert utilization_steps([], total_gpus=4)[0].size == 0


def test_ecdf_reaches_one_at_the_largest_value():
    x, y = ecdf([3.0, 1.0, 2.0])
    np.testing.assert_allclose(x, [1.0, 2.0, 3.0])
    np.testing.assert_allclose(y, [1 / 3, 2 / 3, 1.0])


def test_wait_cdf_has_one_line_per_policy_pooled_over_seeds():
    ax = wait_cdf(TRACES).axes[0]
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("wait [s]", "fraction of jobs")
    assert [line.get_label() for line in ax.get_lines()] == list(POLICIES)
    assert all(len(line.get_xdata()) == 6 for line in ax.get_lines())  # 3 waits × 2 seeds
    assert ax.get_xscale() == "symlog"  # waits from 2 s to 5000 s


def test_wait_cdf_stays_linear_when_waits_do_not_span_decades():
    trace = make_trace("fifo", 0) | {"wait_s": [0.0, 10.0, 20.0]}
    assert wait_cdf([trace]).axes[0].get_xscale() == "linear"


def test_wait_cdf_draws_one_subplot_per_workload():
    fig = wait_cdf([*TRACES, make_trace("fifo", 0, workload="large")])
    assert [ax.get_title() for ax in fig.axes] == ["small", "large"]
    assert len(fig.axes[1].get_lines()) == 1


def test_metric_bars_have_one_bar_per_policy_with_ci_error_bars():
    fig = metric_bars(make_summary())
    assert BAR_KEYS == ("mean_wait_s", "mean_bsld", "utilization")
    for ax, key in zip(fig.axes, BAR_KEYS, strict=True):
        bars = [c for c in ax.containers if isinstance(c, BarContainer)]
        assert [c.get_label() for c in bars] == list(POLICIES)
        assert [len(c.patches) for c in bars] == [1, 1]
        heights = [c.patches[0].get_height() for c in bars]
        assert heights == pytest.approx([e["metrics"][key] for e in make_summary()])
        assert all(c.errorbar is not None for c in bars)


def test_metric_bars_are_titled_and_labelled_with_the_metric_and_its_unit():
    fig = metric_bars(make_summary())
    assert [ax.get_title() for ax in fig.axes] == ["Mean wait", "Mean bounded slowdown", "GPU utilization"]
    assert [ax.get_ylabel() for ax in fig.axes] == ["Mean wait [s]", "Mean bounded slowdown",
                                                    "GPU utilization [fraction]"]


def test_metric_bars_refuse_a_metric_the_summary_lacks():
    with pytest.raises(KeyError, match="makespan_s"):
        metric_bars(make_summary(), keys=("makespan_s",))


def test_slowdown_axes_start_at_one_and_fractions_stay_within_zero_and_one():
    summary = make_summary()
    for entry, bsld in zip(summary, (1.04, 1.06), strict=True):
        entry["metrics"]["mean_bsld"], entry["ci95"]["mean_bsld"] = bsld, [bsld - 0.005, bsld + 0.005]
    wait, bsld, utilization = metric_bars(summary).axes
    assert bsld.get_ylim()[0] == 1.0
    assert 1.0 in bsld.get_yticks()
    assert bsld.get_ylim()[1] < 1.2  # 1.04 against 1.06 takes a visible part of the axis
    assert wait.get_ylim()[0] == 0.0
    assert utilization.get_ylim()[0] == 0.0 and utilization.get_ylim()[1] <= 1.0


def test_a_slowdown_axis_of_bars_all_at_one_still_has_a_range():
    summary = make_summary()
    for entry in summary:
        entry["metrics"]["mean_bsld"], entry["ci95"]["mean_bsld"] = 1.0, [1.0, 1.0]
    bottom, top = metric_bars(summary).axes[1].get_ylim()
    assert bottom == 1.0 < top


def test_metric_bars_write_each_value_at_the_bar_foot():
    summary = make_summary()
    summary[0]["metrics"]["mean_wait_s"] = 0.0
    texts = [text.get_text() for text in metric_bars(summary).axes[0].texts]
    assert texts == ["0.00", "110.0"]


def test_metric_bars_group_policies_by_workload():
    summary = make_summary() + [s | {"workload": "large"} for s in make_summary()[:1]]
    ax = metric_bars(summary, keys=("mean_bsld",)).axes[0]
    bars = [c for c in ax.containers if isinstance(c, BarContainer)]
    assert [len(c.patches) for c in bars] == [2, 2]
    assert np.isnan(bars[1].patches[1].get_height())  # sjf+easy did not run on "large"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["small", "large"]


def test_utilization_over_time_steps_through_the_overlap_for_the_first_seed():
    ax = utilization_over_time(TRACES).axes[0]
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("time [h]", "GPU utilization [fraction]")
    assert ax.get_title() == "small (seed\N{NO-BREAK SPACE}0)"
    lines = ax.get_lines()
    assert [line.get_label() for line in lines] == list(POLICIES)
    np.testing.assert_allclose(lines[0].get_xdata(), np.array([0.0, 5.0, 10.0, 15.0]) / 3600)
    np.testing.assert_allclose(lines[0].get_ydata(), [0.25, 0.75, 0.5, 0.0])


def test_gantt_draws_a_bar_per_job_and_gpu():
    ax = gantt(make_trace("fifo", 0)).axes[0]
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("time [h]", "GPU index")
    bars = ax.patches
    assert sorted(round(p.get_y() + p.get_height() / 2) for p in bars) == [0, 1, 2]
    assert sorted(p.get_width() * 3600 for p in bars) == pytest.approx([10.0, 10.0, 10.0])


def test_gantt_caps_the_number_of_jobs_and_refuses_an_empty_trace():
    trace = make_trace("fifo", 0)
    assert len(gantt(trace, max_jobs=1).axes[0].patches) == 1
    with pytest.raises(ValueError, match="no job that ran"):
        gantt(make_trace("fifo", 0, gantt_rows=False))


def test_missing_matplotlib_is_a_clear_import_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib.backends.backend_agg", None)
    with pytest.raises(ImportError, match=r"pip install 'gpusched\[plot\]'"):
        wait_cdf(TRACES)


def test_utilization_over_time_names_each_policys_smallest_seed_when_they_differ():
    traces = [make_trace("fifo", 0), make_trace("sjf+easy", 2)]
    assert utilization_over_time(traces).axes[0].get_title() == "small (seeds 0, 2 (each policy's smallest))"


def test_plot_all_writes_non_empty_pngs(tmp_path):
    paths = plot_all(make_summary(), TRACES, tmp_path / "plots")
    assert [p.name for p in paths] == ["wait_cdf.png", "bars.png", "utilization.png", "gantt.png"]
    for path in paths:
        data = path.read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 1000


def test_plot_all_skips_the_gantt_chart_without_gantt_entries(tmp_path):
    traces = [make_trace(policy, 0, gantt_rows=False) for policy in POLICIES]
    assert [p.name for p in plot_all(make_summary(), traces, tmp_path)] == ["wait_cdf.png", "bars.png",
                                                                              "utilization.png"]


GPU_WORKLOADS = ("philly_trace.csv.gz[100000:102000]@30", "openb_pod_list_default.csv[4000:6000]",
                 "philly_trace.csv.gz[100000:102000]@30 (high)", "openb_pod_list_default.csv[4000:6000] (high)")
"""Workload names of the gpu suite under two dynamics scenarios: long and without spaces to break at."""
MODEL = "/home/ann/gpusched/runs/train-default-20261201-101010/model.zip"
BEST_MODEL = "/home/ann/gpusched/runs/train-default-20261201-101010/best_model.zip"


def _boxes(fig, artists):
    """The display bounding boxes of ``artists`` once ``fig`` is laid out and drawn."""
    fig.draw_without_rendering()
    renderer = fig.canvas.get_renderer()
    return [artist.get_window_extent(renderer) for artist in artists]


@pytest.mark.parametrize("make", [
    lambda: metric_bars(make_summary((MODEL, BEST_MODEL, "fcfs+easy"), GPU_WORKLOADS)),
    lambda: wait_cdf([make_trace(MODEL, 0), make_trace("fcfs+easy", 0, workload="large")]),
    lambda: utilization_over_time([make_trace(MODEL, 0), make_trace("fcfs+easy", 0)]),
], ids=["bars", "wait_cdf", "utilization"])
def test_the_legend_is_outside_every_axes(make):
    fig = make()
    assert len(fig.legends) == 1 and all(ax.get_legend() is None for ax in fig.axes)
    legend, *axes = _boxes(fig, [fig.legends[0], *fig.axes])
    assert not any(legend.overlaps(box) for box in axes)


def test_models_are_labelled_by_their_run_folder_in_the_legend():
    fig = metric_bars(make_summary((MODEL, BEST_MODEL, "rls:runs/x/model.zip+sjf@0.5")))
    labels = [text.get_text() for text in fig.legends[0].get_texts()]
    assert labels == ["train-default-20261201-101010", "train-default-20261201-101010 (best)", "rls:x+sjf@0.5"]


def test_long_workload_names_are_wrapped_and_their_tick_labels_do_not_overlap():
    fig = metric_bars(make_summary(POLICIES, GPU_WORKLOADS))
    for ax in fig.axes:
        ticks = ax.get_xticklabels()
        assert ["".join(t.get_text().split("\n")).replace(" ", "") for t in ticks] == \
            [name.replace(" ", "") for name in GPU_WORKLOADS]
        boxes = _boxes(fig, ticks)
        assert all(left.x1 < right.x0 for left, right in itertools.pairwise(boxes))


def test_the_bar_subplots_go_below_each_other_when_many_workloads_widen_them():
    eight = [f"{name} #{i}" for i in (1, 2) for name in GPU_WORKLOADS]
    few, many = metric_bars(make_summary()), metric_bars(make_summary(POLICIES, eight))
    assert len({box.y0 for box in _boxes(few, few.axes)}) == 1  # side by side
    assert len({box.x0 for box in _boxes(many, many.axes)}) == 1  # one column


def test_trace_subplots_wrap_into_rows_of_three():
    fig = wait_cdf([make_trace("fifo", 0, workload=f"w{i}") for i in range(4)])
    assert [ax.get_title() for ax in fig.axes] == ["w0", "w1", "w2", "w3"]
    assert len({ax.get_position().y0 for ax in fig.axes}) == 2


def test_a_wait_cdf_whose_waits_are_all_zero_says_so_instead_of_a_line():
    ax = wait_cdf([make_trace(p, 0) | {"wait_s": [0.0, 0.0]} for p in POLICIES]).axes[0]
    assert [t.get_text() for t in ax.texts] == ["every job started at once (all waits 0 s)"]
    assert ax.get_lines() == []


def test_a_wait_cdf_without_completed_jobs_says_so():
    ax = wait_cdf([make_trace(p, 0) | {"wait_s": []} for p in POLICIES]).axes[0]
    assert "no completed jobs" in [t.get_text() for t in ax.texts]
    assert ax.get_lines() == []


def test_a_wait_cdf_names_the_policies_without_completed_jobs_beside_the_others_lines():
    ax = wait_cdf([make_trace("fifo", 0), make_trace("sjf+easy", 0) | {"wait_s": []}]).axes[0]
    assert [t.get_text() for t in ax.texts] == ["no completed jobs: sjf+easy"]
    assert [line.get_label() for line in ax.get_lines()] == ["fifo"]


def test_a_utilization_panel_without_intervals_says_so():
    ax = utilization_over_time([make_trace(p, 0) | {"intervals": []} for p in POLICIES]).axes[0]
    assert "no job ran (no GPU intervals)" in [t.get_text() for t in ax.texts]
    assert ax.get_lines() == []


def test_policies_keep_distinct_styles_and_identical_lines_stay_visible():
    styles = policy_styles([f"p{i}" for i in range(20)])
    assert len({(s.color, s.linestyle, s.hatch) for s in styles.values()}) == 20
    lines = wait_cdf([make_trace(p, 0) for p in POLICIES]).axes[0].get_lines()  # identical waits
    assert lines[0].get_linestyle() != lines[1].get_linestyle()


def test_gantt_colours_of_twenty_consecutive_jobs_do_not_repeat():
    trace = make_trace("fifo", 0) | {"jobs": job_table_of([(job, 10.0 * job, 10.0 * job + 5, [job % 4])
                                                           for job in range(20)])}
    colours = {tuple(patch.get_facecolor()) for patch in gantt(trace).axes[0].patches}
    assert len(colours) > 10


def test_gantt_title_names_the_model_by_its_run():
    assert gantt(make_trace(MODEL, 0)).axes[0].get_title().startswith("train-default-20261201-101010 on small")


def test_steady_state_figures_say_so_and_whole_run_figures_do_not():
    steady = make_figures(make_summary(), TRACES, metrics_window=(0.1, 0.1))
    captions = {name: [t.get_text() for t in fig.texts] for name, fig in steady.items()}
    left_out = "first 10% and last 10% of the jobs by submit time left out"
    assert captions["wait_cdf.png"] == captions["bars.png"] == [f"steady state: {left_out}"]
    assert captions["utilization.png"] == captions["gantt.png"] == [
        f"steady-state metrics ({left_out}); the whole run drawn"]
    assert all(fig.texts == [] for fig in make_figures(make_summary(), TRACES).values())
