"""The configuration of :class:`~envs.gymenv.env.GPUClusterEnv`: one frozen, validated object.

Build it from defaults, a mapping (``EnvConfig.from_dict``) or keyword overrides (``config.replace(**kwargs)``);
unknown keys are a :class:`~envs.core.errors.ConfigError` naming the key.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from envs.core.dynamics import DynamicsConfig, load_dynamics
from envs.core.errors import ConfigError, check_keys
from envs.core.job import MAX_TIME_S
from envs.core.runtime import RUNTIME_MODELS
from envs.placement import get_placement_rule
from envs.workload.synthetic_config import MAX_JOBS
from envs.workload.table import LOAD_FACTORS

MAX_SLOTS = 4096
"""The most visible job (or running-job) slots of an observation."""
MAX_REWARD_WEIGHT = 1e6
"""The largest reward weight in absolute value (an infinite one makes every reward NaN)."""
REWARD_TERMS = ("wait", "utilization")
"""Names of the reward terms (see the env's docstring)."""


@dataclass(frozen=True)
class EnvConfig:
    """Everything that defines a GPUClusterEnv variant."""

    cluster: str = "hetero-64"  # preset, YAML, swf:N, openb:/scontrol:/sinfo:/kubectl:PATH, or "auto" (the trace's)
    workload: str = "default"  # synthetic preset name / YAML path, or FORMAT:PATH (swf, philly, openb, sacct, ...)
    episode_jobs: int = 256  # M: jobs per episode (a generated workload, or a window of the trace)
    slots: int = 16  # K: pending jobs visible to the agent, in queue order
    placement_rules: tuple[str, ...] = ("pack", "spread", "topology")  # P rules, see envs.placement
    backfill_assist: bool = False  # a Start of a job that does not fit reserves it; EASY backfills the rest
    work_conserving: bool = False  # Wait is masked while some Start is legal: GPUs never idle on purpose
    scenario: str = "none"  # failures and outages: a name under configs/scenarios/ (none, low, high, ...) or YAML path
    preemption: bool = False  # R more actions, one per running slot: preempt that job (it requeues); adds "running"
    running_slots: int = 8  # R: running jobs visible with preemption, most recently started first (then job id)
    reward_weights: Mapping[str, float] = field(default_factory=lambda: {"wait": 1.0, "utilization": 0.0})
    """Weight of each reward term (missing terms weigh 0; see Rewards)."""
    wait_scale_s: float = 3600.0  # the wait term pays -1 per job-hour of waiting [s]
    runtime_model: str = "full"  # "full" (speed, topology, staging) or "rigid" (none: SWF-style)
    load_factor: float = 1.0  # scales arrival rates (2 = twice the load)
    max_overestimate: float = 1.0  # > 1: trace estimates become runtime × U(1, this) (trace runtimes are exact)
    trace_split: str = "all"  # windows from the "train" part of a trace (by time), the "test" part, or "all"
    train_fraction: float = 0.8  # share of the trace's submit span that is "train"
    max_queue_obs: int = 256  # queue length that maps to 1.0 in the observation [jobs]
    max_wait_obs_s: float = 86400.0  # waiting time that maps to 1.0 (log scale) [s]
    max_runtime_obs_s: float = 7 * 86400.0  # requested wall time that maps to 1.0 (log scale) [s]
    max_dataset_obs_gib: float = 1000.0  # dataset size that maps to 1.0 (log scale) [GiB]
    max_priority_obs: int = 4  # priority class that maps to 1.0
    ending_soon_obs_s: float = 3600.0  # horizon of the "ending_soon" feature (expected ends within it) [s]
    max_service_obs_gpu_s: float = 64 * 7 * 86400.0  # attained service that maps to 1.0 (log scale) [GPU-s]
    planner_features: bool = False  # GPUs freeing within 15m/1h/4h, waiting gangs, broken nodes (planner_features.py)
    mask_aliases: bool = False  # mask a Start whose rule gives the same GPUs as an earlier rule for that slot

    def __post_init__(self) -> None:
        if not isinstance(self.placement_rules, tuple):
            object.__setattr__(self, "placement_rules", tuple(self.placement_rules))
        for key in ("episode_jobs", "slots", "running_slots", "max_queue_obs", "max_priority_obs"):
            value = getattr(self, key)
            most = MAX_SLOTS if key in ("slots", "running_slots") else MAX_JOBS
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
                raise ConfigError(f"env.{key}: must be an integer in 1..{most:,}, got {value!r}")
        for key in ("wait_scale_s", "load_factor", "max_wait_obs_s", "max_runtime_obs_s", "max_dataset_obs_gib",
                    "ending_soon_obs_s", "max_service_obs_gpu_s"):
            value = getattr(self, key)
            low, high = LOAD_FACTORS if key == "load_factor" else (0.0, MAX_TIME_S)
            number = not isinstance(value, bool) and isinstance(value, (int, float))
            if not number or not (low <= value if low else value > 0) or not value <= high:
                bounds = f"[{low:g}, {high:g}]" if low else f"(0, {high:g}]"
                raise ConfigError(f"env.{key}: must be a number in {bounds}, got {value!r}")
        if not self.placement_rules:
            raise ConfigError("env.placement_rules: needs at least one rule")
        for rule in self.placement_rules:
            try:
                get_placement_rule(rule)
            except ConfigError as exc:
                raise ConfigError(f"env.placement_rules: {exc}") from exc
        unknown = sorted(set(self.reward_weights) - set(REWARD_TERMS))
        if unknown:
            raise ConfigError(f"env.reward_weights.{unknown[0]}: unknown term (known: {', '.join(REWARD_TERMS)})")
        weights = {t: self.reward_weights.get(t, 0.0) for t in REWARD_TERMS}
        for term, weight in weights.items():
            if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not abs(weight) <= MAX_REWARD_WEIGHT:
                raise ConfigError(f"env.reward_weights.{term}: must be a number within ±{MAX_REWARD_WEIGHT:g}, got "
                                  f"{weight!r}")
        object.__setattr__(self, "reward_weights", {t: float(w) for t, w in weights.items()})
        if self.runtime_model not in RUNTIME_MODELS:
            raise ConfigError(f"env.runtime_model: must be {' or '.join(map(repr, RUNTIME_MODELS))}, "
                              f"got {self.runtime_model!r}")
        if self.trace_split not in ("all", "train", "test"):
            raise ConfigError(f"env.trace_split: must be 'all', 'train' or 'test', got {self.trace_split!r}")
        if not 0 < self.train_fraction < 1:
            raise ConfigError(f"env.train_fraction: must be in (0, 1), got {self.train_fraction!r}")
        if not self.max_overestimate >= 1:
            raise ConfigError(f"env.max_overestimate: must be >= 1, got {self.max_overestimate!r}")
        for key in ("preemption", "planner_features", "mask_aliases", "work_conserving", "backfill_assist"):
            if not isinstance(getattr(self, key), bool):
                raise ConfigError(f"env.{key}: must be true or false, got {getattr(self, key)!r}")
        if not isinstance(self.scenario, str):
            raise ConfigError(f"env.scenario: must be a scenario name or a YAML path, got {self.scenario!r}")
        try:
            dynamics = load_dynamics(self.scenario)
        except ConfigError as exc:
            raise ConfigError(f"env.scenario: {exc}") from exc
        object.__setattr__(self, "_dynamics", dynamics)  # loaded once; not a field (replace() reloads it)

    @property
    def dynamics(self) -> DynamicsConfig:
        """The scenario's failures and outages (seed 0: each episode draws its own seed, see EpisodeSource)."""
        return self._dynamics  # type: ignore[attr-defined]

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EnvConfig:
        """Defaults overridden by ``data``; unknown keys are an error naming the key."""
        return cls().replace(**data)

    def replace(self, **overrides: Any) -> EnvConfig:
        """A copy with ``overrides``; unknown keys are an error naming the key."""
        check_keys(overrides, (f.name for f in dataclasses.fields(self)), "env")
        return dataclasses.replace(self, **overrides)

    @functools.cached_property
    def n_starts(self) -> int:
        """K · P: the Start actions, one per (visible slot, placement rule)."""
        return self.slots * len(self.placement_rules)

    @functools.cached_property
    def n_preempts(self) -> int:
        """R with ``preemption``, else 0: the Preempt actions, one per visible running slot."""
        return self.running_slots if self.preemption else 0

    @functools.cached_property
    def n_actions(self) -> int:
        """K · P Starts, then R Preempts (with ``preemption``), then Wait (the last action)."""
        return self.n_starts + self.n_preempts + 1
