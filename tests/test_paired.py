"""Paired comparisons against a reference policy: per-seed ratios and differences, their bootstrap intervals, the
IQM and its stratified bootstrap over cases, the seeds a paired test needs, the Markdown table."""

from __future__ import annotations

import math

import numpy as np
import pytest

from envs.core.metrics import METRIC_DOCS
from evaluation.paired import (
    DEFAULT_GUARDS,
    iqm,
    paired_comparison,
    paired_table,
    seeds_for_10pct,
    stratified_iqm,
)

REFERENCE_WAITS = [100.0, 200.0, 400.0]
POLICY_WAITS = [90.0, 180.0, 440.0]


def make_rows(waits: dict[str, list[float]], workload: str = "small", seeds: list[int] | None = None) -> list[dict]:
    """One row per policy and seed, interleaved by seed as the runner writes them; every guard metric is derived
    from the wait so that the guards have known means."""
    rows = []
    for i, seed in enumerate(seeds if seeds is not None else range(len(next(iter(waits.values()))))):
        for policy, values in waits.items():
            wait = values[i]
            rows.append({"policy": policy, "workload": workload, "cluster": "tiny", "seed": seed, "load": 1.0,
                         "mean_wait_s": wait, "p95_wait_s": 2 * wait, "p99_wait_s": 3 * wait,
                         "mean_bsld": 1 + wait / 100, "utilization": 0.5, "jain_fairness": 0.9, "n_rejected": seed})
    return rows


def hand_rows() -> list[dict]:
    return make_rows({"ref": REFERENCE_WAITS, "pol": POLICY_WAITS})


def test_default_guards_are_metrics_that_summarize_reports():
    assert set(DEFAULT_GUARDS) <= set(METRIC_DOCS)


def test_three_seed_comparison_matches_the_hand_computation():
    ref, pol = paired_comparison(hand_rows(), "ref", n_boot=2000)
    assert (ref["policy"], pol["policy"]) == ("ref", "pol")
    assert pol["n"] == 3
    assert pol["mean"] == pytest.approx(710 / 3)
    assert pol["reference_mean"] == pytest.approx(700 / 3)
    assert pol["ratio"] == pytest.approx(710 / 700)  # the ratio of means
    # differences -10, -20, +40: mean 10/3; deviations -40/3, -70/3, 110/3; squares sum to 18600/9, over n-1 = 2
    assert pol["diff"] == pytest.approx(10 / 3)
    assert pol["sd_diff"] == pytest.approx(math.sqrt(18600 / 9 / 2))  # 32.1455
    # ((1.959964 + 0.841621) × 32.1455 / (0.1 × 233.333))² = (2.801585 × 1.37767)² = 14.897 → 15 seeds
    assert pol["seeds_for_10pct"] == 15
    assert pol["ratio_ci"][0] <= pol["ratio"] <= pol["ratio_ci"][1]
    assert 0.9 <= pol["ratio_ci"][0] < pol["ratio_ci"][1] <= 1.1
    assert pol["diff_ci"][0] <= pol["diff"] <= pol["diff_ci"][1]
    assert pol["iqm_ratio"] == pytest.approx((0.9 + 0.9 + 1.1) / 3)  # 3 values: IQM trims int(0.75) = 0 at each end
    assert pol["guards"]["p95_wait_s"]["mean"] == pytest.approx(2 * 710 / 3)
    assert pol["guards"]["n_rejected"]["mean"] == pytest.approx(1.0)
    low, high = pol["guards"]["p99_wait_s"]["ci95"]
    assert 270 <= low <= 710 <= high <= 1320


def test_reference_entry_is_first_with_ratio_one_and_zero_difference():
    ref = paired_comparison(hand_rows(), "ref", n_boot=500)[0]
    assert ref["policy"] == "ref"
    assert (ref["ratio"], ref["ratio_ci"], ref["iqm_ratio"], ref["iqm_ci"]) == (1.0, [1.0, 1.0], 1.0, [1.0, 1.0])
    assert (ref["diff"], ref["diff_ci"], ref["sd_diff"], ref["seeds_for_10pct"]) == (0.0, [0.0, 0.0], 0.0, 2)


