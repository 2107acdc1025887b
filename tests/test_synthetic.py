"""The synthetic workload generator: determinism, statistics against the config, config validation and presets."""

from __future__ import annotations

import dataclasses
import math
import re
from collections import Counter
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from envs.core.cluster import MILLI_PER_GPU
from envs.core.errors import ConfigError
from envs.workload import Workload
from envs.workload.synthetic import (
    SyntheticConfig,
    arrival_rate_per_s,
    expected_gpu_seconds_per_job,
    generate,
    load_workload_config,
    preset_names,
)
from envs.workload.synthetic_config import ArrivalConfig, GpuDemandConfig, JobRuntimeConfig

CAPACITY = 512  # GPUs of the default cluster preset "hetero-64"
DEFAULT = SyntheticConfig()
POISSON = ArrivalConfig(process="poisson")


@cache
def _large(n_jobs: int = 20_000, seed: int = 7) -> Workload:
    """A large default-config sample, shared by the statistical tests (generated once)."""
    return generate(dataclasses.replace(DEFAULT, n_jobs=n_jobs), seed, CAPACITY)


def _column(workload: Workload, attribute: str) -> np.ndarray:
    return np.array([getattr(j, attribute) for j in workload.jobs])


# ---- determinism ---------------------------------------------------------------------------------------------
def test_same_seed_gives_identical_jobs() -> None:
    assert generate(DEFAULT, 3, CAPACITY).jobs == generate(DEFAULT, 3, CAPACITY).jobs


def test_different_seeds_give_different_jobs() -> None:
    a, b = generate(DEFAULT, 3, CAPACITY), generate(DEFAULT, 4, CAPACITY)
    assert _column(a, "submit_time_s").tolist() != _column(b, "submit_time_s").tolist()
    assert _column(a, "runtime_s").tolist() != _column(b, "runtime_s").tolist()


def test_workload_is_sorted_numbered_and_named() -> None:
    workload = generate(DEFAULT, 5, CAPACITY)
    assert len(workload) == DEFAULT.n_jobs
    assert [j.job_id for j in workload.jobs] == list(range(DEFAULT.n_jobs))
    assert np.all(np.diff(_column(workload, "submit_time_s")) >= 0)
    assert workload.name == "default-s5" and workload.source == "generated" and workload.machine_gpus == CAPACITY


def test_doubling_the_load_halves_poisson_arrival_times_and_keeps_the_jobs() -> None:
    base = dataclasses.replace(DEFAULT, arrivals=POISSON)
    low, high = generate(base, 1, CAPACITY), generate(dataclasses.replace(base, target_load=1.7), 1, CAPACITY)
    np.testing.assert_allclose(_column(high, "submit_time_s"), _column(low, "submit_time_s") / 2, rtol=1e-12)
    strip = [dataclasses.replace(j, submit_time_s=0.0) for j in low.jobs]
    assert strip == [dataclasses.replace(j, submit_time_s=0.0) for j in high.jobs]


# ---- statistics ------------------------------------------------------------------------------------------------
def test_gpu_count_mix_matches_config() -> None:
    counts = Counter(_column(_large(), "n_gpus").tolist())
    n = len(_large())
    for gpus, p in zip(DEFAULT.gpus.counts, DEFAULT.gpus.probs, strict=True):
        tolerance = 4 * math.sqrt(p * (1 - p) / n) + 1e-3
        assert counts[gpus] / n == pytest.approx(p, abs=tolerance), f"{gpus}-GPU share"


@pytest.mark.parametrize("n_gpus, tolerance", [(1, 0.06), (8, 0.3)])
def test_median_runtime_matches_config(n_gpus: int, tolerance: float) -> None:
    runtime = DEFAULT.runtime
    mask = _column(_large(), "n_gpus") == n_gpus
    expected = runtime.median_s * n_gpus**runtime.gpu_scaling_exponent
    assert np.median(_column(_large(), "runtime_s")[mask]) == pytest.approx(expected, rel=tolerance)


def test_runtimes_stay_within_bounds() -> None:
    runtime_s = _column(_large(), "runtime_s")
    assert runtime_s.min() >= DEFAULT.runtime.min_s and runtime_s.max() <= DEFAULT.runtime.max_s


def test_offered_load_matches_target_with_deterministic_runtimes() -> None:
    # Fixed runtime and GPU count: the only noise is the Poisson span, about 1/sqrt(n) = 0.7%.
    config = dataclasses.replace(
        DEFAULT,
        n_jobs=20_000,
        arrivals=POISSON,
        runtime=JobRuntimeConfig(median_s=3600.0, sigma=0.0),
        gpus=GpuDemandConfig(counts=(4,), probs=(1.0,)),
    )
    assert expected_gpu_seconds_per_job(config) == pytest.approx(4 * 3600.0 * 4**0.5)
    assert generate(config, 0, CAPACITY).offered_load(CAPACITY) == pytest.approx(config.target_load, rel=0.03)


