"""The synthetic workload generator: the project's embedded default workload (SPEC §5).

``generate(config, seed, capacity_gpus)`` draws ``config.n_jobs`` jobs. The arrival rate is derived from the
config's target load and the cluster's capacity (see :func:`arrival_rate_per_s`), so one config serves clusters of
any size. All randomness comes from ``np.random.default_rng`` seeded with ``seed``, split into one independent
stream per aspect of the job (arrivals, GPU demand, runtimes, ...): the same seed gives identical jobs, and changing
one aspect of the config (say ``target_load``) leaves the draws of the other aspects unchanged, which keeps
comparisons across load levels paired.

The model (every parameter is in :mod:`envs.workload.synthetic_config`, with its default and unit):

- arrivals: Poisson, or diurnal (sinusoidal rate by time of day, sampled by thinning; t = 0 is midnight);
- GPUs: a discrete GPU-count mix (Philly's by default); a share of the 1-GPU jobs takes a fraction of a GPU;
- runtimes: lognormal, median growing with the GPU count, clipped to [min, max];
- estimates: runtime × an overestimate factor ≥ 1, rounded up to a human value, never below the runtime;
- constraints: allowed GPU types and per-GPU memory for a share of jobs; CPU and RAM per GPU;
- communication sensitivity: Beta-distributed for multi-GPU jobs, higher for larger jobs; 0 for 1-GPU jobs;
- users with Zipf activity in fixed teams; datasets from a pool with Zipf popularity; checkpoint intervals;
  priority classes with their preemptible shares.
"""

from __future__ import annotations

import math
from importlib import resources
from pathlib import Path

import numpy as np

from envs.core.cluster import MILLI_PER_GPU
from envs.core.errors import ConfigError
from envs.core.files import names_a_file
from envs.core.job import Job
from envs.workload.synthetic_config import JobRuntimeConfig, SyntheticConfig
from envs.workload.table import Workload

__all__ = [
    "SyntheticConfig",
    "arrival_rate_per_s",
    "expected_gpu_seconds_per_job",
    "generate",
    "load_workload_config",
    "preset_names",
]

SECONDS_PER_DAY = 86400.0
_STREAMS = ("arrivals", "gpus", "runtime", "estimates", "constraints", "users", "data", "checkpoints", "priorities",
            "partitions", "mig")  # appended streams leave the earlier ones' draws unchanged (SeedSequence children)


def preset_names() -> list[str]:
    """Names of the workload presets shipped in ``configs/workloads``."""
    folder = resources.files("configs") / "workloads"
    return sorted(p.name.removesuffix(".yaml") for p in folder.iterdir() if p.name.endswith(".yaml"))


def load_workload_config(name_or_path: str | Path) -> SyntheticConfig:
    """A preset by name (``configs/workloads/NAME.yaml``) or a config file by path
    (:func:`envs.core.files.names_a_file`)."""
    text = str(name_or_path)
    if names_a_file(text):
        return SyntheticConfig.from_yaml(text)
    preset = resources.files("configs") / "workloads" / f"{text}.yaml"
    if not preset.is_file():
        raise ConfigError(f"workload preset {text!r}: no such preset (known: {', '.join(preset_names())})")
    with resources.as_file(preset) as path:
        return SyntheticConfig.from_yaml(path)


def _normal_cdf(x: float) -> float:
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


def _clipped_lognormal_mean(median: float, sigma: float, low: float, high: float) -> float:
    """E[clip(X, low, high)] for ln X ~ Normal(ln median, sigma²), in closed form."""
    if sigma == 0:
        return min(max(median, low), high)
    mu = math.log(median)
    a = (math.log(low) - mu) / sigma
    b = (math.log(high) - mu) / sigma
    body = math.exp(mu + sigma**2 / 2) * (_normal_cdf(b - sigma) - _normal_cdf(a - sigma))
    return low * _normal_cdf(a) + body + high * (1.0 - _normal_cdf(b))


def _median_runtime_s(runtime: JobRuntimeConfig, n_gpus: np.ndarray | int) -> np.ndarray | float:
    return runtime.median_s * np.power(n_gpus, runtime.gpu_scaling_exponent)


