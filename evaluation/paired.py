"""Paired comparisons of policies against a reference policy, seed by seed, with bootstrap intervals.

A *case* is one workload (the rows' ``workload`` key). Within a case every policy ran on the same seeds as the
reference, and seed ``s`` of every policy met the same jobs (and the same failures), so the comparison is paired:
policy and reference are compared seed by seed, which removes the seed-to-seed variation of the workload from the
comparison. :func:`paired_comparison` returns one *entry* per (case, policy), reference included, whose fields
:data:`ENTRY_FIELDS_DOC` documents; :func:`paired_table` prints them; :func:`stratified_iqm` aggregates the per-seed
ratios of a policy over several cases.

**Definitions** (per case and policy, over the n paired seeds; p_s and r_s are the policy's and the reference's
value of the metric on seed s, in the metric's unit):

- ratio: the ratio of means, sum of p_s / sum of r_s [dimensionless] (stable when the reference barely waits on
  some seeds, where per-seed ratios explode); the reference's values must not all be 0 (``ValueError``);
- diff: mean over seeds of p_s − r_s [the metric's unit], and sd_diff, their sample standard deviation (ddof=1;
  0 with one seed);
- seeds_for_10pct: seeds a paired test needs to detect a difference of 10 % of the reference's mean at two-sided
  α = 0.05 with 80 % power, by the normal approximation n = ⌈((z₀.₉₇₅ + z₀.₈) · sd_diff / (0.1 · mean r))²⌉
  with z₀.₉₇₅ = 1.959964 and z₀.₈ = 0.841621, and at least 2 (a t-test would want a seed or two more when n is
  small);
- iqm_ratio: the interquartile mean of the per-seed ratios max(p_s, 1) / max(r_s, 1) (:data:`RATIO_FLOOR`),
  rliable's IQM: sort the n values, drop ⌊0.25 n⌋ at
  each end, average the rest (as ``scipy.stats.trim_mean(x, 0.25)``); robust to one odd seed;
- guards: for each guard metric (:data:`DEFAULT_GUARDS`), the policy's mean over its seeds and its interval, so
  that a better headline metric bought with worse tails, utilization, fairness or rejections shows.

**Intervals** are 95 % percentile bootstraps over seeds: draw an (n_boot × n) matrix of seed indices with
replacement, compute the statistic on each drawn row, take the 2.5th and 97.5th percentiles. Ratio and diff
resample *pairs* (one draw picks a seed for numerator and denominator alike); the guard intervals are those of the
policy's own means (unpaired) over the same draws. Every (case, policy) draws from a fresh
``np.random.default_rng(seed)``, so entries with the same n are resampled identically (common random numbers) and
the output is deterministic for a given ``seed``. Bounds are clipped to the [min, max] of the values bootstrapped
(removing floating-point overshoot: equal per-seed ratios r give exactly [r, r]).

**Aggregate over cases** (:func:`stratified_iqm`), as rliable reports an algorithm over several tasks: the IQM of
the per-seed ratios of all cases pooled (each ratio is the run's score normalized by the reference's on the same
case and seed), with a stratified bootstrap that resamples seeds within each case independently, then pools.

rliable (Agarwal et al., "Deep RL at the edge of the statistical precipice", NeurIPS 2021) is not imported: its
dependency ``arch`` fails to import with pandas 3. Its definitions of the IQM and of the stratified percentile
bootstrap are implemented here with numpy.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from evaluation.aggregate import CI_LEVEL, _escape, bootstrap_ci, format_interval, format_number

DEFAULT_GUARDS = ("p95_wait_s", "p99_wait_s", "mean_bsld", "utilization", "jain_fairness", "n_rejected")
"""Metrics reported beside the headline metric of a comparison (keys of :data:`envs.core.metrics.METRIC_DOCS`):
95th and 99th percentile wait [s], mean bounded slowdown [dimensionless], GPU utilization [fraction], Jain's
fairness index over users [1/n .. 1], jobs rejected at submission [count]."""

Z_ALPHA = 1.959964
"""Standard normal quantile for a two-sided test at α = 0.05 (z₀.₉₇₅)."""

Z_POWER = 0.841621
"""Standard normal quantile for 80 % power (z₀.₈)."""

DETECTABLE_FRACTION = 0.1
"""The difference, as a fraction of the reference's mean, that ``seeds_for_10pct`` sizes a paired test for."""

