"""Slurm's scheduler as slurmctld 22.05 runs it: ``slurm`` (or ``slurm/PLACEMENT``), configured by the ``slurm:``
section of a policy config (:mod:`baselines.slurm_conf`; Slurm's documented defaults where the section is silent).

Checked against a live Slurm 22.05 on recorded streams (``tests/data/slurm/``, ``benchmarks/slurm_live.py``,
``docs/results/slurm-fidelity.md``). Each rule below names the Slurm parameter (or source) it comes from.

**Job priority** (``PriorityType``):

- ``priority/basic``: submit order (Slurm gives each new job a priority one below the previous job's).
- ``priority/multifactor``: ``PriorityWeightAge`` × age + ``PriorityWeightFairshare`` × fair share +
  ``PriorityWeightJobSize`` × size + ``PriorityWeightPartition`` × partition + ``PriorityWeightQOS`` × QOS, each
  factor in [0, 1], truncated to an integer: age = min(1, time pending / ``PriorityMaxAge``); fair share = the Fair
  Tree factor (Slurm's default algorithm) of the job's association (its user under its account, ``job.team``), from
  usage in GPU-seconds decayed with ``PriorityDecayHalfLife`` and shares from ``Accounts``; size (below;
  ``PriorityFavorSmall=YES``: 1 − that); partition = the partition's tier / the highest tier; QOS =
  the QOS's ``Priority`` / the highest. Priorities are computed at submission and recomputed for every pending job
  each ``PriorityCalcPeriod`` (the decay thread's period); in between they stay as they were. A submission takes
  the fair-share factors of the last pass, and a user that pass did not know (a new association) gets 0 until the
  next one; at the pass, usage is exact to that instant (Slurm charges running jobs at each pass and a job's tail at
  its end). The passes come every ``PriorityCalcPeriod`` from the decay thread's start (``calc_origin_s``); a
  pass that fell due while nothing was pending is computed at the next call as it was then: the jobs submitted
  since do not make their users known to it. The size factor is Slurm's: (nodes the job needs / nodes + its CPUs
  / the cluster's CPUs) / 2. Fair Tree also ranks the ``root`` user of the ``root`` account, which Slurm's
  database always holds and which has no jobs: it ranks first, so the users of two accounts get 1/3 and 2/3, not
  1/2 and 1; the values matter once a site factor is added to the priority.

**Steering** (the daemon of ``bridges/slurm_steer.py``, :class:`Steering`): at each of its ticks the daemon
ranks the pending jobs with a policy (:func:`~baselines.ranking.rank_jobs`) and writes ``SiteFactor`` =
:func:`~baselines.ranking.site_factors` to each job whose value changed (``scontrol update``). Slurm then recomputes
that job's priority at once (``set_job_prio``: the multifactor sum with the age of that instant and the fair-share
factors of the last pass, plus the site factor; at least 1) and each decay pass adds the site factor again; an
update queues a scheduling pass like a submission (:data:`SUBMIT_PASS_DELAY_S`). ``Priority=`` (the strict mode)
sets the priority itself, which no pass recalculates.

**Queue order**: higher partition ``PriorityTier`` first, then higher priority, then lower job id.

**When slurmctld schedules**: at every job end (the main scheduler, then backfill at its cycle); a submission
starts nothing at once (sbatch's submit only tests the job) but queues a pass about a second later
(:data:`SUBMIT_PASS_DELAY_S`) that considers every job pending by then; a job whose QOS may preempt others preempts
at its submission. Backfill runs when anything changed and its interval has passed since the last cycle.

**Main scheduler** (``schedule()`` in ``job_scheduler.c``): the queue in order;
a job whose partition is already blocked is skipped; a job that fits now starts; a job that does not blocks its
partition, and the nodes of that partition are withheld from every later job of this pass, whatever its partition
(``bit_and_not(avail_node_bitmap, part_ptr->node_bitmap)``). A job held by a ``GrpTRES`` limit (a hard quota) or
its partition's limits is skipped without blocking anything.

**Backfill** (``sched/backfill``, :mod:`baselines.slurm_backfill` has its rules step by step): the first
``bf_max_job_test`` jobs in queue order, each at its earliest start given the running jobs (ending at start +
requested time) and every reservation made earlier in this cycle; a job whose earliest start is now starts; one that
must wait is reserved if its start lies within ``bf_window``, on the ``bf_resolution`` grid. A reservation holds its
whole nodes for its window (``_add_reservation`` clears the nodes from backfill's node-space map): no later job is
planned on them then, even on GPUs the reserved job leaves free. Reservations are made anew every cycle (none is
kept from one cycle to the next).

**Nodes** (``select/cons_tres``; ``--gres=gpu:G`` counts per node): a job that fits one node runs on one node,
never split (the placement rule's choice when it is one node, else it waits). A job larger than a node (``sbatch
-N N --gres=gpu:G/N``, how the live harness submits it): N = ⌈G / the largest node's GPUs⌉ nodes with G/N free
GPUs each, the first N such nodes in index order, the lowest free GPUs of each; when G does not split evenly, the
placement rule (:func:`~baselines.slurm_placement.whole_node_gang`).

**Time limits**: Slurm holds whole minutes (``--time``): a requested time is rounded up to the next minute
(:func:`~baselines.slurm_backfill.time_limit_s`) wherever backfill plans with it.

**Preemption** (``PreemptType=preempt/qos``, ``PreemptMode=REQUEUE``): when the main scheduler cannot start a job
whose QOS may preempt others (``Preempt`` of its QOS), running jobs of those QOS are requeued, lowest QOS priority
first, then lowest job id (the order of slurmctld's job list), until the job fits; the job then starts. A requeued
job keeps no work (Slurm reruns the batch script) and may not start again for 121 s
(``SlurmConf.requeue_hold_s``: the launch credential's lifetime + 1). Its becoming eligible is no event: the next
job end, or else the main scheduler's periodic pass (every ``sched_interval``, from time 0), starts it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any

import numpy as np
from pydantic import Field

from baselines.fairtree import FairTree
from baselines.ranking import site_factors
from baselines.slurm_backfill import backfill_cycle
from baselines.slurm_conf import SlurmConf, slurm_conf_from_dict
from baselines.slurm_placement import still_free, whole_node_gang
from envs.core.errors import ConfigError
from envs.core.job import Job
from envs.core.schema import FileModel, validated
from envs.placement import PLACEMENT_DOCS, get_placement_rule
from envs.sim.policy import WAIT, Action, Preempt, Start, Wait
from envs.sim.resources import ResourceState
from envs.sim.view import PlacementRule, View

SLURM_PREFIX = "slurm"
"""Name of the family: ``slurm`` or ``slurm/PLACEMENT``."""

SLURM_DOCS = {"slurm": "slurmctld 22.05: priority/basic or multifactor, the main scheduler and sched/backfill, "
                       "QOS preemption; parameters from the policy config's slurm: section"}
"""The family's line in the policy catalogue."""