def expected_gpu_seconds_per_job(config: SyntheticConfig) -> float:
    """E[gpu_share × runtime] of one generated job [GPU-seconds], exactly (no sampling).

    Runtimes depend on the GPU count only, so the expectation is a sum over the count mix; a 1-GPU job holds on
    average (1 − f) + f × E[milli] / 1000 of a GPU, with f the fractional share.
    """
    gpus, runtime = config.gpus, config.runtime
    mean_milli = sum(m * p for m, p in zip(gpus.fractional_milli, gpus.fractional_probs, strict=True))
    single_share = 1.0 - gpus.fractional_share + gpus.fractional_share * mean_milli / MILLI_PER_GPU
    total = 0.0
    for n, p in zip(gpus.counts, gpus.probs, strict=True):
        share = single_share if n == 1 else float(n)
        median = float(_median_runtime_s(runtime, n))
        total += p * share * _clipped_lognormal_mean(median, runtime.sigma, runtime.min_s, runtime.max_s)
    return total


def arrival_rate_per_s(config: SyntheticConfig, capacity_gpus: int) -> float:
    """Mean arrival rate [jobs/s] that offers ``config.target_load`` to ``capacity_gpus`` GPUs:
    target_load × capacity / E[gpu_share × runtime]."""
    if capacity_gpus < 1:
        raise ConfigError(f"capacity_gpus: must be >= 1, got {capacity_gpus}")
    return config.target_load * capacity_gpus / expected_gpu_seconds_per_job(config)


def _arrival_times(config: SyntheticConfig, rate: float, rng: np.random.Generator) -> np.ndarray:
    """``n_jobs`` increasing submit times [s]: Poisson, or diurnal by thinning a Poisson process at the peak rate."""
    n, arrivals = config.n_jobs, config.arrivals
    if arrivals.process == "poisson":
        return np.cumsum(rng.exponential(1.0 / rate, size=n))
    amplitude = arrivals.diurnal_amplitude
    peak_s = arrivals.peak_hour * 3600.0
    peak_rate = rate * (1.0 + amplitude)
    accepted: list[np.ndarray] = []
    n_accepted, t_last = 0, 0.0
    while n_accepted < n:
        # About 1/(1 + a) of the candidates are kept; draw a few more than needed so one chunk usually suffices.
        m = int(1.2 * (n - n_accepted) * (1.0 + amplitude)) + 16
        candidates = t_last + np.cumsum(rng.exponential(1.0 / peak_rate, size=m))
        keep_prob = (1.0 + amplitude * np.cos(2.0 * np.pi * (candidates - peak_s) / SECONDS_PER_DAY)) / (1 + amplitude)
        kept = candidates[rng.random(m) < keep_prob]
        accepted.append(kept)
        n_accepted += kept.size
        t_last = float(candidates[-1])
    return np.concatenate(accepted)[:n]


def _zipf_weights(n: int, exponent: float) -> np.ndarray:
    weights = 1.0 / np.arange(1, n + 1, dtype=np.float64) ** exponent
    return weights / weights.sum()


def _lognormal(rng: np.random.Generator, median: np.ndarray | float, sigma: float, size: int) -> np.ndarray:
    return median * np.exp(sigma * rng.standard_normal(size))