IQM_TRIM = 0.25
"""Fraction of the values dropped at each end by the interquartile mean."""

RATIO_DECIMALS = 3
RATIO_FLOOR = 1.0
"""Per-seed ratios floor both values at this [the metric's unit; 1 s for waits]."""
"""Decimal places of the ratios in :func:`paired_table`."""

ENTRY_FIELDS_DOC: dict[str, str] = {
    "case": "the workload name (rows' ``workload``)",
    "policy": "policy name",
    "reference": "the reference policy's name",
    "metric": "the headline metric's key",
    "n": "number of paired seeds [count]",
    "mean": "policy's mean of the metric over the seeds [metric's unit]",
    "reference_mean": "reference's mean of the metric over the same seeds [metric's unit]",
    "ratio": "sum over seeds of policy / sum of reference (ratio of means) [dimensionless]; 1 for the reference",
    "ratio_ci": "[low, high] paired 95 % bootstrap interval of ratio [dimensionless]",
    "diff": "mean over seeds of policy − reference [metric's unit]; 0 for the reference",
    "diff_ci": "[low, high] paired 95 % bootstrap interval of diff [metric's unit]",
    "sd_diff": "sample standard deviation (ddof=1) of the per-seed differences, 0 with one seed [metric's unit]",
    "seeds_for_10pct": "seeds a paired test needs to detect 10 % of reference_mean (α = 0.05, power 0.8) [count]",
    "iqm_ratio": "interquartile mean of the per-seed ratios [dimensionless]",
    "iqm_ci": "[low, high] 95 % bootstrap interval of iqm_ratio [dimensionless]",
    "guards": "{guard key: {'mean': policy's mean, 'ci95': [low, high]}} in each guard's unit (unpaired)",
}
"""The fields of one entry returned by :func:`paired_comparison` (all JSON-serializable)."""

Runs = dict[Hashable, Mapping[str, Any]]
"""One policy's rows in one case, by seed."""


def iqm(values: np.ndarray, axis: int = -1) -> np.ndarray:
    """Interquartile mean of ``values`` along ``axis`` (rliable's IQM): sort, drop ⌊0.25 n⌋ values at each end,
    average the rest; the same as ``scipy.stats.trim_mean(values, 0.25, axis)``. Same unit as ``values``."""
    ordered = np.sort(np.asarray(values, dtype=np.float64), axis=axis)
    n = ordered.shape[axis]
    cut = int(IQM_TRIM * n)
    return np.take(ordered, np.arange(cut, n - cut), axis=axis).mean(axis=axis)


def stratified_bootstrap_iqm(strata: Sequence[np.ndarray], n_boot: int, rng: np.random.Generator) -> list[float]:
    """Percentile-bootstrap :data:`CI_LEVEL` interval [low, high] of the IQM of the pooled ``strata``.

    Each resample draws len(stratum) values with replacement within every stratum (a case's per-seed values),
    independently, pools them and takes their IQM (rliable's stratified bootstrap); one stratum is the plain
    bootstrap. The bounds are clipped to the [min, max] of the pooled values.
    """
    pooled = np.concatenate(strata)
    samples = np.concatenate([stratum[rng.integers(0, len(stratum), size=(n_boot, len(stratum)))]
                              for stratum in strata], axis=1)
    tail = 100 * (1 - CI_LEVEL) / 2
    low, high = np.percentile(iqm(samples, axis=1), [tail, 100 - tail])
    return [float(np.clip(low, pooled.min(), pooled.max())), float(np.clip(high, pooled.min(), pooled.max()))]