SUBMIT_PASS_DELAY_S = 1.0
"""How long after a submission its scheduling pass comes [s]: sbatch never starts a job at submission
(``job_mgr.c``: a batch job is only tested, ``test_only``); it queues a pass that slurmctld's background loop (and
backfill, which polls every second) runs about a second later (0.94 s in every record). That pass, like one after a
job ends, considers every pending job, those submitted since included."""

TICK_TOLERANCE = 1e-9
"""How close to a steering tick (relative to the period) a time counts as that tick."""

MAX_QOS_PRIORITY = 2**32 - 1
"""Slurm's largest QOS priority (a 32-bit unsigned value)."""


class QosFile(FileModel):
    """``slurm: QOS: NAME:`` as sacctmgr would hold it."""

    Priority: Annotated[int, Field(ge=0, le=MAX_QOS_PRIORITY)] = 0
    Preempt: str | list[str] | None = None  # the QOS it may preempt: a comma-separated string or a list


class AccountFile(FileModel):
    """``slurm: Accounts: NAME:`` (Fair Tree's tree; its values are checked by :class:`FairTree`)."""

    Fairshare: Any = 1
    Parent: Any = None


class SacctmgrFile(FileModel):
    """What a ``slurm:`` section holds besides slurm.conf keys: the QOS and the accounts."""

    QOS: dict[str, QosFile | None] | None = None
    Accounts: dict[str, AccountFile | None] | None = None


@dataclass(frozen=True)
class Qos:
    """A QOS as sacctmgr holds it: its priority and the QOS it may preempt."""

    name: str
    priority: int = 0
    preempts: frozenset[str] = frozenset()