def test_equal_per_seed_ratios_give_a_point_interval():
    rows = make_rows({"ref": REFERENCE_WAITS, "pol": [0.8 * w for w in REFERENCE_WAITS]})
    pol = paired_comparison(rows, "ref", n_boot=2000)[1]
    assert pol["ratio"] == pytest.approx(0.8)
    assert pol["ratio_ci"] == [0.8, 0.8]
    assert pol["iqm_ci"] == [0.8, 0.8]


def test_policies_with_equal_seed_counts_are_resampled_identically():
    base = [1.0, 0.7, 1.3, 0.9, 1.6, 0.8]
    rows = make_rows({"ref": [100.0] * 6, "a": [100 * r for r in base], "b": [200 * r for r in base]})
    _, a, b = paired_comparison(rows, "ref", n_boot=2000)
    assert b["ratio_ci"] == [2 * bound for bound in a["ratio_ci"]]  # same draws: doubled ratios, doubled bounds
    assert b["iqm_ci"] == [2 * bound for bound in a["iqm_ci"]]


def test_a_seed_the_policy_lacks_is_an_error_naming_it():
    rows = [row for row in hand_rows() if not (row["policy"] == "pol" and row["seed"] == 2)]
    with pytest.raises(ValueError, match=r"case 'small': policy 'pol' lacks seeds \[2\] that reference 'ref' has"):
        paired_comparison(rows, "ref")


def test_a_seed_the_reference_lacks_is_an_error_naming_it():
    rows = hand_rows() + make_rows({"pol": [50.0]}, seeds=[7])
    with pytest.raises(ValueError, match=r"reference 'ref' lacks seeds \[7\] that policy 'pol' has"):
        paired_comparison(rows, "ref")


def test_a_seed_where_the_reference_never_waits_keeps_the_ratios_finite():
    # POLICY_WAITS are 90, 180, 440: ratio of means 710 / 600; per-seed ratios floored at 1 s: 90/1, 180/200, 440/400
    rows = make_rows({"ref": [0.0, 200.0, 400.0], "pol": POLICY_WAITS})
    pol = paired_comparison(rows, "ref", n_boot=500)[1]
    assert pol["ratio"] == pytest.approx(710 / 600)
    assert pol["iqm_ratio"] == pytest.approx((90.0 + 0.9 + 1.1) / 3)


def test_a_reference_that_never_waits_is_an_error():
    rows = make_rows({"ref": [0.0, 0.0, 0.0], "pol": POLICY_WAITS})
    with pytest.raises(ValueError, match=r"reference 'ref' has mean_wait_s <= 0 on every seed"):
        paired_comparison(rows, "ref")


def test_a_case_without_the_reference_is_an_error():
    with pytest.raises(ValueError, match="no rows of the reference policy 'fifo'"):
        paired_comparison(hand_rows(), "fifo")


def test_two_rows_of_one_seed_are_an_error():
    rows = hand_rows()
    with pytest.raises(ValueError, match="two rows for policy 'pol', seed 0"):
        paired_comparison([*rows, dict(rows[1], load=2.0)], "ref")


def test_iqm_averages_the_middle_half():
    values = np.array([7.0, 1.0, 100.0, 3.0, 5.0, 2.0, 6.0, 4.0])  # sorted 1..7, 100: drop 2 each end -> 3, 4, 5, 6
    assert iqm(values) == pytest.approx(4.5)
    ten = np.arange(10.0) ** 2  # int(2.5) = 2 dropped at each end: 4, 9, 16, 25, 36, 49
    assert iqm(ten) == pytest.approx((4 + 9 + 16 + 25 + 36 + 49) / 6)


def test_iqm_agrees_with_scipy_trim_mean():
    stats = pytest.importorskip("scipy.stats")
    values = np.random.default_rng(3).lognormal(size=(4, 13))
    np.testing.assert_allclose(iqm(values, axis=1), stats.trim_mean(values, 0.25, axis=1))


def test_stratified_bootstrap_resamples_seeds_within_each_case():
    rows = (make_rows({"ref": [100.0] * 4, "pol": [50.0] * 4}, workload="a")
            + make_rows({"ref": [100.0] * 4, "pol": [150.0] * 4}, workload="b"))
    result = stratified_iqm(rows, "ref", n_boot=2000)
    # pooled ratios 0.5 ×4, 1.5 ×4: the IQM drops two at each end -> (0.5 + 0.5 + 1.5 + 1.5) / 4 = 1.0; every
    # stratified resample keeps four of each, so the interval is exactly [1, 1] (pooling first would spread it)
    assert result["pol"] == (1.0, [1.0, 1.0], 8)
    assert result["ref"] == (1.0, [1.0, 1.0], 8)


