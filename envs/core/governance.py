"""Governance of a cluster: who may use which nodes (partitions) and how much of it (quotas). Data only; the
simulator's :class:`~envs.sim.quota.QuotaLedger` enforces quotas, and :meth:`ClusterSpec.eligible_nodes` partitions.

Priority says who goes first; quota says how much a team or user may hold at once (SPEC §3). Quotas count GPU
shares (a half-GPU job holds 0.5 GPU) and come in two models:

- **hard limits** (Slurm's ``GrpTRES=gres/gpu=N`` on an account or a user): a start that would take the account's
  (team's) or the user's held GPUs above N is refused (``RefusalReason.QUOTA``), so the job waits even when GPUs
  are free, and starts when the team's own jobs end;
- **queues** (Kueue's ClusterQueues, one per team): each holds a nominal quota. Queues of one cohort may borrow the
  nominal quota the others leave unused, up to their borrowing limit: a start is admitted when the queue's usage
  after it is at most nominal + borrowing limit and the cohort's usage after it is at most the sum of the cohort's
  nominal quotas (a queue with no cohort is its own cohort). When a team's pending job fits within its own nominal
  quota but the cohort is full because others borrow, the borrowed workloads are reclaimed by preemption
  (Kueue's ``reclaimWithinCohort: Any``): the simulator does it at the next decision point (:mod:`envs.sim.quota`).

A cluster preset (or the ``governance`` section of a policy config) holds::

    partitions:                       # Slurm partitions / Kubernetes node pools; they may overlap
      - name: gpu
        nodes: [a100-0, a100-1]        # node names (a preset names nodes GROUP-0, GROUP-1, ...), or
        groups: [a100]                 # ... every node whose name is GROUP-k
        priority_tier: 1               # jobs of higher tiers are considered first (Slurm PriorityTier)
        max_wall_s: 86400              # a job asking for more is rejected at submission (EnforcePartLimits=ALL)
        allowed_teams: [vision, nlp]   # default: every team (Slurm AllowAccounts)
        default: true                  # jobs naming no partition go here (default: anywhere)
    quotas:
      limits:                          # hard limits, GPUs held at once
        teams: {vision: 8}
        users: {alice: 2}
      queues:                          # Kueue-style queues, by team
        vision: {nominal_gpus: 8, borrowing_limit_gpus: 4, cohort: research}
        nlp: {nominal_gpus: 8, cohort: research}    # no borrowing limit: may borrow all the cohort leaves unused

A job's partition is enforced only where the cluster defines partitions; elsewhere the label is ignored (SWF
traces carry partition numbers that a plain machine does not know). Teams without a queue are not limited by
queues. Unknown keys and impossible values raise :class:`~envs.core.errors.ConfigError` naming the key.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from envs.core.errors import ConfigError, check_keys

_PARTITION_KEYS = {"name", "nodes", "groups", "priority_tier", "max_wall_s", "allowed_teams", "default"}
_QUOTA_KEYS = {"limits", "queues"}
_LIMIT_KEYS = {"teams", "users"}
_QUEUE_KEYS = {"nominal_gpus", "borrowing_limit_gpus", "cohort"}


@dataclass(frozen=True, slots=True)
class Partition:
    """A named subset of the cluster's nodes (by node index), with its own tier, time limit and allowed teams."""

    name: str
    nodes: tuple[int, ...]  # node indices, ascending
    priority_tier: int = 0  # higher tiers are considered first
    max_wall_s: float = math.inf  # the longest requested wall time accepted [s]
    allowed_teams: frozenset[str] = frozenset()  # empty = every team
    default: bool = False  # jobs naming no partition run here

    def allows(self, team: str) -> bool:
        """True when ``team`` may submit to this partition."""
        return not self.allowed_teams or team in self.allowed_teams


@dataclass(frozen=True, slots=True)
class Queue:
    """A Kueue-style queue of one team: nominal quota, borrowing limit and cohort, in GPUs."""

    team: str
    nominal_gpus: float
    borrowing_limit_gpus: float = math.inf  # inf = may borrow everything the cohort leaves unused
    cohort: str = ""  # empty = a cohort of its own (no borrowing)


@dataclass(frozen=True)
class Quotas:
    """Hard limits (GPUs held at once, per team and per user) and Kueue-style queues (per team)."""

    team_limits: Mapping[str, float]
    user_limits: Mapping[str, float]
    queues: Mapping[str, Queue]

    @property
    def active(self) -> bool:
        """True when any quota is set."""
        return bool(self.team_limits or self.user_limits or self.queues)


NO_QUOTAS = Quotas({}, {}, {})
"""No quota at all: nothing is limited (the default)."""