@dataclass(frozen=True)
class SlurmParams:
    """Everything a ``slurm`` policy reads from its section: slurm.conf parameters, QOS and accounts."""

    conf: SlurmConf
    qos: Mapping[str, Qos]
    accounts: Mapping[str, Mapping[str, object]]  # Fair Tree accounts: {name: {shares, parent}}


def slurm_policy_params(section: Mapping[str, Any], where: str) -> SlurmParams:
    """Parse and check a ``slurm:`` section: slurm.conf keys (:mod:`baselines.slurm_conf`) plus what sacctmgr would
    hold, ``QOS: {name: {Priority: int, Preempt: [names]}}`` and ``Accounts: {name: {Fairshare: int, Parent:
    name}}``."""
    if section is None:
        section = {}
    if not isinstance(section, Mapping):
        raise ConfigError(f"{where}: must be a mapping of slurm.conf keys (and QOS, Accounts), got {section!r}")
    conf = slurm_conf_from_dict({k: v for k, v in section.items() if k not in ("QOS", "Accounts")}, where)
    sacctmgr = validated(SacctmgrFile, {k: v for k, v in section.items() if k in ("QOS", "Accounts")}, where)
    qos: dict[str, Qos] = {}
    for name, spec in (sacctmgr.QOS or {}).items():
        spec = spec or QosFile()
        preempt = spec.Preempt or []
        preempt = preempt.split(",") if isinstance(preempt, str) else preempt
        qos[name] = Qos(name, spec.Priority, frozenset(p.strip() for p in preempt if p.strip()))
    for q in qos.values():
        unknown = sorted(q.preempts - set(qos) - {"normal"})
        if unknown:
            raise ConfigError(f"{where}: QOS.{q.name}.Preempt: unknown QOS {', '.join(unknown)}")
    accounts: dict[str, dict[str, object]] = {}
    for name, spec in (sacctmgr.Accounts or {}).items():
        spec = spec or AccountFile()
        accounts[name] = {"shares": spec.Fairshare, **({"parent": spec.Parent} if "Parent" in spec.model_fields_set
                                                       else {})}
    FairTree(accounts, where=f"{where}: Accounts")  # checks the tree
    return SlurmParams(conf, qos, accounts)


STEER_FIELDS = ("SiteFactor", "Priority")
"""What a steering daemon writes: the site factor (Slurm's own factors kept) or the priority itself (a strict
order)."""


@dataclass(frozen=True)
class Steering:
    """A steering daemon's writes, as the simulated Slurm receives them (module docstring, **Steering**)."""

    ranker: Callable[[View], list[int]]  # the pending job ids, first favoured first (baselines.ranking.rank_jobs)
    period_s: float  # between the daemon's ticks [s]
    origin_s: float = 0.0  # its first tick [s]
    scale: int = 1000  # site factor step between neighbouring ranks
    field: str = "SiteFactor"  # or "Priority" (STEER_FIELDS)

    def __post_init__(self) -> None:
        if not self.period_s > 0 or not math.isfinite(self.period_s):
            raise ConfigError(f"steering: period_s must be a positive number of seconds, got {self.period_s!r}")
        if self.field not in STEER_FIELDS:
            raise ConfigError(f"steering: field must be one of {', '.join(STEER_FIELDS)}, got {self.field!r}")
        if not 1 <= self.scale <= 1_000_000:
            raise ConfigError(f"steering: scale must be 1..1,000,000, got {self.scale!r}")


def slurm_policy(name: str, slurm: Mapping[str, Any] | None = None, epoch_s: float = 0.0,
                 calc_origin_s: float = 0.0, steering: Steering | None = None) -> SlurmScheduler:
    """The policy ``slurm`` or ``slurm/PLACEMENT`` with the parameters of a ``slurm:`` section; ``epoch_s`` and
    ``calc_origin_s`` place the wall clock and the decay thread, ``steering`` a daemon's writes (see
    :class:`SlurmScheduler`)."""
    family, _, placement = name.strip().lower().partition("/")
    if family != SLURM_PREFIX:
        raise ConfigError(f"policy {name!r}: not a slurm policy (slurm or slurm/PLACEMENT)")
    placement = placement or "firstfit"
    if placement not in PLACEMENT_DOCS:
        raise ConfigError(f"policy {name!r}: unknown placement {placement!r} (known: {', '.join(PLACEMENT_DOCS)})")
    params = slurm_policy_params(slurm or {}, f"policy {name!r}: slurm")
    if steering is not None and not params.conf.multifactor:
        raise ConfigError(f"policy {name!r}: steering needs PriorityType=priority/multifactor")
    return SlurmScheduler(name.strip().lower(), params, get_placement_rule(placement), epoch_s, calc_origin_s,
                          steering)