@pytest.mark.parametrize("process", ["poisson", "diurnal"])
def test_offered_load_matches_target_over_a_large_sample(process: str) -> None:
    config = dataclasses.replace(DEFAULT, n_jobs=100_000, arrivals=ArrivalConfig(process=process))
    assert generate(config, 11, CAPACITY).offered_load(CAPACITY) == pytest.approx(config.target_load, rel=0.08)


def test_expected_gpu_seconds_matches_a_sample_mean() -> None:
    # A light tail (sigma 0.5) keeps the sample mean within a few percent of the closed form.
    config = dataclasses.replace(DEFAULT, n_jobs=100_000, runtime=JobRuntimeConfig(sigma=0.5, max_s=7200.0))
    workload = generate(config, 2, CAPACITY)
    demand = np.mean([j.gpu_share * j.runtime_s for j in workload.jobs])
    assert demand == pytest.approx(expected_gpu_seconds_per_job(config), rel=0.03)
    assert arrival_rate_per_s(config, CAPACITY) == pytest.approx(0.85 * CAPACITY / expected_gpu_seconds_per_job(config))


def test_diurnal_arrivals_concentrate_around_the_peak_hour() -> None:
    # Arrivals within ±6 h of the peak: ∫ (1 + a cos θ) over half a period / the whole = 1/2 + a/π.
    hours = (_column(_large(), "submit_time_s") / 3600.0) % 24.0
    distance = np.abs((hours - DEFAULT.arrivals.peak_hour + 12.0) % 24.0 - 12.0)
    expected = 0.5 + DEFAULT.arrivals.diurnal_amplitude / math.pi
    assert np.mean(distance < 6.0) == pytest.approx(expected, abs=0.02)


@pytest.mark.parametrize("round_up", [True, False])
def test_estimates_are_never_below_runtime(round_up: bool) -> None:
    estimates = dataclasses.replace(DEFAULT.estimates, round_up=round_up)
    workload = generate(dataclasses.replace(DEFAULT, n_jobs=5000, estimates=estimates), 0, CAPACITY)
    estimate_s, runtime_s = _column(workload, "runtime_estimate_s"), _column(workload, "runtime_s")
    assert np.all(estimate_s >= runtime_s)
    assert np.mean(estimate_s > runtime_s) > 0.5  # users overestimate, most of them
    if round_up:
        human = set(DEFAULT.estimates.human_values_s)
        assert all(e in human for e in estimate_s if e <= max(human))


def test_fractional_shares_only_on_single_gpu_jobs() -> None:
    workload = _large()
    fractional = [j for j in workload.jobs if j.is_fractional]
    assert all(j.n_gpus == 1 and j.gpu_milli in DEFAULT.gpus.fractional_milli for j in fractional)
    n_single = sum(j.n_gpus == 1 for j in workload.jobs)
    assert len(fractional) / n_single == pytest.approx(DEFAULT.gpus.fractional_share, abs=0.01)
    assert all(j.gpu_milli == MILLI_PER_GPU for j in workload.jobs if j.n_gpus > 1)


def test_communication_sensitivity_is_zero_for_one_gpu_and_grows_with_size() -> None:
    n_gpus, comm = _column(_large(), "n_gpus"), _column(_large(), "comm_sensitivity")
    assert np.all(comm[n_gpus == 1] == 0) and np.all((comm >= 0) & (comm <= 1))
    means = [comm[n_gpus == n].mean() for n in (2, 8)]
    assert means[0] == pytest.approx(0.4, abs=0.05) and means[1] == pytest.approx(2 * 3 / (2 * 3 + 3), abs=0.03)


def test_constraints_follow_their_shares() -> None:
    jobs = _large().jobs
    typed = [j for j in jobs if j.gpu_types]
    assert all(j.gpu_types == DEFAULT.constraints.typed_gpu_types for j in typed)
    assert len(typed) / len(jobs) == pytest.approx(DEFAULT.constraints.typed_share, abs=0.01)
    needs = [j.gpu_mem_gib for j in jobs if j.gpu_mem_gib > 0]
    assert set(needs) <= set(DEFAULT.constraints.memory_gib)
    assert len(needs) / len(jobs) == pytest.approx(DEFAULT.constraints.memory_share, abs=0.015)