def seeds_for_10pct(sd_diff: float, reference_mean: float) -> int:
    """Seeds a paired test needs to detect a difference of :data:`DETECTABLE_FRACTION` × ``reference_mean`` at
    two-sided α = 0.05 with 80 % power: ⌈((Z_ALPHA + Z_POWER) · sd_diff / (0.1 · reference_mean))²⌉, at least 2
    (normal approximation). ``sd_diff`` and ``reference_mean`` in the metric's unit, ``reference_mean`` > 0."""
    needed = ((Z_ALPHA + Z_POWER) * sd_diff / (DETECTABLE_FRACTION * reference_mean)) ** 2
    return max(2, math.ceil(needed))


def _by_case(rows: Iterable[Mapping[str, Any]]) -> dict[Hashable, dict[Hashable, Runs]]:
    """``rows`` as {case: {policy: {seed: row}}}, all in first-appearance order; two rows for the same (case,
    policy, seed) are a ``ValueError``."""
    cases: dict[Hashable, dict[Hashable, Runs]] = {}
    for row in rows:
        case, policy, seed = row["workload"], row["policy"], row["seed"]
        runs = cases.setdefault(case, {}).setdefault(policy, {})
        if seed in runs:
            raise ValueError(f"case {case!r}: two rows for policy {policy!r}, seed {seed!r} (different loads or "
                             "windows? give each its own workload name)")
        runs[seed] = row
    return cases


def _policies(case: Hashable, runs: dict[Hashable, Runs], reference: str) -> list[Hashable]:
    """The case's policies, reference first; ``ValueError`` when the reference did not run on the case."""
    if reference not in runs:
        raise ValueError(f"case {case!r}: no rows of the reference policy {reference!r} (policies: {list(runs)})")
    return [reference, *(policy for policy in runs if policy != reference)]


def _paired_seeds(case: Hashable, policy: Hashable, reference: str, runs: dict[Hashable, Runs]) -> list[Hashable]:
    """The seeds of ``reference`` in the case (its order), after checking that ``policy`` ran exactly those."""
    ours, theirs = runs[policy], runs[reference]
    lacking, extra = [s for s in theirs if s not in ours], [s for s in ours if s not in theirs]
    problems = ([f"policy {policy!r} lacks seeds {lacking} that reference {reference!r} has"] if lacking else []) + (
        [f"reference {reference!r} lacks seeds {extra} that policy {policy!r} has"] if extra else [])
    if problems:
        raise ValueError(f"case {case!r}: {'; '.join(problems)}: run both on the same seeds")
    return list(theirs)


def _values(case: Hashable, policy: Hashable, runs: Runs, seeds: Sequence[Hashable], key: str) -> np.ndarray:
    """The values of metric ``key`` of ``runs`` on ``seeds``, as floats; ``ValueError`` when one is missing or not
    a finite number."""
    values = []
    for seed in seeds:
        value = runs[seed].get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float, np.number)) or not math.isfinite(value):
            raise ValueError(f"case {case!r}, policy {policy!r}, seed {seed!r}: metric {key!r} is {value!r}, "
                             "not a finite number")
        values.append(float(value))
    return np.array(values, dtype=np.float64)


def _paired_values(case: Hashable, policy: Hashable, reference: str, runs: dict[Hashable, Runs],
                   metric: str) -> tuple[list[Hashable], np.ndarray, np.ndarray]:
    """The paired seeds, and the policy's and the reference's values of ``metric`` on them; ``ValueError`` when a
    reference value is not > 0 (a ratio to it would mean nothing)."""
    seeds = _paired_seeds(case, policy, reference, runs)
    ours = _values(case, policy, runs[policy], seeds, metric)
    theirs = _values(case, reference, runs[reference], seeds, metric)
    if theirs.sum() <= 0:
        raise ValueError(f"case {case!r}: reference {reference!r} has {metric} <= 0 on every seed: a ratio to it "
                         "means nothing; compare another metric or pick another reference")
    return seeds, ours, theirs