def test_stratified_iqm_interval_stays_inside_the_cases_ratios():
    rows = (make_rows({"ref": [100.0] * 4, "pol": [50.0, 52.0, 56.0, 60.0]}, workload="a")
            + make_rows({"ref": [100.0] * 4, "pol": [140.0, 144.0, 148.0, 150.0]}, workload="b"))
    iqm_ratio, (low, high), n = stratified_iqm(rows, "ref", n_boot=2000)["pol"]
    assert iqm_ratio == pytest.approx((0.56 + 0.60 + 1.40 + 1.44) / 4)  # sorted pooled values 3rd..6th
    assert 0.5 <= low <= iqm_ratio <= high <= 1.5
    assert n == 8
    only_a = stratified_iqm(rows, "ref", cases=["a"], n_boot=2000)["pol"]
    assert only_a[0] == pytest.approx((0.52 + 0.56) / 2)


def test_stratified_iqm_needs_every_policy_on_every_case():
    rows = hand_rows() + make_rows({"ref": REFERENCE_WAITS}, workload="other")
    with pytest.raises(ValueError, match="case 'other': no rows of policy 'pol'"):
        stratified_iqm(rows, "ref")


def test_same_seed_gives_identical_output_and_another_seed_other_intervals():
    rows = make_rows({"ref": [100.0, 120.0, 90.0, 200.0, 150.0], "pol": [80.0, 130.0, 70.0, 150.0, 160.0]})
    assert paired_comparison(rows, "ref", n_boot=1000, seed=5) == paired_comparison(rows, "ref", n_boot=1000, seed=5)
    assert stratified_iqm(rows, "ref", n_boot=1000, seed=5) == stratified_iqm(rows, "ref", n_boot=1000, seed=5)
    other = paired_comparison(rows, "ref", n_boot=1000, seed=6)[1]
    assert other["ratio_ci"] != paired_comparison(rows, "ref", n_boot=1000, seed=5)[1]["ratio_ci"]


def test_table_prints_intervals_as_low_high_brackets():
    entries = paired_comparison(hand_rows(), "ref", n_boot=2000)
    table = paired_table(entries)
    lines = table.splitlines()
    assert lines[0] == ("| case | policy | seeds | mean_wait_s | ratio to ref | diff (mean_wait_s) | IQM ratio | "
                        + " | ".join(DEFAULT_GUARDS) + " |")
    assert len(lines) == 2 + len(entries)
    pol = entries[1]
    low, high = pol["ratio_ci"]
    assert lines[3].startswith(f"| small | pol | 3 | 236.7 | 1.014 [{low:.3f}, {high:.3f}] | 3.33 [")
    assert "| 1.000 [1.000, 1.000] |" in lines[2]
    assert "±" not in table
    assert all(line.count("|") == lines[0].count("|") for line in lines)


def test_table_with_one_seed_prints_the_means_alone():
    entries = paired_comparison(make_rows({"ref": [100.0], "pol": [90.0]}), "ref", guards=("p95_wait_s",))
    assert paired_table(entries, guards=("p95_wait_s",)).splitlines()[3] == (
        "| small | pol | 1 | 90.00 | 0.900 | -10.00 | 0.900 | 180.0 |")


def test_seeds_for_10pct_is_at_least_two():
    assert seeds_for_10pct(0.0, 100.0) == 2
    assert seeds_for_10pct(10.0, 100.0) == math.ceil((1.959964 + 0.841621) ** 2)  # sd = 10 % of the mean: 7.85 -> 8


def test_stratified_iqm_floors_a_reference_that_never_waits_on_a_seed():
    rows = make_rows({"ref": [0.0, 200.0, 400.0], "pol": POLICY_WAITS})
    iqm_ratio, (low, high), n = stratified_iqm(rows, "ref", n_boot=500)["pol"]
    assert n == 3 and iqm_ratio == pytest.approx((90.0 + 0.9 + 1.1) / 3)  # 90/1: the floor at 1 s, not 90/0
    assert np.isfinite([low, high]).all()
