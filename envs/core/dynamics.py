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
from dataclasses import dataclass, field, fields
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from envs.core.errors import ConfigError, check_keys
from envs.core.files import read_yaml

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
        where = f"scenario {self.name!r}"
        f, o = self.failures, self.outages
        for key, value in (("failures.node_mtbf_s", f.node_mtbf_s), ("failures.gpu_mtbf_s", f.gpu_mtbf_s)):
            for sub, mtbf in (value.items() if isinstance(value, Mapping) else [("", value)]):
                _positive(f"{where}: {key}{'.' + sub if sub else ''}", mtbf)
        if f.repair not in REPAIR_MODELS:
            raise ConfigError(f"{where}: failures.repair: must be one of {', '.join(REPAIR_MODELS)}, got {f.repair!r}")
        _positive(f"{where}: failures.mttr_s", f.mttr_s, finite=True)
        for i, s in enumerate(f.schedule):
            _non_negative(f"{where}: failures.schedule[{i}].fail_s", s.fail_s)
            _positive(f"{where}: failures.schedule[{i}].repair_s", s.repair_s, finite=True)
        for i, (start, duration) in enumerate(o.windows):
            _non_negative(f"{where}: outages.windows[{i}] start", start)
            _positive(f"{where}: outages.windows[{i}] duration", duration, finite=True)
        _positive(f"{where}: outages.mtbf_s", o.mtbf_s)
        _positive(f"{where}: outages.mttr_s", o.mttr_s, finite=True)
        _non_negative(f"{where}: restart_overhead_s", self.restart_overhead_s)
        if isinstance(self.max_failures, bool) or not isinstance(self.max_failures, int) or self.max_failures < 0:
            raise ConfigError(f"{where}: max_failures: must be an integer >= 0, got {self.max_failures!r}")

    @property
    def active(self) -> bool:
        """True when anything can fail or go down; False means the run is exactly the static simulation."""
        return self.failures.active or self.outages.active

    @classmethod
    def from_dict(cls, data: Any, name: str = "scenario") -> DynamicsConfig:
        """Build from a mapping (the YAML layout of the module docstring); unknown keys and bad values are a
        :class:`ConfigError` naming the key."""
        where = f"scenario {name!r}"
        if data is None:
            data = {}
        check_keys(data, ("failures", "outages", "restart_overhead_s", "max_failures", "governance"), where)
        governance = data.get("governance")
        if governance is not None:
            check_keys(governance, ("partitions", "quotas"), f"{where}: governance")
        failures = dict(data.get("failures") or {})
        check_keys(failures, (f.name for f in fields(FailureConfig)), f"{where}: failures")
        schedule = []
        for i, item in enumerate(failures.pop("schedule", None) or ()):
            check_keys(item, ("node", "gpu", "fail_s", "repair_s"), f"{where}: failures.schedule[{i}]")
            missing = [k for k in ("node", "fail_s", "repair_s") if k not in item]
            if missing:
                raise ConfigError(f"{where}: failures.schedule[{i}]: missing {', '.join(missing)}")
            schedule.append(ScheduledFailure(_index(f"{where}: failures.schedule[{i}].node", item["node"]),
                                             _number(f"{where}: failures.schedule[{i}].fail_s", item["fail_s"]),
                                             _number(f"{where}: failures.schedule[{i}].repair_s", item["repair_s"]),
                                             None if item.get("gpu") is None else
                                             _index(f"{where}: failures.schedule[{i}].gpu", item["gpu"])))
        for key in ("node_mtbf_s", "gpu_mtbf_s"):
            if key in failures:
                value = failures[key]
                failures[key] = ({str(t): _number(f"{where}: failures.{key}.{t}", v) for t, v in value.items()}
                                 if isinstance(value, Mapping) else _number(f"{where}: failures.{key}", value))
        if "mttr_s" in failures:
            failures["mttr_s"] = _number(f"{where}: failures.mttr_s", failures["mttr_s"])
        outages = dict(data.get("outages") or {})
        check_keys(outages, (f.name for f in fields(OutageConfig)), f"{where}: outages")
        windows = []
        for i, window in enumerate(outages.pop("windows", None) or ()):
            if not isinstance(window, (list, tuple)) or len(window) != 2:
                raise ConfigError(f"{where}: outages.windows[{i}]: must be a [start_s, duration_s] pair, "
                                  f"got {window!r}")
            windows.append((_number(f"{where}: outages.windows[{i}]", window[0]),
                            _number(f"{where}: outages.windows[{i}]", window[1])))
        for key in ("mtbf_s", "mttr_s"):
            if key in outages:
                outages[key] = _number(f"{where}: outages.{key}", outages[key])
        rest = {k: data[k] for k in ("restart_overhead_s", "max_failures") if k in data}
        if "restart_overhead_s" in rest:
            rest["restart_overhead_s"] = _number(f"{where}: restart_overhead_s", rest["restart_overhead_s"])
        return cls(FailureConfig(**failures, schedule=tuple(schedule)),
                   OutageConfig(**outages, windows=tuple(windows)), name=name, governance=governance, **rest)


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
    path = Path(text)
    if path.suffix in (".yaml", ".yml") or path.exists():
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


def _number(where: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{where}: must be a number, got {value!r}")
    return float(value)


def _index(where: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"{where}: must be an integer >= 0, got {value!r}")
    return value


def _positive(where: str, value: float, finite: bool = False) -> None:
    if not value > 0 or (finite and not math.isfinite(value)):
        raise ConfigError(f"{where}: must be {'finite and ' if finite else ''}> 0, got {value}")


def _non_negative(where: str, value: float) -> None:
    if not (math.isfinite(value) and value >= 0):
        raise ConfigError(f"{where}: must be finite and >= 0, got {value}")


STATIC = DynamicsConfig()
"""No failures, no outages: the static cluster of every run before dynamics existed."""