def test_users_have_zipf_activity_and_one_team_each() -> None:
    jobs = _large().jobs
    teams: dict[str, set[str]] = {}
    for j in jobs:
        teams.setdefault(j.user, set()).add(j.team)
    assert all(len(t) == 1 for t in teams.values())
    assert teams["user000"] == {"team0"} and teams["user009"] == {"team1"}
    activity = Counter(j.user for j in jobs)
    assert activity.most_common(1)[0][0] == "user000"
    expected_ratio = 2.0**DEFAULT.users.zipf_exponent  # user000 vs user001
    assert activity["user000"] / activity["user001"] == pytest.approx(expected_ratio, rel=0.1)


def test_datasets_have_fixed_sizes_within_bounds() -> None:
    jobs = _large().jobs
    sizes: dict[str, set[float]] = {}
    for j in jobs:
        if j.dataset_id:
            sizes.setdefault(j.dataset_id, set()).add(j.dataset_gib)
    assert all(len(s) == 1 for s in sizes.values())
    flat = [next(iter(s)) for s in sizes.values()]
    assert min(flat) >= DEFAULT.data.size_min_gib and max(flat) <= DEFAULT.data.size_max_gib
    assert sum(bool(j.dataset_id) for j in jobs) / len(jobs) == pytest.approx(DEFAULT.data.share, abs=0.015)


def test_checkpoints_and_priority_classes_follow_their_shares() -> None:
    jobs = _large().jobs
    intervals = [j.checkpoint_interval_s for j in jobs if j.checkpoint_interval_s > 0]
    assert set(intervals) <= set(DEFAULT.checkpoints.interval_s)
    assert len(intervals) / len(jobs) == pytest.approx(DEFAULT.checkpoints.share, abs=0.015)
    for klass in DEFAULT.priority_classes:
        members = [j for j in jobs if j.qos == klass.name]
        assert all(j.priority == klass.priority for j in members)
        assert len(members) / len(jobs) == pytest.approx(klass.share, abs=0.015)
        preemptible = sum(j.preemptible for j in members) / len(members)
        assert preemptible == pytest.approx(klass.preemptible_share, abs=0.03)


# ---- config: YAML, validation, presets -----------------------------------------------------------------------
def test_default_preset_lists_the_documented_defaults() -> None:
    assert load_workload_config("default") == DEFAULT


def test_every_preset_loads_and_generates() -> None:
    assert {"default", "small"} <= set(preset_names())
    for name in preset_names():
        config = load_workload_config(name)
        assert config.name == name
        assert len(generate(config, 0, CAPACITY)) == config.n_jobs


def test_config_round_trips_through_a_dict() -> None:
    config = load_workload_config("small")
    assert SyntheticConfig.from_dict(config.to_dict()) == config


def test_unknown_preset_names_the_known_ones() -> None:
    with pytest.raises(ConfigError, match=r"no-such-preset.*default"):
        load_workload_config("no-such-preset")


def _klass(**fields: object) -> dict[str, object]:
    """A priority class as YAML gives it: one class holding every job; a field set to None is left out."""
    klass = {"name": "a", "priority": 0, "share": 1.0, "preemptible_share": 0.0} | fields
    return {k: v for k, v in klass.items() if v is not None}


@pytest.mark.parametrize(
    "data, key",
    [
        ({"n_jbos": 10}, "n_jbos"),
        ({"runtime": {"median": 10}}, "runtime.median"),
        ({"priority_classes": [_klass(preemptible=0)]}, "preemptible"),
    ],
)
def test_unknown_keys_are_errors_naming_the_key(data: dict, key: str) -> None:
    with pytest.raises(ConfigError, match=rf"{key}: unknown key"):
        SyntheticConfig.from_dict(data)


