"""The ``slurm:`` section of a policy config: slurm.conf's scheduling parameters, by their slurm.conf names, with
Slurm 22.05's documented defaults (``man slurm.conf``). The same section writes the live Slurm's ``slurm.conf``
(``benchmarks/slurm_live.py``), so the simulator and the real scheduler read one source.

    slurm:
      SchedulerType: sched/backfill            # or sched/builtin (no backfill)
      SchedulerParameters: bf_interval=1,bf_resolution=1,bf_window=1440,bf_max_job_test=500
      PriorityType: priority/multifactor       # default priority/basic (submit order)
      PriorityWeightAge: 1000                  # multifactor weights, default 0 each
      PriorityWeightFairshare: 10000
      PriorityWeightJobSize: 0
      PriorityWeightPartition: 0
      PriorityWeightQOS: 0
      PriorityMaxAge: 7-0                      # a Slurm time string (min, hr:min:00, days-hr:min:00, days-hr)
      PriorityDecayHalfLife: 7-0
      PriorityCalcPeriod: 5                    # minutes
      PriorityFavorSmall: NO
      PreemptType: preempt/none                # or preempt/qos
      PreemptMode: OFF                         # or REQUEUE (with preempt/qos)

``SchedulerParameters`` may also be a mapping (``{bf_interval: 1, bf_resolution: 1}``). Unknown keys, unknown
``SchedulerParameters`` options and bad values raise :class:`~envs.core.errors.ConfigError` naming the key.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from envs.core.errors import ConfigError, check_keys

SCHEDULER_TYPES = ("sched/backfill", "sched/builtin")
PRIORITY_TYPES = ("priority/basic", "priority/multifactor")
PREEMPT_TYPES = ("preempt/none", "preempt/qos")
PREEMPT_MODES = ("OFF", "REQUEUE")

_SCHEDULER_PARAMETERS = {  # option -> (field, unit factor to the field's unit)
    "bf_interval": ("bf_interval_s", 1), "bf_resolution": ("bf_resolution_s", 1), "bf_window": ("bf_window_s", 60),
    "bf_max_job_test": ("bf_max_job_test", 1), "sched_interval": ("sched_interval_s", 1),
    "default_queue_depth": ("default_queue_depth", 1),
}
_WEIGHTS = {"PriorityWeightAge": "w_age", "PriorityWeightFairshare": "w_fairshare", "PriorityWeightJobSize":
            "w_job_size", "PriorityWeightPartition": "w_partition", "PriorityWeightQOS": "w_qos"}
_TIMES = {"PriorityMaxAge": "max_age_s", "PriorityDecayHalfLife": "half_life_s"}
KEYS = ("SchedulerType", "SchedulerParameters", "PriorityType", *_WEIGHTS, *_TIMES, "PriorityCalcPeriod",
        "PriorityFavorSmall", "PreemptType", "PreemptMode")
"""The slurm.conf keys the section may hold."""


@dataclass(frozen=True)
class SlurmConf:
    """Slurm's scheduling parameters in our units (seconds), defaults those of Slurm 22.05."""

    scheduler_type: str = "sched/backfill"
    bf_interval_s: int = 30  # seconds between backfill cycles
    bf_resolution_s: int = 60  # time resolution of backfill's plan [s]
    bf_window_s: int = 1440 * 60  # how far ahead backfill plans [s]
    bf_max_job_test: int = 500  # jobs backfill considers per cycle
    sched_interval_s: int = 60  # seconds between full main-scheduler passes
    default_queue_depth: int = 100  # jobs the event-triggered main scheduler considers
    priority_type: str = "priority/basic"
    w_age: int = 0
    w_fairshare: int = 0
    w_job_size: int = 0
    w_partition: int = 0
    w_qos: int = 0
    max_age_s: float = 7 * 86400.0  # age at which the age factor reaches 1 [s]
    half_life_s: float = 7 * 86400.0  # fair-share usage half-life [s]; 0 = no decay
    calc_period_s: float = 300.0  # period of the usage decay and the priority recalculation [s]
    favor_small: bool = False
    preempt_type: str = "preempt/none"
    preempt_mode: str = "OFF"
    requeue_hold_s: float = 121.0  # a requeued job's wait before it is eligible again: the launch credential's
    # lifetime (AuthInfo cred_expire, default 120 s) + 1 (batch_requeue_fini: begin_time = now + cred_lifetime + 1)

    @property
    def backfill(self) -> bool:
        """True for ``sched/backfill``."""
        return self.scheduler_type == "sched/backfill"

    @property
    def multifactor(self) -> bool:
        """True for ``priority/multifactor``."""
        return self.priority_type == "priority/multifactor"

    @property
    def preempts(self) -> bool:
        """True when QOS preemption requeues jobs."""
        return self.preempt_type == "preempt/qos" and self.preempt_mode == "REQUEUE"

    def lines(self) -> list[str]:
        """These parameters as slurm.conf lines (the multifactor ones only under priority/multifactor)."""
        params = ",".join(f"{option}={getattr(self, name) // unit}"
                          for option, (name, unit) in _SCHEDULER_PARAMETERS.items())
        out = [f"SchedulerType={self.scheduler_type}", f"SchedulerParameters={params}",
               f"PriorityType={self.priority_type}"]
        if self.multifactor:
            out += [f"{key}={getattr(self, name)}" for key, name in _WEIGHTS.items()]
            out += [f"{key}={_minutes_text(getattr(self, name))}" for key, name in _TIMES.items()]
            out += [f"PriorityCalcPeriod={int(self.calc_period_s // 60)}",
                    f"PriorityFavorSmall={'YES' if self.favor_small else 'NO'}"]
        out += [f"PreemptType={self.preempt_type}", f"PreemptMode={self.preempt_mode}"]
        return out


