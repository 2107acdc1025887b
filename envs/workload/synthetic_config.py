"""Configuration of the synthetic workload generator and its YAML loader.

A :class:`SyntheticConfig` is a tree of frozen dataclasses, one section per aspect of the workload (arrivals,
runtimes, GPU demand, estimates, constraints, users, data, checkpoints, priority classes). Every field has a
documented default and unit; impossible values raise :class:`~envs.core.errors.ConfigError` naming the key. YAML presets
live in ``configs/workloads/NAME.yaml`` and may set any subset of the keys; unknown keys are errors.

The defaults model a mid-size shared GPU cluster. The GPU-count mix and the lognormal runtime shape follow the
Microsoft Philly trace (Jeon et al., USENIX ATC'19; 111,549 jobs: 1 GPU 86.7%, 2: 2.3%, 4: 4.9%, 8: 5.1%, 16: 0.8%,
32: 0.2%, median runtime of 1-GPU jobs about 20 min, multi-GPU jobs running several times longer); fractional
shares follow Alibaba openb (Weng et al., ATC'23). Other figures are illustrative, chosen to be plausible.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from envs.core.cluster import MILLI_PER_GPU
from envs.core.errors import ConfigError
from envs.core.files import read_yaml
from envs.core.job import JOB_BOUNDS, MAX_PRIORITY
from envs.core.mig import normalize_profile
from envs.workload.config_fields import (
    build,
    check,
    choice,
    non_negative,
    plain,
    positive,
    probabilities,
    probability,
    require,
)

ARRIVAL_PROCESSES = ("poisson", "diurnal")
"""Names accepted by ``arrivals.process``."""


TARGET_LOADS = (1e-3, 100.0)
"""The range of ``target_load`` (offered GPU-time per GPU-time of the cluster): below, arrivals spread over
centuries; above, a run is all queue."""
MAX_USERS = 1_000_000
"""The most users a synthetic workload may have (10⁹ ran out of memory drawing their activity)."""
MAX_JOBS = 1_000_000
"""The most jobs a synthetic workload may have (a larger one is a configuration error, not a MemoryError): one
million generate in about 11 CPU-seconds and take about 1.1 GB as Job objects; ten million ran out of time and
memory."""


@dataclass(frozen=True)
class ArrivalConfig:
    """When jobs are submitted.

    ``poisson``: a homogeneous Poisson process. ``diurnal``: a Poisson process whose rate follows the time of day,
    rate(t) = mean rate × (1 + amplitude × cos(2π (t − peak) / 1 day)), sampled by thinning; t = 0 is midnight.
    The mean rate is set by the generator from the target load, so both processes offer the same load per day.
    """

    _where: ClassVar[str] = "arrivals"
    process: str = "diurnal"  # "poisson" or "diurnal"
    diurnal_amplitude: float = 0.5  # relative swing of the rate around its mean, in [0, 1] [dimensionless]
    peak_hour: float = 14.0  # time of day of the highest rate, in [0, 24) [h]

    def __post_init__(self) -> None:
        require(self.process in ARRIVAL_PROCESSES, "arrivals.process", f"must be one of {ARRIVAL_PROCESSES}",
                 self.process)  # fmt: skip
        probability(self, "diurnal_amplitude")
        check(self, ["peak_hour"], lambda v: 0.0 <= v < 24.0, "must be in [0, 24)")


@dataclass(frozen=True)
class JobRuntimeConfig:
    """Base runtimes (at speed factor 1, ideal placement): lognormal, heavy-tailed, clipped to [min_s, max_s].

    A job of n GPUs has median ``median_s × n ** gpu_scaling_exponent`` (larger jobs train longer, as in Philly)
    and shape ``sigma`` (the standard deviation of ln runtime).
    """

    _where: ClassVar[str] = "runtime"
    median_s: float = 1800.0  # median runtime of a 1-GPU job before clipping [s]
    sigma: float = 1.8  # standard deviation of ln(runtime) [dimensionless]; Philly's is about 2.5
    gpu_scaling_exponent: float = 0.5  # the median grows as n_gpus ** exponent [dimensionless]
    min_s: float = 60.0  # shortest runtime [s]
    max_s: float = 43200.0  # longest runtime [s]; 12 h, a common wall-time limit of shared clusters

    def __post_init__(self) -> None:
        positive(self, "median_s", "min_s", "max_s")
        non_negative(self, "sigma")
        check(self, ["gpu_scaling_exponent"], math.isfinite, "must be finite")
        check(self, ["max_s"], lambda v: v >= self.min_s, "must be >= min_s")


@dataclass(frozen=True)
class GpuDemandConfig:
    """How many GPUs a job asks for, whether a 1-GPU job takes only a share of it, and how it suffers from spreading.

    Jobs above 8 GPUs span several 8-GPU nodes. Communication sensitivity c is 0 for 1-GPU jobs and
    Beta(comm_alpha_per_doubling × log2(n), comm_beta) for n ≥ 2 GPUs, so larger jobs are more sensitive on average
    (mean 0.4 at 2 GPUs, 0.67 at 8, 0.77 at 32 with the defaults).
    """

    _where: ClassVar[str] = "gpus"
    counts: tuple[int, ...] = (1, 2, 4, 8, 16, 32)  # GPU counts [GPUs]
    probs: tuple[float, ...] = (0.8675, 0.0226, 0.0492, 0.0512, 0.0076, 0.0019)  # Philly (> 32 folded into 1)
    fractional_share: float = 0.1  # share of 1-GPU jobs that take a fraction of one GPU [probability]
    fractional_milli: tuple[int, ...] = (250, 500)  # fractional shares [milli-GPU]
    fractional_probs: tuple[float, ...] = (0.5, 0.5)  # their probabilities
    comm_alpha_per_doubling: float = 2.0  # Beta α per doubling of the GPU count [dimensionless]
    comm_beta: float = 3.0  # Beta β [dimensionless]
    mig_share: float = 0.0  # share of 1-GPU jobs asking for a MIG instance instead (drawn before the fractional share)
    mig_profiles: tuple[str, ...] = ()  # MIG profiles, e.g. 1g.5gb, 3g.20gb (envs.core.mig)
    mig_probs: tuple[float, ...] = ()  # their probabilities

    def __post_init__(self) -> None:
        choice(self, "counts", "probs")
        probability(self, "mig_share")
        if self.mig_share > 0 or self.mig_profiles or self.mig_probs:
            require(bool(self.mig_profiles), "gpus.mig_profiles", "needs a profile when mig_share > 0",
                    self.mig_profiles)
            for name in self.mig_profiles:
                try:
                    normalize_profile(name)
                except ValueError as exc:
                    raise ConfigError(f"gpus.mig_profiles: {exc}") from None
            probabilities(self, "mig_probs", "mig_profiles")
        require(len(set(self.counts)) == len(self.counts), "gpus.counts", "must not repeat a count", self.counts)
        probability(self, "fractional_share")
        choice(self, "fractional_milli", "fractional_probs")
        require(max(self.fractional_milli) < MILLI_PER_GPU, "gpus.fractional_milli",
                 f"shares must be in 1..{MILLI_PER_GPU - 1}", self.fractional_milli)  # fmt: skip
        positive(self, "comm_alpha_per_doubling", "comm_beta")


# The wall times users type [s]: 5, 15, 30 min; 1, 2, 4, 8, 12 h; 1, 2, 3, 7 days.
HUMAN_WALL_TIMES_S = (300.0, 900.0, 1800.0, 3600.0, 7200.0, 14400.0, 28800.0, 43200.0, 86400.0, 172800.0,
                      259200.0, 604800.0)  # fmt: skip


@dataclass(frozen=True)
class EstimateConfig:
    """Requested wall times: runtime × an overestimate factor F ≥ 1, optionally rounded up to a "human" value.

    F = max(1, lognormal(median ``factor_median``, shape ``factor_sigma``)): about a fifth of the jobs get an exact
    estimate before rounding, the rest overestimate, some by far. With ``round_up`` the estimate is raised to the
    next value of ``human_values_s`` (15 min, 1 h, 4 h, ...); above the largest it is left as drawn. The estimate is
    never below the runtime.
    """

    _where: ClassVar[str] = "estimates"
    factor_median: float = 2.0  # median overestimate factor before flooring at 1 [dimensionless]
    factor_sigma: float = 0.8  # standard deviation of ln(factor) [dimensionless]
    round_up: bool = True  # round estimates up to the next human value
    human_values_s: tuple[float, ...] = HUMAN_WALL_TIMES_S  # the values to round up to, increasing [s]

    def __post_init__(self) -> None:
        check(self, ["factor_median"], lambda v: math.isfinite(v) and v >= 1, "must be finite and >= 1")
        non_negative(self, "factor_sigma")
        values = self.human_values_s
        require(len(values) > 0 and all(math.isfinite(v) and v > 0 for v in values), "estimates.human_values_s",
                 "needs at least one value, all finite and > 0", values)  # fmt: skip
        require(list(values) == sorted(set(values)), "estimates.human_values_s", "must be strictly increasing", values)


@dataclass(frozen=True)
class ConstraintConfig:
    """What hardware a job needs besides a GPU count: allowed GPU types, GPU memory, CPUs and RAM.

    A share ``typed_share`` of the jobs may run only on ``typed_gpu_types``; independently, a share ``memory_share``
    needs a given amount of memory on each GPU (which also rules out GPU types with less). Every job asks for
    ``cpu_milli_per_gpu`` and ``ram_mib_per_gpu`` per GPU it holds.
    """

    _where: ClassVar[str] = "constraints"
    typed_share: float = 0.15  # share of jobs restricted to typed_gpu_types [probability]
    typed_gpu_types: frozenset[str] = frozenset({"A100-40GB", "A100-80GB", "H100"})  # allowed types of those jobs
    memory_share: float = 0.3  # share of jobs with a per-GPU memory need [probability]
    memory_gib: tuple[float, ...] = (8.0, 16.0, 24.0, 32.0, 40.0)  # memory needs [GiB per GPU]
    memory_probs: tuple[float, ...] = (0.3, 0.3, 0.2, 0.1, 0.1)  # their probabilities
    cpu_milli_per_gpu: int = 4000  # CPU per GPU [milli-cores]
    ram_mib_per_gpu: int = 32768  # RAM per GPU [MiB]

    def __post_init__(self) -> None:
        probability(self, "typed_share", "memory_share")
        require(self.typed_share == 0 or len(self.typed_gpu_types) > 0, "constraints.typed_gpu_types",
                 "must name at least one type when typed_share > 0", sorted(self.typed_gpu_types))  # fmt: skip
        choice(self, "memory_gib", "memory_probs")
        non_negative(self, "cpu_milli_per_gpu", "ram_mib_per_gpu")
        for name in ("cpu_milli_per_gpu", "ram_mib_per_gpu"):  # the job's own bounds (envs.core.job.JOB_BOUNDS)
            check(self, [name], lambda v, most=JOB_BOUNDS[name]: v <= most, f"must be at most {JOB_BOUNDS[name]:g}")


@dataclass(frozen=True)
class UserConfig:
    """Who submits: ``n_users`` users with Zipf-like activity, each in one of ``n_teams`` teams.

    User k (k = 0, 1, ...) submits a share proportional to 1 / (k + 1) ** zipf_exponent. Users are named
    ``user000``, ``user001``, ...; user k belongs to team ``team{k mod n_teams}``, a fixed mapping that spreads the
    heaviest users over different teams.
    """

    _where: ClassVar[str] = "users"
    n_users: int = 40  # users
    zipf_exponent: float = 1.1  # activity skew [dimensionless]; 0 = all users equally active
    n_teams: int = 8  # teams

    def __post_init__(self) -> None:
        positive(self, "n_users")
        require(self.n_users <= MAX_USERS, "users.n_users", f"must be at most {MAX_USERS:,}", self.n_users)
        non_negative(self, "zipf_exponent")
        check(self, ["n_teams"], lambda v: 1 <= v <= self.n_users, "must be in 1..n_users")


@dataclass(frozen=True)
class PartitionMixConfig:
    """Which partition each job names: ``names[i]`` with probability ``shares[i]`` (the name ``""``: none, the
    cluster's default partition); no names (the default): every job names none."""

    _where: ClassVar[str] = "partitions"
    names: tuple[str, ...] = ()  # partition names, as the cluster defines them
    shares: tuple[float, ...] = ()  # their probabilities

    def __post_init__(self) -> None:
        require(len(set(self.names)) == len(self.names), "partitions.names", "must be distinct", self.names)
        if self.names or self.shares:
            probabilities(self, "shares", "names")


@dataclass(frozen=True)
class DataConfig:
    """Input datasets: a pool of ``n_datasets`` with Zipf popularity and lognormal sizes (fixed per seed).

    Dataset k is picked with weight 1 / (k + 1) ** zipf_exponent and named ``ds000``, ``ds001``, ...
    """

    _where: ClassVar[str] = "data"
    share: float = 0.7  # share of jobs that read a dataset [probability]
    n_datasets: int = 50  # datasets in the pool
    zipf_exponent: float = 1.0  # popularity skew [dimensionless]
    size_median_gib: float = 50.0  # median dataset size [GiB]
    size_sigma: float = 1.0  # standard deviation of ln(size) [dimensionless]
    size_min_gib: float = 1.0  # smallest dataset [GiB]
    size_max_gib: float = 1000.0  # largest dataset [GiB]

    def __post_init__(self) -> None:
        probability(self, "share")
        positive(self, "n_datasets", "size_median_gib", "size_min_gib", "size_max_gib")
        non_negative(self, "zipf_exponent", "size_sigma")
        check(self, ["size_max_gib"], lambda v: v >= self.size_min_gib, "must be >= size_min_gib")


@dataclass(frozen=True)
class CheckpointConfig:
    """A share of the jobs checkpoints at a fixed interval, drawn from a few choices; the others never do."""

    _where: ClassVar[str] = "checkpoints"
    share: float = 0.6  # share of jobs that checkpoint [probability]
    interval_s: tuple[float, ...] = (900.0, 1800.0, 3600.0)  # checkpoint intervals [s]
    probs: tuple[float, ...] = (0.3, 0.4, 0.3)  # their probabilities

    def __post_init__(self) -> None:
        probability(self, "share")
        choice(self, "interval_s", "probs")


@dataclass(frozen=True)
class PriorityClass:
    """One priority class (QoS): its label, its priority (higher goes first), its share of the jobs, and the share
    of its jobs that may be preempted."""

    name: str  # QoS label, copied to Job.qos
    priority: int  # Job.priority; higher is more important
    share: float  # share of all jobs in this class [probability]
    preemptible_share: float  # share of this class's jobs that are preemptible [probability]

    @property
    def _where(self) -> str:
        return f"priority_classes[{self.name!r}]"

    def __post_init__(self) -> None:
        require(bool(self.name), "priority_classes.name", "every class needs a non-empty name", self.name)
        require(isinstance(self.priority, int) and not isinstance(self.priority, bool)
                and abs(self.priority) <= MAX_PRIORITY, f"{self._where}.priority",
                f"must be an integer within ±{MAX_PRIORITY:,}", self.priority)
        probability(self, "share", "preemptible_share")


DEFAULT_PRIORITY_CLASSES = (
    PriorityClass("best-effort", 0, 0.3, 1.0),
    PriorityClass("normal", 1, 0.6, 0.2),
    PriorityClass("high", 2, 0.1, 0.0),
)


@dataclass(frozen=True)
class SyntheticConfig:
    """Everything the synthetic generator needs besides a seed and the cluster's GPU capacity.

    The arrival rate is not a parameter: the generator derives it from ``target_load`` and the capacity,
    rate = target_load × capacity / E[gpu_share × runtime], so that the offered load (GPU-seconds demanded per
    GPU-second of capacity, at speed factor 1) is ``target_load`` on average.
    """

    _where: ClassVar[str] = ""
    name: str = "default"  # preset name, used in the workload's name
    n_jobs: int = 2000  # jobs to generate
    target_load: float = 0.85  # offered load: demanded GPU-seconds / (capacity × time) [dimensionless]
    arrivals: ArrivalConfig = field(default_factory=ArrivalConfig)
    runtime: JobRuntimeConfig = field(default_factory=JobRuntimeConfig)
    gpus: GpuDemandConfig = field(default_factory=GpuDemandConfig)
    estimates: EstimateConfig = field(default_factory=EstimateConfig)
    constraints: ConstraintConfig = field(default_factory=ConstraintConfig)
    users: UserConfig = field(default_factory=UserConfig)
    data: DataConfig = field(default_factory=DataConfig)
    checkpoints: CheckpointConfig = field(default_factory=CheckpointConfig)
    priority_classes: tuple[PriorityClass, ...] = DEFAULT_PRIORITY_CLASSES
    partitions: PartitionMixConfig = field(default_factory=PartitionMixConfig)

    def __post_init__(self) -> None:
        require(bool(self.name), "name", "must be non-empty", self.name)
        positive(self, "n_jobs", "target_load")
        require(self.n_jobs <= MAX_JOBS, "n_jobs", f"must be at most {MAX_JOBS:,}", self.n_jobs)
        low, high = TARGET_LOADS
        require(low <= self.target_load <= high, "target_load", f"must be in [{low:g}, {high:g}]", self.target_load)
        classes = self.priority_classes
        names = [c.name for c in classes]
        require(len(classes) > 0, "priority_classes", "needs at least one class", classes)
        require(len(set(names)) == len(names), "priority_classes", "names must be distinct", names)
        shares = [c.share for c in classes]
        require(math.isclose(sum(shares), 1.0, abs_tol=1e-6), "priority_classes.share", "shares must sum to 1", shares)

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> SyntheticConfig:
        """A config from a (YAML-parsed) mapping; missing keys take their defaults, unknown keys are errors."""
        return build(cls, data, "")

    @classmethod
    def from_yaml(cls, path: str | Path) -> SyntheticConfig:
        """A config from a YAML file; errors name the file and the key. ``name`` defaults to the file's stem."""
        path = Path(path)
        data = read_yaml(path, "workload config")
        data = {} if data is None else data
        if isinstance(data, dict):
            data = {"name": path.stem, **data}
        try:
            return cls.from_dict(data)
        except ConfigError as exc:
            raise ConfigError(f"{path.name}: {exc}") from exc

    def to_dict(self) -> dict[str, object]:
        """The config as plain YAML-ready data; ``from_dict(to_dict())`` gives an equal config."""
        return plain(self)  # type: ignore[return-value]