def ratio_of_means_ci(ours: np.ndarray, theirs: np.ndarray, n_boot: int, rng: np.random.Generator) -> list[float]:
    """Paired percentile-bootstrap :data:`CI_LEVEL` interval of sum(ours) / sum(theirs): each draw resamples seeds
    with replacement, the same seeds for numerator and denominator; [r, r] for one seed."""
    n = len(ours)
    point = float(ours.sum() / theirs.sum())
    if n == 1:
        return [point, point]
    draws = rng.integers(0, n, size=(n_boot, n))
    num, den = ours[draws].sum(axis=1), theirs[draws].sum(axis=1)
    ratios = num[den > 0] / den[den > 0]
    tail = 100 * (1 - CI_LEVEL) / 2
    low, high = np.percentile(ratios, [tail, 100 - tail])
    return [float(low), float(high)]


def seed_ratios(ours: np.ndarray, theirs: np.ndarray) -> np.ndarray:
    """Per-seed ratios with both values floored at :data:`RATIO_FLOOR` (a wait under a second counts as one
    second, so that a seed on which the reference never waits gives a finite ratio)."""
    return np.maximum(ours, RATIO_FLOOR) / np.maximum(theirs, RATIO_FLOOR)


def _entry(case: Hashable, policy: Hashable, reference: str, runs: dict[Hashable, Runs], metric: str,
           guards: Sequence[str], n_boot: int, seed: int) -> dict[str, Any]:
    """One entry of :func:`paired_comparison` (:data:`ENTRY_FIELDS_DOC`)."""
    seeds, ours, theirs = _paired_values(case, policy, reference, runs, metric)
    ratios, diffs = seed_ratios(ours, theirs), ours - theirs
    guard_values = [_values(case, policy, runs[policy], seeds, key) for key in guards]
    columns = np.column_stack([diffs, *guard_values])
    diff_ci, *guard_cis = bootstrap_ci(columns, n_boot, np.random.default_rng(seed))
    ratio_ci = ratio_of_means_ci(ours, theirs, n_boot, np.random.default_rng(seed))
    sd_diff = float(np.std(diffs, ddof=1)) if len(diffs) > 1 else 0.0
    return {
        "case": case,
        "policy": policy,
        "reference": reference,
        "metric": metric,
        "n": len(seeds),
        "mean": float(ours.mean()),
        "reference_mean": float(theirs.mean()),
        "ratio": float(ours.sum() / theirs.sum()),
        "ratio_ci": [float(bound) for bound in ratio_ci],
        "diff": float(diffs.mean()),
        "diff_ci": [float(bound) for bound in diff_ci],
        "sd_diff": sd_diff,
        "seeds_for_10pct": seeds_for_10pct(sd_diff, float(theirs.mean())),
        "iqm_ratio": float(iqm(ratios)),
        "iqm_ci": stratified_bootstrap_iqm([ratios], n_boot, np.random.default_rng(seed)),
        "guards": {key: {"mean": float(values.mean()), "ci95": [float(bound) for bound in ci]}
                   for key, values, ci in zip(guards, guard_values, guard_cis, strict=True)},
    }


def paired_comparison(rows: Iterable[Mapping[str, Any]], reference: str, metric: str = "mean_wait_s",
                      guards: Sequence[str] = DEFAULT_GUARDS, n_boot: int = 10_000,
                      seed: int = 0) -> list[dict[str, Any]]:
    """Every policy of ``rows`` against ``reference``, case by case, paired by seed (module docstring).

    ``rows``: dicts with ``policy``, ``workload`` (the case), ``seed`` and numeric metrics, as
    :mod:`evaluation.runner` writes them. Returns one entry (:data:`ENTRY_FIELDS_DOC`) per (case, policy): cases in
    first-appearance order, the reference first within each (ratio 1, interval [1, 1], diff 0), then the others in
    first-appearance order. Deterministic for a given ``seed``. ``ValueError`` when a case lacks the reference, a
    policy's seeds differ from the reference's, two rows share (case, policy, seed), a metric is missing or not a
    finite number, or a reference value of ``metric`` is not > 0.
    """
    if n_boot < 1:
        raise ValueError(f"n_boot must be at least 1, got {n_boot}")
    return [_entry(case, policy, reference, runs, metric, guards, n_boot, seed)
            for case, runs in _by_case(rows).items() for policy in _policies(case, runs, reference)]