def slurm_conf_from_dict(data: Any, where: str = "slurm") -> SlurmConf:
    """Parse and check a ``slurm:`` section (module docstring); None or {} gives Slurm's defaults."""
    if data is None:
        return SlurmConf()
    check_keys(data, KEYS, where)
    values: dict[str, Any] = {}
    for key, allowed, name in (("SchedulerType", SCHEDULER_TYPES, "scheduler_type"),
                               ("PriorityType", PRIORITY_TYPES, "priority_type"),
                               ("PreemptType", PREEMPT_TYPES, "preempt_type"),
                               ("PreemptMode", PREEMPT_MODES, "preempt_mode")):
        if key in data:
            text = str(data[key]).strip()
            text = text.upper() if key == "PreemptMode" else text.lower()
            if text not in allowed:
                raise ConfigError(f"{where}: {key}: must be one of {', '.join(allowed)}, got {data[key]!r}")
            values[name] = text
    for option, value in _scheduler_parameters(data.get("SchedulerParameters"), f"{where}: SchedulerParameters"):
        name, unit = _SCHEDULER_PARAMETERS[option]
        values[name] = _positive_int(value, f"{where}: SchedulerParameters: {option}") * unit
    for key, name in _WEIGHTS.items():
        if key in data:
            values[name] = _positive_int(data[key], f"{where}: {key}", minimum=0)
    for key, name in _TIMES.items():
        if key in data:
            values[name] = 60.0 * slurm_minutes(data[key], f"{where}: {key}")
    if "PriorityCalcPeriod" in data:
        values["calc_period_s"] = 60.0 * _positive_int(data["PriorityCalcPeriod"], f"{where}: PriorityCalcPeriod")
    if "PriorityFavorSmall" in data:
        flag = str(data["PriorityFavorSmall"]).strip().upper()
        if flag not in ("YES", "NO", "TRUE", "FALSE"):
            raise ConfigError(f"{where}: PriorityFavorSmall: must be YES or NO, got {data['PriorityFavorSmall']!r}")
        values["favor_small"] = flag in ("YES", "TRUE")
    conf = SlurmConf(**values)
    if conf.preempt_type == "preempt/qos" and conf.preempt_mode == "OFF":
        raise ConfigError(f"{where}: PreemptType preempt/qos needs PreemptMode REQUEUE")
    return conf


def slurm_minutes(value: Any, where: str) -> float:
    """Minutes of a Slurm time string: ``min``, ``min:sec``, ``hr:min:sec``, ``days-hr``, ``days-hr:min``,
    ``days-hr:min:sec``; ``UNLIMITED``/``INFINITE`` are infinite. A bare number is minutes."""
    if isinstance(value, bool):
        raise ConfigError(f"{where}: must be a Slurm time (minutes or days-hr:min:sec), got {value!r}")
    if isinstance(value, (int, float)):
        if not value >= 0:
            raise ConfigError(f"{where}: must be >= 0 minutes, got {value!r}")
        return float(value)
    text = str(value).strip()
    if text.upper() in ("UNLIMITED", "INFINITE"):
        return math.inf
    try:
        days_text, dash, rest = text.partition("-")
        days = int(days_text) if dash else 0
        parts = [int(p) for p in (rest if dash else text).split(":")]
        if any(p < 0 for p in parts) or days < 0 or not 1 <= len(parts) <= 3:
            raise ValueError
    except ValueError:
        raise ConfigError(f"{where}: must be a Slurm time (minutes or days-hr:min:sec), got {value!r}") from None
    if dash:  # days-hr[:min[:sec]]
        hours, minutes, secs = [*parts, 0, 0][:3]
    elif len(parts) == 3:
        hours, minutes, secs = parts
    else:  # min or min:sec
        hours, minutes, secs = 0, parts[0], (parts[1] if len(parts) == 2 else 0)
    return days * 1440 + hours * 60 + minutes + secs / 60


def _minutes_text(seconds: float) -> str:
    return "INFINITE" if math.isinf(seconds) else str(round(seconds / 60))


def _scheduler_parameters(value: Any, where: str) -> list[tuple[str, Any]]:
    if value is None:
        return []
    if isinstance(value, Mapping):
        items = [(str(k), v) for k, v in value.items()]
    else:
        items = []
        for part in str(value).split(","):
            option, eq, text = part.strip().partition("=")
            if not eq:
                raise ConfigError(f"{where}: {part.strip()!r}: expected OPTION=VALUE")
            items.append((option, text))
    for option, _ in items:
        if option not in _SCHEDULER_PARAMETERS:
            raise ConfigError(f"{where}: unknown option {option!r} (known: {', '.join(_SCHEDULER_PARAMETERS)})")
    return items


def _positive_int(value: Any, where: str, minimum: int = 1) -> int:
    try:
        number = int(str(value).strip())
    except ValueError:
        raise ConfigError(f"{where}: must be an integer >= {minimum}, got {value!r}") from None
    if number < minimum:
        raise ConfigError(f"{where}: must be an integer >= {minimum}, got {value!r}")
    return number


FIELDS = tuple(f.name for f in fields(SlurmConf))
"""The :class:`SlurmConf` fields (keyword parameters of the ``slurm`` policies)."""