class SlurmScheduler:
    """slurmctld's main scheduler, sched/backfill and preempt/qos (module docstring). ``epoch_s``: the Unix time of
    simulated time 0, for what Slurm aligns to the wall clock (:mod:`baselines.slurm_backfill`); ``calc_origin_s``:
    when the decay thread makes its first pass [s] (then every ``PriorityCalcPeriod``; slurmctld starts it about a
    second after its own start); ``steering``: a steering daemon's writes, None for none."""

    def __init__(self, name: str, params: SlurmParams, rule: PlacementRule, epoch_s: float = 0.0,
                 calc_origin_s: float = 0.0, steering: Steering | None = None) -> None:
        self.name, self.params, self.conf, self.rule, self.epoch_s = name, params, params.conf, rule, float(epoch_s)
        self.calc_origin_s = float(calc_origin_s)
        self.rule = whole_node_gang(rule)
        self.steering = steering
        self.fair_tree = FairTree(params.accounts, half_life_s=self.conf.half_life_s or math.inf,
                                  where="slurm: Accounts", root_user=True)
        self._max_qos = max([q.priority for q in params.qos.values()], default=0)
        self.reset()

    def reset(self) -> None:
        """Forget priorities, usage, requeue holds and the backfill clock."""
        self.fair_tree.reset()
        self._priority: dict[int, int] = {}  # job id -> priority (multifactor), as last computed
        self._base: dict[int, float] = {}  # job id -> its weighted factor sum, as last computed
        self._next_calc_s = self.calc_origin_s  # next multifactor recalculation [s]
        self._factors: dict[str, float] = {}  # Fair Tree factor per user at the last recalculation
        self._next_backfill_s = -math.inf  # earliest time of the next backfill cycle [s]
        self._planned: list[tuple[Job, np.ndarray]] = []  # the rest of this instant's backfill starts
        self._planned_at = math.nan  # when they were planned [s]
        self._held: dict[int, float] = {}  # requeued job id -> time it is eligible again [s]
        self._known: set[int] = set()  # pending jobs seen by an earlier call
        self._pass_s = -math.inf  # when the pass queued by the latest submissions runs [s]
        self._seen: tuple[int, frozenset[int]] | None = None  # (jobs ended, running jobs) at the last call
        self._site: dict[int, int] = {}  # job id -> the site factor (or priority) a steering daemon wrote
        self._next_tick_s = self.steering.origin_s if self.steering is not None else math.inf

    def _submissions_only(self, view: View, steered: bool = False) -> bool:
        """True when, since the last call, jobs were submitted or a steering daemon wrote priorities (``steered``)
        and nothing else changed (no end, no interruption), and the pass they queued is still to come; notes the
        submissions and the state."""
        now, seen = view.time_s, (view.n_ended, frozenset(view.running))
        new = view.pending.keys() - self._known
        if new:
            self._known |= new
            if self._pass_s < now:  # no pass queued yet: the first of these submissions queues one
                self._pass_s = now + SUBMIT_PASS_DELAY_S
        changed, self._seen = self._seen is not None and seen != self._seen, seen
        if self.conf.preempts and any(self._preemptor(view.pending[j]) for j in new):
            return False  # a job that may preempt others does so at its submission (seen in every record)
        return (bool(new) or steered) and not changed and now < self._pass_s

    def _preemptor(self, job: Job) -> bool:
        qos = self.params.qos.get(job.qos)
        return qos is not None and bool(qos.preempts)

    # --- priority -------------------------------------------------------------------------------------------

    def _multifactor(self, view: View, job: Job, factors: Mapping[str, float]) -> float:
        """The weighted sum of the job's factors now (without its site factor)."""
        c = self.conf
        eligible_s = self._held.get(job.job_id, job.submit_time_s)
        age = min(1.0, max(0.0, view.time_s - eligible_s) / c.max_age_s) if c.max_age_s > 0 else 1.0
        cluster = view.cluster
        nodes = math.ceil(job.n_gpus / int(cluster.node_n_gpus.max())) if job.n_gpus else 1
        cpus = job.n_gpus * job.cpu_milli_per_gpu / 1000
        total_cpus = float(cluster.node_cpu_milli.sum()) / 1000
        size = (nodes / cluster.n_nodes + (cpus / total_cpus if total_cpus else 0.0)) / 2
        governance = cluster.governance
        top_tier = max([p.priority_tier for p in governance.partitions], default=0)
        partition = governance.tier(job.partition) / top_tier if top_tier > 0 else 0.0
        qos = self.params.qos.get(job.qos)
        qos_factor = (qos.priority / self._max_qos) if qos is not None and self._max_qos > 0 else 0.0
        value = (c.w_age * age + c.w_fairshare * factors.get(job.user, 0.0)
                 + c.w_job_size * ((1.0 - size) if c.favor_small else size) + c.w_partition * partition
                 + c.w_qos * qos_factor)
        return value

    def _set_priority(self, job_id: int, base: float | None = None) -> None:
        """Note the job's factor sum ``base`` (None: keep the last one) and set its priority: that sum plus its site
        factor, truncated, at least 1; a priority a steering daemon set (``Priority=``) stays as set."""
        if base is not None:
            self._base[job_id] = base
        if self.steering is not None and self.steering.field == "Priority" and job_id in self._site:
            self._priority[job_id] = self._site[job_id]
        else:
            self._priority[job_id] = max(1, int(self._base[job_id] + self._site.get(job_id, 0)))

    def _steer(self, view: View) -> bool:
        """At a steering tick: write the ranking's values to the jobs whose value changed, each job's priority
        recomputed at once; True when anything was written (that queues a scheduling pass)."""
        steering, now = self.steering, view.time_s
        ticks = math.floor((now - steering.origin_s) / steering.period_s + TICK_TOLERANCE)
        last_tick = steering.origin_s + ticks * steering.period_s
        self._next_tick_s = steering.origin_s + (ticks + 1) * steering.period_s
        if abs(now - last_tick) > TICK_TOLERANCE * steering.period_s:
            return False  # ticks passed while nothing was pending (the daemon then writes nothing): none now
        self._site = {j: v for j, v in self._site.items() if j in view.pending}
        targets = site_factors(steering.ranker(view), steering.scale)
        if steering.field == "Priority":
            targets = {j: v + 1 for j, v in targets.items()}  # Priority=0 would hold the job
        changed = [j for j, v in targets.items() if self._site.get(j, 0) != v]
        for job_id in changed:  # Slurm's set_job_prio: the factors as last computed (the age too), the new value
            self._site[job_id] = targets[job_id]
            self._set_priority(job_id, None if job_id in self._base
                               else self._multifactor(view, view.pending[job_id], self._factors))
        if changed and self._pass_s < now:
            self._pass_s = now + SUBMIT_PASS_DELAY_S
        return bool(changed)

    def _queue(self, view: View) -> list[Job]:
        """Pending jobs in Slurm's order (tier, priority, job id), without requeued jobs still held and jobs a quota
        holds."""
        now = view.time_s
        self._held = {j: t for j, t in self._held.items() if j in view.pending or j in view.running}
        pending = [j for j in view.pending.values() if self._held.get(j.job_id, now) <= now]
        if self.conf.multifactor:
            if now >= self._next_calc_s:  # the decay thread's pass: usage, fair-share factors, pending priorities
                period = self.conf.calc_period_s
                due_s = self.calc_origin_s + math.floor((now - self.calc_origin_s) / period) * period
                self._factors = dict(self.fair_tree.factors(view, as_of_s=due_s))  # late: as the pass saw it
                for job in pending:
                    self._set_priority(job.job_id, self._multifactor(view, job, self._factors))
                self._next_calc_s = self.calc_origin_s + (math.floor((now - self.calc_origin_s) / period) + 1) * period
            for job in pending:  # priority at submission, with the factors of the last pass
                if job.job_id not in self._base:
                    self._set_priority(job.job_id, self._multifactor(view, job, self._factors))
            ranked = sorted(pending, key=lambda j: (-self._priority[j.job_id], j.submit_time_s, j.job_id))
        else:
            ranked = sorted(pending, key=lambda j: (j.submit_time_s, j.job_id))
        return view.schedulable(ranked)

    # --- the scheduler --------------------------------------------------------------------------------------

    def act(self, view: View) -> Action:
        """Main scheduler (and preemption), then, at its cycle, backfill; else wait for the next of those. A call
        whose only news is submissions defers to the pass they queue (:data:`SUBMIT_PASS_DELAY_S`)."""
        if not view.scheduler_up or not view.pending:
            self._seen = (view.n_ended, frozenset(view.running))
            return WAIT
        steered = self.steering is not None and view.time_s >= self._next_tick_s and self._steer(view)
        if self._submissions_only(view, steered):
            return Wait(until_s=self._pass_s)
        queue = self._queue(view)
        action = self._main(view, queue) if queue else None
        if action is None and queue and self.conf.backfill:
            action = self._backfill(view, queue)
        return action if action is not None else self._wake(view)

    def _wake(self, view: View) -> Action:
        """Wait for the next event, or until the next backfill cycle, multifactor recalculation or end of a requeue
        hold, whichever comes first."""
        now = view.time_s
        period = self.conf.sched_interval_s  # a held job becomes eligible unnoticed: the next periodic pass sees it
        times = [math.ceil(t / period) * period for t in self._held.values() if t > now]
        if self._pass_s > now:
            times.append(self._pass_s)
        if self.conf.multifactor and self._next_calc_s > now:
            times.append(self._next_calc_s)
        if self.conf.backfill and self._next_backfill_s > now:
            times.append(self._next_backfill_s)
        if self._next_tick_s > now and math.isfinite(self._next_tick_s):
            times.append(self._next_tick_s)
        return Wait(until_s=min(times)) if times else WAIT

    def _main(self, view: View, queue: list[Job]) -> Action | None:
        """The first job the main scheduler starts now (or a preemption for it), or None."""
        c = view.cluster
        free = view.gpu_free_milli.copy()
        cpu, ram = view.node_free_cpu_milli.copy(), view.node_free_ram_mib.copy()
        blocked_parts: set[str] = set()
        withheld = False
        for job in queue[: self.conf.default_queue_depth]:
            if job.partition in blocked_parts:
                continue
            state = ResourceState(view, free, cpu, ram, view.time_s, view.gpu_free_mem_mib, view.gpu_mig_used,
                                  dict(view.mig_slices)) if withheld else view
            gpus = self.rule(state, job)
            if gpus is not None:
                return Start(job.job_id, gpus)
            if self.conf.preempts and not withheld:
                victims = self._victims(view, job)
                if victims:
                    self._held[victims[0]] = view.time_s + self.conf.requeue_hold_s
                    return Preempt(victims[0])
            blocked_parts.add(job.partition)
            free[c.partition_nodes(job.partition)[c.gpu_node]] = 0
            withheld = True
            if not free.any():  # every node withheld: nothing else can start in this pass
                break
        return None

    def _victims(self, view: View, job: Job) -> list[int]:
        """Running jobs to requeue so that ``job`` fits (those of the QOS its QOS may preempt), lowest QOS priority
        first, then oldest job first; [] when even all of them would not make it fit."""
        qos = self.params.qos.get(job.qos)
        if qos is None or not qos.preempts:
            return []
        candidates = [r for r in view.running.values() if r.job.qos in qos.preempts and r.job.preemptible]
        candidates.sort(key=lambda r: (self.params.qos[r.job.qos].priority if r.job.qos in self.params.qos else 0,
                                       r.job.job_id))
        state = ResourceState.now(view)
        chosen: list[int] = []
        for run in candidates:
            state = state.with_released(run.job, run.gpus.index)
            chosen.append(run.job.job_id)
            if self.rule(state, job) is not None:
                return chosen
        return []

    def _backfill(self, view: View, queue: list[Job]) -> Action | None:
        """The next start of the backfill cycle due now (:func:`~baselines.slurm_backfill.backfill_cycle`), or None;
        a cycle's starts are handed out one call at a time at the same instant."""
        now, conf = view.time_s, self.conf
        if self._planned_at == now:
            while self._planned:
                job, gpus = self._planned.pop(0)
                if (job.job_id in view.pending and view.schedulable([job]) and self.rule(view, job) is not None
                        and still_free(view, job, gpus)):  # a start before it may have used the quota it needs
                    return Start(job.job_id, gpus)
            return None
        if now < self._next_backfill_s:
            return None
        self._planned = backfill_cycle(view, queue, self.rule, max_jobs=conf.bf_max_job_test,
                                       window_s=conf.bf_window_s, resolution_s=conf.bf_resolution_s,
                                       epoch_s=self.epoch_s)
        self._planned_at = now
        self._next_backfill_s = now + conf.bf_interval_s
        return self._backfill(view, queue)