def stratified_iqm(rows: Iterable[Mapping[str, Any]], reference: str, metric: str = "mean_wait_s",
                   cases: Sequence[Hashable] | None = None, n_boot: int = 10_000,
                   seed: int = 0) -> dict[Hashable, tuple[float, list[float], int]]:
    """Each policy's IQM of its per-seed ratios to ``reference`` over several cases, pooled, with a stratified
    bootstrap interval (module docstring): ``{policy: (iqm [dimensionless], [low, high], seeds pooled [count])}``,
    the reference first, then the other policies in first-appearance order.

    ``cases``: the workloads to pool (default: all of them); every policy must have run on every one of them, on
    the reference's seeds. Every policy draws from a fresh ``np.random.default_rng(seed)``, the cases in the order
    given. ``ValueError`` as :func:`paired_comparison`, or when a policy or a case is missing.
    """
    if n_boot < 1:
        raise ValueError(f"n_boot must be at least 1, got {n_boot}")
    by_case = _by_case(rows)
    chosen = list(by_case) if cases is None else list(cases)
    unknown = [case for case in chosen if case not in by_case]
    if unknown or not chosen:
        raise ValueError(f"no rows for cases {unknown or chosen} (cases: {list(by_case)})")
    policies = list(dict.fromkeys(p for case in chosen for p in _policies(case, by_case[case], reference)))
    result: dict[Hashable, tuple[float, list[float], int]] = {}
    for policy in policies:
        strata = []
        for case in chosen:
            if policy not in by_case[case]:
                raise ValueError(f"case {case!r}: no rows of policy {policy!r}; pool only the cases that all share")
            _, ours, theirs = _paired_values(case, policy, reference, by_case[case], metric)
            strata.append(seed_ratios(ours, theirs))
        interval = stratified_bootstrap_iqm(strata, n_boot, np.random.default_rng(seed))
        result[policy] = (float(iqm(np.concatenate(strata))), interval, sum(len(s) for s in strata))
    return result


def _interval_cell(mean: float, ci: Sequence[float], n: int, decimals: int | None = None) -> str:
    """``mean [low, high]``; the mean alone with one seed (its interval would be [mean, mean])."""
    if n <= 1:
        return format_number(mean, decimals)
    return format_interval(mean, ci[0], ci[1], decimals)


def paired_table(entries: Sequence[Mapping[str, Any]], guards: Sequence[str] = DEFAULT_GUARDS) -> str:
    """A Markdown table of ``entries`` (from :func:`paired_comparison`, one metric and reference): one row per
    entry with its case, policy, seeds, mean of the metric, ratio to the reference, difference, IQM of the ratios
    and each guard's mean, intervals as ``mean [low, high]`` (ratios with 3 decimals, other numbers at about three
    significant digits; the mean alone with one seed), "—" for a guard an entry lacks. No trailing newline."""
    if not entries:
        raise ValueError("no entries to tabulate")
    metric, reference = entries[0]["metric"], entries[0]["reference"]
    if any((e["metric"], e["reference"]) != (metric, reference) for e in entries):
        raise ValueError("entries compare different metrics or references: tabulate them apart")
    header = ["case", "policy", "seeds", metric, f"ratio to {reference}", f"diff ({metric})", "IQM ratio", *guards]
    lines = ["| " + " | ".join(_escape(name) for name in header) + " |", "|---|---|---:|" + "---:|" * (len(header) - 3)]
    for e in entries:
        cells = [
            e["case"], e["policy"], e["n"], format_number(e["mean"]),
            _interval_cell(e["ratio"], e["ratio_ci"], e["n"], RATIO_DECIMALS),
            _interval_cell(e["diff"], e["diff_ci"], e["n"]),
            _interval_cell(e["iqm_ratio"], e["iqm_ci"], e["n"], RATIO_DECIMALS),
            *(_interval_cell(e["guards"][key]["mean"], e["guards"][key]["ci95"], e["n"]) if key in e["guards"]
              else "—" for key in guards),
        ]
        lines.append("| " + " | ".join(_escape(cell) for cell in cells) + " |")
    return "\n".join(lines)