@pytest.mark.parametrize(
    "data, key",
    [
        ({"target_load": -0.5}, "target_load"),
        ({"n_jobs": 0}, "n_jobs"),
        ({"n_jobs": 2.5}, "n_jobs"),
        ({"arrivals": {"process": "weekly"}}, "arrivals.process"),
        ({"arrivals": {"diurnal_amplitude": 1.5}}, "arrivals.diurnal_amplitude"),
        ({"arrivals": {"peak_hour": 24}}, "arrivals.peak_hour"),
        ({"runtime": {"median_s": -1}}, "runtime.median_s"),
        ({"runtime": {"median_s": "long"}}, "runtime.median_s"),
        ({"runtime": {"sigma": float("nan")}}, "runtime.sigma"),
        ({"runtime": {"min_s": 100, "max_s": 50}}, "runtime.max_s"),
        ({"gpus": {"probs": [0.5, 0.1, 0.1, 0.1, 0.1, 0.05]}}, "gpus.probs"),
        ({"gpus": {"counts": [1, 2], "probs": [1.0]}}, "gpus.probs"),
        ({"gpus": {"counts": [0, 2], "probs": [0.5, 0.5]}}, "gpus.counts"),
        ({"gpus": {"fractional_milli": [250, 1000]}}, "gpus.fractional_milli"),
        ({"gpus": {"fractional_share": -0.1}}, "gpus.fractional_share"),
        ({"estimates": {"factor_median": 0.5}}, "estimates.factor_median"),
        ({"estimates": {"human_values_s": [3600, 900]}}, "estimates.human_values_s"),
        ({"constraints": {"memory_probs": [1.0, 0, 0, 0, 0.5]}}, "constraints.memory_probs"),
        ({"constraints": {"typed_gpu_types": []}}, "constraints.typed_gpu_types"),
        ({"users": {"n_users": 4, "n_teams": 5}}, "users.n_teams"),
        ({"data": {"size_min_gib": 10, "size_max_gib": 5}}, "data.size_max_gib"),
        ({"checkpoints": {"interval_s": [-5, 10, 20]}}, "checkpoints.interval_s"),
        ({"priority_classes": [_klass(share=0.5)]}, "priority_classes.share"),
        ({"priority_classes": [_klass(preemptible_share=2)]}, "priority_classes['a'].preemptible_share"),
        ({"priority_classes": [_klass(priority=None)]}, "priority_classes[0].priority"),
    ],
)
def test_impossible_values_are_errors_naming_the_key(data: dict, key: str) -> None:
    with pytest.raises(ConfigError) as info:
        SyntheticConfig.from_dict(data)
    assert str(info.value).startswith(f"{key}: "), str(info.value)


def test_yaml_errors_name_the_file_and_the_key(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("n_jobs: 100\nruntime:\n  sigmaa: 1.0\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"^bad\.yaml: runtime\.sigmaa: unknown key"):
        load_workload_config(path)


def test_generate_rejects_bad_capacity_and_seed() -> None:
    with pytest.raises(ConfigError, match="capacity_gpus"):
        generate(DEFAULT, 0, 0)
    with pytest.raises(ConfigError, match="seed"):
        generate(DEFAULT, -1, CAPACITY)


@pytest.mark.parametrize(("data", "message"), [
    ({"gpus": {"mig_share": 0.5}}, "gpus.mig_profiles: needs a profile when mig_share > 0"),
    ({"gpus": {"mig_share": 0.5, "mig_profiles": ["3g"], "mig_probs": [1.0]}}, "gpus.mig_profiles: '3g' is not"),
    ({"gpus": {"mig_share": 0.5, "mig_profiles": ["3g.20gb", "1g.5gb"], "mig_probs": [1.0]}},
     "gpus.mig_probs: needs one probability per value of gpus.mig_profiles"),
    ({"partitions": {"names": ["a", "b"], "shares": [0.5, 0.6]}}, "partitions.shares: probabilities must sum to 1"),
    ({"partitions": {"names": ["a", "a"], "shares": [0.5, 0.5]}}, "partitions.names: must be distinct"),
    ({"partitions": {"shares": [1.0]}}, "partitions.shares: needs one probability per value of partitions.names"),
])
def test_mig_and_partition_mixes_reject_bad_values_naming_the_key(data, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        SyntheticConfig.from_dict(data)


def test_mig_and_partition_mixes_change_only_their_own_fields():
    # Their draws come from streams of their own: a 1-GPU job asking for a MIG instance keeps every other field
    # (its memory need aside: an instance's memory is its profile's), and every other job is unchanged.
    base = SyntheticConfig.from_dict({"n_jobs": 400})
    mixed = SyntheticConfig.from_dict({"n_jobs": 400, "partitions": {"names": ["a", ""], "shares": [0.5, 0.5]},
                                       "gpus": {"mig_share": 0.5, "mig_profiles": ["1g.5gb", "3g.20gb"],
                                                "mig_probs": [0.5, 0.5]}})
    plain_jobs, jobs = generate(base, seed=3, capacity_gpus=64).jobs, generate(mixed, seed=3, capacity_gpus=64).jobs
    mig = [j for j in jobs if j.mig_profile]
    assert 0.3 < len(mig) / sum(j.n_gpus == 1 for j in jobs) < 0.7
    assert {j.mig_profile for j in mig} == {"1g.5gb", "3g.20gb"} and all(j.gpu_mem_gib == 0 for j in mig)
    assert 0.35 < sum(j.partition == "a" for j in jobs) / len(jobs) < 0.65
    for old, new in zip(plain_jobs, jobs, strict=True):
        assert dataclasses.replace(new, partition="", mig_profile="", gpu_milli=old.gpu_milli,
                                   gpu_mem_gib=old.gpu_mem_gib) == old