def _estimates(config: SyntheticConfig, runtime_s: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Requested wall times [s]: runtime × max(1, lognormal factor), rounded up to a human value when configured."""
    est = config.estimates
    factor = np.maximum(1.0, _lognormal(rng, est.factor_median, est.factor_sigma, runtime_s.size))
    estimate = runtime_s * factor
    if est.round_up:
        human = np.asarray(est.human_values_s, dtype=np.float64)
        index = np.searchsorted(human, estimate, side="left")
        rounded = human[np.minimum(index, human.size - 1)]
        estimate = np.where(index < human.size, rounded, estimate)
    return estimate


def generate(config: SyntheticConfig, seed: int, capacity_gpus: int) -> Workload:
    """Draw ``config.n_jobs`` jobs whose offered load on ``capacity_gpus`` GPUs is ``config.target_load``.

    Jobs are numbered 0, 1, ... in submission order; times in seconds from midnight of day 0. The returned
    workload is named ``"{config.name}-s{seed}"`` and records ``capacity_gpus`` as its ``machine_gpus``.
    """
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ConfigError(f"seed: must be an integer >= 0, got {seed!r}")
    rate = arrival_rate_per_s(config, capacity_gpus)
    children = np.random.SeedSequence(int(seed)).spawn(len(_STREAMS))
    rngs = {stream: np.random.default_rng(child) for stream, child in zip(_STREAMS, children, strict=True)}
    n = config.n_jobs

    submit_s = _arrival_times(config, rate, rngs["arrivals"])

    gpus, rng = config.gpus, rngs["gpus"]
    n_gpus = rng.choice(np.asarray(gpus.counts), size=n, p=gpus.probs)
    fractional = (n_gpus == 1) & (rng.random(n) < gpus.fractional_share)
    milli = np.where(
        fractional, rng.choice(np.asarray(gpus.fractional_milli), size=n, p=gpus.fractional_probs), MILLI_PER_GPU
    )
    multi = n_gpus > 1
    alpha = gpus.comm_alpha_per_doubling * np.log2(np.maximum(n_gpus, 2))
    comm = np.where(multi, rng.beta(alpha, gpus.comm_beta), 0.0)

    runtime = config.runtime
    median_s = _median_runtime_s(runtime, n_gpus)
    runtime_s = np.clip(_lognormal(rngs["runtime"], median_s, runtime.sigma, n), runtime.min_s, runtime.max_s)
    estimate_s = _estimates(config, runtime_s, rngs["estimates"])

    cons, rng = config.constraints, rngs["constraints"]
    typed = rng.random(n) < cons.typed_share
    mem_gib = np.where(
        rng.random(n) < cons.memory_share, rng.choice(np.asarray(cons.memory_gib), size=n, p=cons.memory_probs), 0.0
    )

    users, rng = config.users, rngs["users"]
    user = rng.choice(users.n_users, size=n, p=_zipf_weights(users.n_users, users.zipf_exponent))

    data, rng = config.data, rngs["data"]
    pool_gib = np.clip(
        _lognormal(rng, data.size_median_gib, data.size_sigma, data.n_datasets), data.size_min_gib, data.size_max_gib
    )
    has_data = rng.random(n) < data.share
    dataset = rng.choice(data.n_datasets, size=n, p=_zipf_weights(data.n_datasets, data.zipf_exponent))

    ckpt, rng = config.checkpoints, rngs["checkpoints"]
    checkpoint_s = np.where(
        rng.random(n) < ckpt.share, rng.choice(np.asarray(ckpt.interval_s), size=n, p=ckpt.probs), 0.0
    )

    classes, rng = config.priority_classes, rngs["priorities"]
    klass = rng.choice(len(classes), size=n, p=[c.share for c in classes])
    preemptible = rng.random(n) < np.array([c.preemptible_share for c in classes])[klass]

    mig = np.full(n, -1)
    if gpus.mig_share > 0:  # its own stream: without MIG the other draws are what they always were
        rng = rngs["mig"]
        asks = (n_gpus == 1) & (rng.random(n) < gpus.mig_share)
        mig = np.where(asks, rng.choice(len(gpus.mig_profiles), size=n, p=gpus.mig_probs), -1)
        milli = np.where(asks, MILLI_PER_GPU, milli)

    mix = config.partitions
    partition = (rngs["partitions"].choice(len(mix.names), size=n, p=mix.shares) if mix.names
                 else np.zeros(n, dtype=np.int64))
    names = mix.names or ("",)

    typed_set = frozenset(cons.typed_gpu_types)
    jobs = [
        Job(
            job_id=i,
            submit_time_s=float(submit_s[i]),
            runtime_s=float(runtime_s[i]),
            runtime_estimate_s=float(estimate_s[i]),
            n_gpus=int(n_gpus[i]),
            gpu_milli=int(milli[i]),
            gpu_types=typed_set if typed[i] else frozenset(),
            gpu_mem_gib=0.0 if mig[i] >= 0 else float(mem_gib[i]),  # a MIG instance's memory is its profile's
            cpu_milli_per_gpu=cons.cpu_milli_per_gpu,
            ram_mib_per_gpu=cons.ram_mib_per_gpu,
            user=f"user{user[i]:03d}",
            team=f"team{user[i] % users.n_teams}",
            priority=classes[klass[i]].priority,
            qos=classes[klass[i]].name,
            preemptible=bool(preemptible[i]),
            comm_sensitivity=float(comm[i]),
            dataset_id=f"ds{dataset[i]:03d}" if has_data[i] else "",
            dataset_gib=float(pool_gib[dataset[i]]) if has_data[i] else 0.0,
            checkpoint_interval_s=float(checkpoint_s[i]),
            partition=names[partition[i]],
            mig_profile=gpus.mig_profiles[mig[i]] if mig[i] >= 0 else "",
        )
        for i in range(n)
    ]
    return Workload(f"{config.name}-s{seed}", tuple(jobs), source="generated", machine_gpus=capacity_gpus)
