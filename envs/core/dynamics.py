"""Dynamics of a run: node and GPU failures with their repairs, scheduler outages, and what an interrupted job pays
(SPEC §3 Lifecycle and Events). Data only; :mod:`envs.sim.dynamics` turns it into events.

Times are seconds **from the start of the run** (the first job's submission), so one scenario applies to any
workload. A scenario is a YAML file under ``configs/scenarios/`` (or any path) holding::

    failures:
      node_mtbf_s: 3600000        # mean time between failures of one node [s]; or {GPU type: MTBF}; default inf
      gpu_mtbf_s: .inf            # ... of one GPU (fails alone, its node stays up); or {GPU type: MTBF}
      repair: exponential         # repair times: exponential with mean mttr_s, or fixed = mttr_s
      mttr_s: 14400               # mean time to repair [s]
      schedule:                   # explicit failures, in addition to the random ones
        - {node: 0, fail_s: 500, repair_s: 3600}          # node 0 down from 500 s for 3600 s
        - {node: 1, gpu: 2, fail_s: 800, repair_s: 600}   # GPU 2 of node 1 (index within the node)
    outages:                      # the scheduler itself is down: no job starts, everything else goes on
      windows: [[3600, 1800]]     # (start [s], duration [s]) pairs
      mtbf_s: .inf                # random outages: exponential up times with this mean [s]
      mttr_s: 1800                # ... and exponential down times with this mean [s]
    restart_overhead_s: 60        # paid by every restart of an interrupted job before it computes again [s]
    max_failures: 6               # a job interrupted by failures more often than this ends FAILED
    governance:                   # partitions and quotas for the run's cluster (envs.core.governance), replacing
      quotas: {limits: {teams: {team0: 8}}}     # those of its preset; checked against the cluster's nodes

Ranges: every time and duration is at most ``MAX_TIME_S`` (1e10 s); a mean time between failures is at least
:data:`MIN_MTBF_S` (60 s) or ``.inf``; repair and outage times (means and explicit ones) at least
:data:`MIN_MTTR_S` (1 s). Anything else is a one-line :class:`ConfigError`.

Random failures are renewal processes, one per node (and per GPU when ``gpu_mtbf_s`` is finite): up for an
exponential time with the component's MTBF, down for a repair time, up again. They are drawn from a generator
seeded by the run's seed and consumed in the order of the failure events only, so the same seed gives the same
failures and outages whatever the policy does.

An interrupted job (its node or GPU failed, or it was preempted) loses the progress since its last checkpoint
(``Job.checkpoint_interval_s`` of computing time in the current run; 0 = none, so all of it), returns to the queue
keeping its submit time, and pays ``restart_overhead_s`` when it starts again. Preemptions do not count towards
``max_failures``: they are the scheduler's choice, not the job's bad luck (Kubernetes' backoffLimit likewise
ignores disruptions the cluster caused). The defaults, 60 s of restart overhead (reloading a checkpoint and
re-initializing workers, as reported for DL training by Gandiva and Tiresias) and 6 failures (Kubernetes' Job
``backoffLimit`` default), are illustrative.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import AfterValidator, BeforeValidator, Field

from envs.core.cluster import ClusterSpec
from envs.core.errors import ConfigError
from envs.core.files import names_a_file, read_yaml
from envs.core.job import MAX_TIME_S
from envs.core.schema import FileModel, validated

MIN_MTBF_S = 60.0
"""The shortest mean time between failures (of a node, a GPU or the scheduler) [s]: a component failing every
minute on average. Shorter ones would flood a run with events (0.001 s ran out of memory)."""
MIN_MTTR_S = 1.0
"""The shortest mean repair or outage time, and the shortest explicit repair or outage [s]."""
MAX_FAILURES = 1_000_000
"""The largest ``max_failures``."""

REPAIR_MODELS = ("exponential", "fixed")
"""How repair times are drawn: exponential with mean ``mttr_s``, or always ``mttr_s``."""

NO_DYNAMICS = "none"
"""The scenario name that means a cluster that never fails and a scheduler that is never down."""

MTBF = float | Mapping[str, float]
"""A mean time between failures [s]: one for every component, or one per GPU type (missing types never fail)."""


@dataclass(frozen=True)
class ScheduledFailure:
    """One explicit failure: node ``node`` (or GPU ``gpu`` of it, an index within the node) fails at ``fail_s``
    [s from the run's start] and is repaired ``repair_s`` seconds later."""

    node: int
    fail_s: float
    repair_s: float
    gpu: int | None = None


@dataclass(frozen=True)
class FailureConfig:
    """Random failures (per-node and per-GPU MTBF) and explicit ones (``schedule``)."""

    node_mtbf_s: MTBF = math.inf
    gpu_mtbf_s: MTBF = math.inf
    repair: str = "exponential"
    mttr_s: float = 4 * 3600.0
    schedule: tuple[ScheduledFailure, ...] = ()

    @property
    def active(self) -> bool:
        """True when some failure can happen."""
        return bool(self.schedule) or _finite(self.node_mtbf_s) or _finite(self.gpu_mtbf_s)


@dataclass(frozen=True)
class OutageConfig:
    """Scheduler outages: explicit ``windows`` of (start [s], duration [s]), and random ones (MTBF / MTTR)."""

    windows: tuple[tuple[float, float], ...] = ()
    mtbf_s: float = math.inf
    mttr_s: float = 1800.0

    @property
    def active(self) -> bool:
        """True when the scheduler can be down."""
        return bool(self.windows) or math.isfinite(self.mtbf_s)


@dataclass(frozen=True)
class DynamicsConfig:
    """Failures, outages and the cost of an interruption; ``seed`` seeds the random failures and outages."""

    failures: FailureConfig = field(default_factory=FailureConfig)
    outages: OutageConfig = field(default_factory=OutageConfig)
    restart_overhead_s: float = 60.0
    max_failures: int = 6
    seed: int = 0
    name: str = NO_DYNAMICS
    governance: Mapping[str, Any] | None = None  # partitions and quotas as YAML data; None: the preset's own

    def __post_init__(self) -> None:
        validated(ScenarioFile, self.to_data(), f"scenario {self.name!r}")  # the file's rules, for any construction

    @property
    def active(self) -> bool:
        """True when anything can fail or go down; False means the run is exactly the static simulation."""
        return self.failures.active or self.outages.active

    def to_data(self) -> dict[str, Any]:
        """This scenario in the YAML layout of the module docstring (without ``seed`` and ``name``)."""
        f, o = self.failures, self.outages
        mtbf = (lambda v: dict(v) if isinstance(v, Mapping) else v)  # noqa: E731
        return {
            "failures": {"node_mtbf_s": mtbf(f.node_mtbf_s), "gpu_mtbf_s": mtbf(f.gpu_mtbf_s), "repair": f.repair,
                         "mttr_s": f.mttr_s, "schedule": [dataclasses.asdict(s) for s in f.schedule]},
            "outages": {"windows": [list(w) for w in o.windows], "mtbf_s": o.mtbf_s, "mttr_s": o.mttr_s},
            "restart_overhead_s": self.restart_overhead_s, "max_failures": self.max_failures,
            "governance": None if self.governance is None else dict(self.governance),
        }

    @classmethod
    def from_dict(cls, data: Any, name: str = "scenario") -> DynamicsConfig:
        """Build from a mapping (the YAML layout of the module docstring, checked by :class:`ScenarioFile`); unknown
        keys and bad values are a one-line :class:`ConfigError` naming the key."""
        file = validated(ScenarioFile, data, f"scenario {name!r}")
        failures = file.failures.model_dump(exclude_unset=True) if file.failures else {}
        schedule = tuple(ScheduledFailure(**item) for item in failures.pop("schedule", None) or ())
        outages = file.outages.model_dump(exclude_unset=True) if file.outages else {}
        windows = tuple(tuple(w) for w in outages.pop("windows", None) or ())
        rest = file.model_dump(exclude_unset=True, include={"restart_overhead_s", "max_failures"})
        governance = file.governance.model_dump(exclude_unset=True) if file.governance else None
        return cls(FailureConfig(**failures, schedule=schedule), OutageConfig(**outages, windows=windows),
                   name=name, governance=governance, **rest)


def _mtbf(value: float) -> float:
    if value != math.inf and not MIN_MTBF_S <= value <= MAX_TIME_S:
        raise ValueError(f"must be in [{MIN_MTBF_S:g}, {MAX_TIME_S:g}] s or .inf")
    return value


def _pairs(value: Any) -> Any:
    """YAML gives ``[start, duration]`` lists where the model reads (start, duration) pairs."""
    return [tuple(item) if isinstance(item, list) else item for item in value] if isinstance(value, list) else value


Mtbf = Annotated[float, Field(allow_inf_nan=True, description="mean time between failures [s], >= 60, or .inf"),
                 AfterValidator(_mtbf)]
Time = Annotated[float, Field(ge=0, le=MAX_TIME_S, description="[s] from the run's start")]
Duration = Annotated[float, Field(ge=MIN_MTTR_S, le=MAX_TIME_S, description="[s]")]
Index = Annotated[int, Field(ge=0)]


class ScheduledFailureFile(FileModel):
    """``failures.schedule[i]``: node ``node`` (or its GPU ``gpu``) fails at ``fail_s`` for ``repair_s``."""

    node: Index
    fail_s: Time
    repair_s: Duration
    gpu: Index | None = None


class FailuresFile(FileModel):
    """The ``failures:`` section."""

    node_mtbf_s: Mtbf | dict[str, Mtbf] = math.inf
    gpu_mtbf_s: Mtbf | dict[str, Mtbf] = math.inf
    repair: Literal[REPAIR_MODELS] = FailureConfig.repair  # type: ignore[valid-type]
    mttr_s: Duration = FailureConfig.mttr_s
    schedule: list[ScheduledFailureFile] | None = None


class OutagesFile(FileModel):
    """The ``outages:`` section."""

    windows: Annotated[list[tuple[Time, Duration]], BeforeValidator(_pairs)] | None = None
    mtbf_s: Mtbf = math.inf
    mttr_s: Duration = OutageConfig.mttr_s


class GovernanceFile(FileModel):
    """The ``governance:`` section (its content is checked against the cluster's nodes: envs.core.governance)."""

    partitions: Any = None
    quotas: Any = None


class ScenarioFile(FileModel):
    """A scenario file (``configs/scenarios/NAME.yaml``): failures, outages and the cost of an interruption."""

    failures: FailuresFile | None = None
    outages: OutagesFile | None = None
    restart_overhead_s: Time = DynamicsConfig.restart_overhead_s
    max_failures: Annotated[int, Field(ge=0, le=MAX_FAILURES)] = DynamicsConfig.max_failures
    governance: GovernanceFile | None = None


def scenario_names() -> list[str]:
    """Names of the scenarios shipped in ``configs/scenarios/`` (``none`` among them)."""
    folder = resources.files("configs") / "scenarios"
    return sorted(p.name[: -len(".yaml")] for p in folder.iterdir() if p.name.endswith(".yaml"))


def load_dynamics(spec: str | Path | None, seed: int = 0) -> DynamicsConfig:
    """The scenario ``spec`` (a name under ``configs/scenarios/``, a YAML path, or None / ``none`` for
    :data:`STATIC`), its random draws seeded with ``seed``."""
    text = str(spec) if spec is not None else NO_DYNAMICS
    if text == NO_DYNAMICS:
        return DynamicsConfig(seed=seed)
    if names_a_file(text):
        path = Path(text)
        data, name = read_yaml(path, "scenario file"), path.stem
    else:
        resource = resources.files("configs") / "scenarios" / f"{text}.yaml"
        if not resource.is_file():
            raise ConfigError(f"scenario {text!r}: no such scenario (known: {', '.join(scenario_names())}) "
                              "and no such file")
        data, name = yaml.safe_load(resource.read_text()), text
    return dataclasses.replace(DynamicsConfig.from_dict(data, name=name), seed=seed)


def _finite(mtbf: MTBF) -> bool:
    values = mtbf.values() if isinstance(mtbf, Mapping) else (mtbf,)
    return any(math.isfinite(v) for v in values)


def scheduled_gpus(config: DynamicsConfig, cluster: ClusterSpec) -> list[int]:
    """The global GPU index of each explicit failure of ``config`` (-1 for a node failure); a :class:`ConfigError`
    when one names a node or a GPU that ``cluster`` does not have."""
    found = []
    for i, s in enumerate(config.failures.schedule):
        where = f"scenario {config.name!r}: failures.schedule[{i}]"
        if s.node >= cluster.n_nodes:
            raise ConfigError(f"{where}.node: {s.node} is not a node of {cluster.name} (0..{cluster.n_nodes - 1})")
        size = int(cluster.node_n_gpus[s.node])
        if s.gpu is not None and s.gpu >= size:
            raise ConfigError(f"{where}.gpu: node {s.node} has {size} GPUs (0..{size - 1}), got {s.gpu}")
        found.append(-1 if s.gpu is None else int(cluster.node_first_gpu[s.node]) + s.gpu)
    return found


STATIC = DynamicsConfig()
"""No failures, no outages: the static cluster of every run before dynamics existed."""
