"""Evaluation plots: figures built from hand-made traces and summaries, and the PNG files plot_all writes."""

from __future__ import annotations

import sys

import numpy as np
import pytest

pytest.importorskip("matplotlib", reason="plots need the optional extra: pip install 'gpusched[plot]'")

from matplotlib.container import BarContainer

from evaluation.plots import (
    ecdf,
    gantt,
    metric_bars,
    plot_all,
    utilization_over_time,
    utilization_steps,
    wait_cdf,
)

POLICIES = ("fifo", "sjf+easy")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def make_trace(policy: str, seed: int, workload: str = "small", gantt_rows: bool = True) -> dict:
    """Two jobs of shares 1 and 2 on 4 GPUs, overlapping during [5, 10) s; waits span several decades."""
    return {
        "policy": policy,
        "workload": workload,
        "seed": seed,
        "total_gpus": 4,
        "wait_s": [0.0, 2.0 + seed, 5000.0],
        "intervals": [[0.0, 10.0, 1.0], [5.0, 15.0, 2.0]],
        "gantt": [[0, 0.0, 10.0, [0]], [1, 5.0, 15.0, [1, 2]]] if gantt_rows else [],
    }


def make_summary() -> list[dict]:
    return [
        {
            "policy": policy,
            "workload": "small",
            "cluster": "tiny",
            "n_seeds": 3,
            "metrics": {"mean_bsld": 2.0 + i, "utilization": 0.5 + i / 10},
            "ci95": {"mean_bsld": [1.5 + i, 2.5 + i], "utilization": [0.45 + i / 10, 0.55 + i / 10]},
        }
        for i, policy in enumerate(POLICIES)
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
    assert [ax.get_title() for ax in fig.axes] == ["mean_bsld", "utilization"]
    for ax, key in zip(fig.axes, ("mean_bsld", "utilization"), strict=True):
        bars = [c for c in ax.containers if isinstance(c, BarContainer)]
        assert [c.get_label() for c in bars] == list(POLICIES)
        assert [len(c.patches) for c in bars] == [1, 1]
        heights = [c.patches[0].get_height() for c in bars]
        assert heights == pytest.approx([e["metrics"][key] for e in make_summary()])
        assert all(c.errorbar is not None for c in bars)
        assert ax.get_ylabel() == key


def test_metric_bars_group_policies_by_workload():
    summary = make_summary() + [s | {"workload": "large"} for s in make_summary()[:1]]
    ax = metric_bars(summary, keys=("mean_bsld",)).axes[0]
    bars = [c for c in ax.containers if isinstance(c, BarContainer)]
    assert [len(c.patches) for c in bars] == [2, 2]
    assert np.isnan(bars[1].patches[1].get_height())  # sjf+easy did not run on "large"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["small", "large"]


def test_utilization_over_time_steps_through_the_overlap_for_the_first_seed():
    ax = utilization_over_time(TRACES).axes[0]
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("time [h]", "GPU utilization")
    lines = ax.get_lines()
    assert [line.get_label() for line in lines] == [f"{p} (seed 0)" for p in POLICIES]
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
    with pytest.raises(ValueError, match="no gantt"):
        gantt(make_trace("fifo", 0, gantt_rows=False))


def test_missing_matplotlib_is_a_clear_import_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib.backends.backend_agg", None)
    with pytest.raises(ImportError, match=r"pip install 'gpusched\[plot\]'"):
        wait_cdf(TRACES)


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