@dataclass(frozen=True)
class Governance:
    """Partitions and quotas of a cluster."""

    partitions: tuple[Partition, ...] = ()
    quotas: Quotas = NO_QUOTAS

    @property
    def active(self) -> bool:
        """True when partitions or quotas are set."""
        return bool(self.partitions) or self.quotas.active

    def partition(self, name: str) -> Partition | None:
        """The partition a job naming ``name`` runs in: the named one, the default one for ``""``, else None (for
        ``""`` with no default partition: anywhere; for an unknown name: the job is rejected)."""
        for p in self.partitions:
            if (p.name == name) if name else p.default:
                return p
        return None

    def tier(self, partition: str) -> int:
        """The priority tier of a job naming ``partition`` (0 without partitions)."""
        p = self.partition(partition) if self.partitions else None
        return p.priority_tier if p is not None else 0


NO_GOVERNANCE = Governance()
"""No partition and no quota (the default of every cluster)."""


def governance_from_dict(data: Any, node_names: tuple[str, ...], where: str) -> Governance:
    """Partitions and quotas from the mapping a preset's ``partitions`` and ``quotas`` keys (or a policy config's
    ``governance`` section) hold; node names resolve against ``node_names``; ``where`` prefixes errors."""
    check_keys(data, {"partitions", "quotas"}, where)
    partitions = data.get("partitions") or []
    if not isinstance(partitions, list):
        raise ConfigError(f"{where}.partitions: must be a list of partitions")
    parsed = tuple(_partition(p, node_names, f"{where}.partitions[{i}]") for i, p in enumerate(partitions))
    names = [p.name for p in parsed]
    for name in names:
        if names.count(name) > 1:
            raise ConfigError(f"{where}.partitions: partition {name!r} is defined twice")
    if sum(p.default for p in parsed) > 1:
        raise ConfigError(f"{where}.partitions: at most one partition may be the default")
    return Governance(parsed, _quotas(data.get("quotas") or {}, f"{where}.quotas"))


def _partition(data: Any, node_names: tuple[str, ...], where: str) -> Partition:
    check_keys(data, _PARTITION_KEYS, where)
    name = data.get("name")
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{where}.name: must be a non-empty string, got {name!r}")
    index = {n: i for i, n in enumerate(node_names)}
    chosen: set[int] = set()
    for node in _strings(data, "nodes", where):
        if node not in index:
            raise ConfigError(f"{where}.nodes: no node is named {node!r}")
        chosen.add(index[node])
    for group in _strings(data, "groups", where):
        members = [i for n, i in index.items() if n.rpartition("-")[0] == group]
        if not members:
            raise ConfigError(f"{where}.groups: no node belongs to group {group!r}")
        chosen.update(members)
    if not chosen:
        raise ConfigError(f"{where}: a partition needs nodes or groups")
    tier = data.get("priority_tier", 0)
    if isinstance(tier, bool) or not isinstance(tier, int):
        raise ConfigError(f"{where}.priority_tier: must be an integer, got {tier!r}")
    max_wall_s = _gpus_or_seconds(data, "max_wall_s", where, math.inf)
    if max_wall_s == 0:
        raise ConfigError(f"{where}.max_wall_s: must be > 0")
    default = data.get("default", False)
    if not isinstance(default, bool):
        raise ConfigError(f"{where}.default: must be true or false, got {default!r}")
    return Partition(name, tuple(sorted(chosen)), tier, max_wall_s, frozenset(_strings(data, "allowed_teams", where)),
                     default)


def _quotas(data: Any, where: str) -> Quotas:
    check_keys(data, _QUOTA_KEYS, where)
    limits = data.get("limits") or {}
    check_keys(limits, _LIMIT_KEYS, f"{where}.limits")
    team_limits = _limits(limits.get("teams") or {}, f"{where}.limits.teams")
    user_limits = _limits(limits.get("users") or {}, f"{where}.limits.users")
    queues_data = data.get("queues") or {}
    if not isinstance(queues_data, Mapping):
        raise ConfigError(f"{where}.queues: must be a mapping of team to queue")
    queues = {}
    for team, fields in queues_data.items():
        at = f"{where}.queues.{team}"
        check_keys(fields, _QUEUE_KEYS, at)
        if "nominal_gpus" not in fields:
            raise ConfigError(f"{at}.nominal_gpus: missing")
        cohort = fields.get("cohort", "")
        if not isinstance(cohort, str):
            raise ConfigError(f"{at}.cohort: must be a string, got {cohort!r}")
        queues[str(team)] = Queue(str(team), _gpus_or_seconds(fields, "nominal_gpus", at, 0.0),
                                  _gpus_or_seconds(fields, "borrowing_limit_gpus", at, math.inf), cohort)
    return Quotas(team_limits, user_limits, queues)


def _limits(data: Any, where: str) -> dict[str, float]:
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where}: must be a mapping of name to GPUs")
    return {str(name): _gpus_or_seconds(data, name, where, 0.0) for name in data}


def _gpus_or_seconds(data: Mapping[str, Any], key: str, where: str, default: float) -> float:
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) or value < 0:
        raise ConfigError(f"{where}.{key}: must be a number >= 0, got {value!r}")
    return float(value)


def _strings(data: Mapping[str, Any], key: str, where: str) -> list[str]:
    value = data.get(key) or []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}.{key}: must be a list of names, got {value!r}")
    return value
