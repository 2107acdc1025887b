"""Aggregation of per-run rows over seeds: means, bootstrap confidence intervals, the Markdown table."""

from __future__ import annotations

import numpy as np
import pytest

from envs.core.metrics import METRIC_DOCS
from evaluation.aggregate import (
    ID_KEYS,
    METRIC_KEYS_DOC,
    aggregate,
    format_cell,
    format_interval,
    format_number,
    markdown_table,
)

WAITS = {"fifo": [10.0, 20.0, 60.0], "sjf+easy": [5.0, 7.0, 9.5]}
UTILS = {"fifo": [0.5, 0.6, 0.7], "sjf+easy": [0.8, 0.8, 0.8]}


def make_rows() -> list[dict]:
    """3 seeds × 2 policies on one workload, interleaved by seed as a harness would produce them."""
    rows = []
    for seed in range(3):
        for policy in WAITS:
            rows.append(
                {
                    "policy": policy,
                    "workload": "small",
                    "cluster": "tiny",
                    "seed": seed,
                    "load": 1.0,
                    "mean_wait_s": WAITS[policy][seed],
                    "p95_wait_s": 2 * WAITS[policy][seed],
                    "mean_bsld": 1.0 + WAITS[policy][seed] / 10,
                    "utilization": UTILS[policy][seed],
                    "makespan_s": 3600.0 + seed,
                    "n_completed": 100 + seed,
                    "decision_p50_us": 3.0,
                    "decision_p99_us": 9.0,
                    "sim_wall_s": 0.1,
                }
            )
    return rows


def test_one_entry_per_policy_and_workload_in_first_appearance_order():
    summary = aggregate(make_rows(), n_boot=500)
    assert [(e["policy"], e["workload"], e["cluster"], e["n_seeds"]) for e in summary] == [
        ("fifo", "small", "tiny", 3),
        ("sjf+easy", "small", "tiny", 3),
    ]


def test_every_metric_key_but_the_identifying_ones_is_aggregated():
    rows = make_rows()
    entry = aggregate(rows, n_boot=100)[0]
    expected = [key for key in rows[0] if key not in ID_KEYS]
    assert list(entry["metrics"]) == expected
    assert list(entry["ci95"]) == expected


@pytest.mark.parametrize("policy", list(WAITS))
def test_means_are_exact_and_ci_bounds_lie_within_the_values(policy):
    entry = next(e for e in aggregate(make_rows(), n_boot=2000) if e["policy"] == policy)
    for key, values in (("mean_wait_s", WAITS[policy]), ("utilization", UTILS[policy])):
        assert entry["metrics"][key] == pytest.approx(np.mean(values), rel=1e-12)
        low, high = entry["ci95"][key]
        assert min(values) <= low <= high <= max(values)
    low, high = entry["ci95"]["mean_wait_s"]
    assert low < entry["metrics"]["mean_wait_s"] < high


def test_constant_metric_has_a_degenerate_interval():
    entry = next(e for e in aggregate(make_rows()) if e["policy"] == "sjf+easy")
    assert entry["ci95"]["utilization"] == [0.8, 0.8]
    assert entry["ci95"]["decision_p50_us"] == [3.0, 3.0]


def test_single_row_has_the_value_as_mean_and_both_bounds():
    row = make_rows()[0]
    (entry,) = aggregate([row])
    assert entry["n_seeds"] == 1
    assert entry["metrics"]["mean_wait_s"] == row["mean_wait_s"]
    assert entry["ci95"]["mean_wait_s"] == [row["mean_wait_s"], row["mean_wait_s"]]


def test_summary_is_deterministic_and_only_the_intervals_depend_on_the_seed():
    rows = make_rows()
    first = aggregate(rows, n_boot=300, seed=7)
    assert first == aggregate(rows, n_boot=300, seed=7)
    other = aggregate(rows, n_boot=300, seed=8)
    assert [e["metrics"] for e in first] == [e["metrics"] for e in other]
    # Three rows put the 2.5 % and 97.5 % resampled means at the extremes; ten distinct rows do not.
    many = [make_rows()[0] | {"seed": seed, "mean_wait_s": float(seed**2)} for seed in range(10)]
    assert aggregate(many, n_boot=300, seed=7)[0]["ci95"] != aggregate(many, n_boot=300, seed=8)[0]["ci95"]


def test_a_groups_interval_does_not_depend_on_the_other_groups():
    rows = make_rows()
    alone = aggregate([r for r in rows if r["policy"] == "fifo"], n_boot=300)
    assert alone[0] == aggregate(rows, n_boot=300)[0]


def test_row_missing_a_metric_is_an_error():
    rows = make_rows()
    del rows[2]["utilization"]
    with pytest.raises(ValueError, match="lacks"):
        aggregate(rows)


def test_markdown_table_has_a_row_per_policy_with_mean_and_interval_bounds():
    summary = aggregate(make_rows(), n_boot=500)
    table = markdown_table(summary)
    lines = table.splitlines()
    assert lines[0].startswith("| policy | workload | seeds | mean_wait_s")
    assert len(lines) == 2 + len(WAITS)
    for policy in WAITS:
        assert any(line.startswith(f"| {policy} | small | 3 |") for line in lines)
    low, high = summary[0]["ci95"]["mean_wait_s"]
    assert f"| 30.00 [{low:.2f}, {high:.2f}] |" in table  # fifo's mean wait, bounds at the mean's precision
    assert "±" not in table
    assert all(line.count("|") == lines[0].count("|") for line in lines)


def test_multi_seed_cell_is_the_mean_and_its_interval_at_the_means_precision():
    entry = {"n_seeds": 3, "metrics": {"mean_wait_s": 1234.4}, "ci95": {"mean_wait_s": [987.6, 1500.2]}}
    assert format_cell(entry, "mean_wait_s") == "1,234 [988, 1,500]"
    assert format_interval(0.912, 0.8713, 0.9551, decimals=3) == "0.912 [0.871, 0.955]"


def test_single_seed_cell_is_the_mean_alone():
    (entry,) = aggregate([make_rows()[0]])
    assert format_cell(entry, "mean_wait_s") == "10.00"
    assert format_cell(entry, "no_such_metric") == "—"


@pytest.mark.parametrize(
    ("value", "text"),
    [(0.0, "0.00"), (0.7341, "0.734"), (0.00123, "0.00123"), (3.14159, "3.14"), (123.456, "123.5"),
     (123456.7, "123,457"), (-2.5, "-2.50")],
)
def test_numbers_are_formatted_with_about_three_significant_digits(value, text):
    assert format_number(value) == text


def test_every_metric_key_is_documented():
    assert set(METRIC_DOCS) <= set(METRIC_KEYS_DOC)
    row = make_rows()[0]
    assert all(key in METRIC_KEYS_DOC for key in ("decision_p50_us", "decision_p99_us", "sim_wall_s"))
    assert not set(ID_KEYS) & set(METRIC_KEYS_DOC)
    assert set(row) - set(ID_KEYS) <= set(METRIC_KEYS_DOC)
