"""Preemptive priority (SPEC §6): Kubernetes' default preemption on top of any scheduler.

:class:`Preemptive` wraps a :class:`~baselines.backfill.Scheduler` (any order, backfilling mode and placement rule).
At each call it first asks the scheduler; whatever the scheduler does other than wait is done. When it would wait,
the top-ranked pending job (``scheduler.order.rank(view)[0]``), if the scheduler's placement rule cannot place it
now, may evict running jobs, chosen as kube-scheduler's DefaultPreemption plugin chooses them
(``selectVictimsOnNode`` and ``pickOneNodeForPreemption``, kubernetes/kubernetes
pkg/scheduler/framework/plugins/defaultpreemption and pkg/scheduler/framework/preemption/preemption.go):

- **Potential victims**: running jobs that are preemptible and whose priority is strictly lower than the
  preemptor's (never equal or higher).
- **Candidates** (one per node, for a job no larger than the largest node its GPU types allow): on each node where
  some potential victim holds GPUs, remove every potential victim holding GPUs there (a victim that spans nodes
  frees its GPUs on all of them). The node is a candidate when the placement rule then places the job on it alone:
  the rule is asked about a projected :class:`~envs.sim.profile.ResourceState` in which the GPUs of every other
  node have no free share. Then victims are *reprieved* greedily, most important first (priority descending, then
  earliest start, then job id: kube's MoreImportantPod): each is put back if the job still fits without it.
  The candidate's victims are those not reprieved. Extension for gangs: a job larger than every eligible node has
  one cluster-wide candidate, built by the same remove-all-then-reprieve procedure with no node masked.
- **Choice** among candidates, as ``pickOneNodeForPreemption`` does with no PodDisruptionBudgets: (1) the lowest
  priority of the most important victim; (2) the smallest sum of the victims' priorities, each offset by 2^31 as
  kube does, so that with priorities far below 2^31 in size a candidate with fewer victims has the smaller sum; (3) the
  fewest victims; (4) the latest start time of the earliest-started victim among the highest-priority ones (the most
  recently started); (5) the first candidate in node order. SPEC §6 phrases level (1) as "fewest victims of the
  highest priority"; this module implements kube's actual rule, the lowest highest-victim priority.

The chosen victims are preempted one per call (most important first), and the preemptor is started on the next
call, on the GPUs the rule picks then; while this plan is being carried out the scheduler is not asked, so no
other job takes the room being freed. The plan is kept for the current instant only and re-validated on every call
(the preemptor still pending, its remaining victims still running); when it no longer holds the scheduler is
asked again. No livelock: a job preempts only when the plan makes it fit and then starts at once, and only for
strictly lower priorities, so every plan replaces running jobs by one of strictly higher priority; a requeued victim
may in turn evict jobs of still lower priority at the same instant, and such a chain ends.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from baselines.backfill import Scheduler
from envs.core.job import Job
from envs.sim.policy import Action, Preempt, Start, Wait
from envs.sim.resources import ResourceState, add_node_holdings, node_state
from envs.sim.state import RunningJob
from envs.sim.view import View

PREEMPT_SUFFIX = "+preempt"
"""Suffix of a policy name that wraps the scheduler in :class:`Preemptive`."""

PREEMPT_DOC = ("preemptive priority (Kubernetes DefaultPreemption): a top-ranked job that cannot be placed evicts "
               "preemptible jobs of strictly lower priority, on the node kube-scheduler would pick")
"""One line for the policy catalogue."""

PRIORITY_OFFSET = 2**31
"""Added to every victim's priority in the sum of level (2), as kube-scheduler adds MaxInt32 + 1 [priority units]."""


@dataclass(frozen=True)
class Candidate:
    """A way to make room for a job: the node it would run on (None: anywhere, for a gang larger than any node)
    and the victims to preempt, most important first."""

    node: int | None
    victims: tuple[RunningJob, ...]

    def rank_key(self) -> tuple[int, int, int, float]:
        """pickOneNodeForPreemption's levels (1)-(4) as a key, lowest best. The first victim is the most important:
        the highest priority, and among those the earliest start."""
        top = self.victims[0]
        return (top.job.priority, sum(v.job.priority + PRIORITY_OFFSET for v in self.victims), len(self.victims),
                -top.start_time_s)


@dataclass
class _Plan:
    """Preemptions under way at one instant: for pending job ``job_id``, the victims still to preempt."""

    time_s: float
    job_id: int
    victims: list[int]


class Preemptive:
    """A scheduler whose top-ranked blocked job may evict lower-priority preemptible jobs (module docstring)."""

    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler
        self.name = scheduler.name + PREEMPT_SUFFIX
        self._plan: _Plan | None = None

    def reset(self) -> None:
        """Forget the scheduler's state and any plan."""
        self.scheduler.reset()
        self._plan = None

    def act(self, view: View) -> Action:
        """The next step of a plan under way; else the scheduler's action; else a preemption, or the scheduler's
        Wait when none would let the top-ranked job start."""
        step = self._continue(view)
        if step is not None:
            return step
        action = self.scheduler.act(view)
        if not isinstance(action, Wait) or not view.scheduler_up or not view.pending:
            return action
        queue = view.schedulable(self.scheduler.order.rank(view))
        if not queue:
            return action
        job = queue[0]
        if self.scheduler.rule(view, job) is not None:
            return action  # it fits, yet the scheduler holds it back (a reservation): not a reason to evict
        chosen = best_candidate(view, job, self.scheduler)
        if chosen is None:
            return action
        first, *rest = (v.job.job_id for v in chosen.victims)
        self._plan = _Plan(view.time_s, job.job_id, rest)
        return Preempt(first)

    def _continue(self, view: View) -> Action | None:
        """The plan's next action: a Preempt, then the preemptor's Start; None when there is no valid plan."""
        plan, self._plan = self._plan, None
        if (plan is None or plan.time_s != view.time_s or plan.job_id not in view.pending
                or any(v not in view.running for v in plan.victims)):
            return None
        if plan.victims:
            self._plan = plan
            return Preempt(plan.victims.pop(0))
        gpus = self.scheduler.rule(view, view.pending[plan.job_id])
        return None if gpus is None else Start(plan.job_id, gpus)

    def __repr__(self) -> str:
        return f"Preemptive({self.scheduler.name!r})"


def best_candidate(view: View, job: Job, scheduler: Scheduler) -> Candidate | None:
    """The candidate pickOneNodeForPreemption would choose for ``job``, or None when no preemption lets it fit."""
    candidates = list(candidates_for(view, job, scheduler))
    return min(candidates, key=Candidate.rank_key) if candidates else None  # min keeps the first of equal keys


def candidates_for(view: View, job: Job, scheduler: Scheduler) -> Iterable[Candidate]:
    """Every candidate for ``job`` (module docstring), in node order."""
    potential = sorted((r for r in view.running.values() if r.job.preemptible and r.job.priority < job.priority),
                       key=importance)
    if not potential:
        return
    c = view.cluster
    freed = ResourceState.now(view).with_all_released(potential)
    eligible = c.eligible_nodes(job.gpu_types, job.gpu_mem_gib, job.partition)
    if job.n_gpus > int(c.node_n_gpus[eligible].max(initial=0)):
        victims = _reprieve(view, job, scheduler, freed, potential, None)
        if victims:
            yield Candidate(None, victims)
        return
    holders: dict[int, list[RunningJob]] = {}
    for r in potential:  # in importance order, so each node's list is too
        for node in dict.fromkeys(c.gpu_node[r.gpus.index].tolist()):
            holders.setdefault(node, []).append(r)
    for node in sorted(holders):
        if c.node_n_gpus[node] >= job.n_gpus:
            victims = _reprieve(view, job, scheduler, freed, holders[node], node)
            if victims:
                yield Candidate(node, victims)


def importance(r: RunningJob) -> tuple[int, float, int]:
    """Sort key of kube's MoreImportantPod, most important first: priority descending, then earliest start, then
    job id (for determinism)."""
    return -r.job.priority, r.start_time_s, r.job.job_id


def _reprieve(view: View, job: Job, scheduler: Scheduler, freed: ResourceState, removed: list[RunningJob],
              node: int | None) -> tuple[RunningJob, ...]:
    """selectVictimsOnNode: the victims among ``removed`` (most important first) once every one that ``job`` fits
    without is put back; () when the job does not fit even with all of them gone. ``freed`` is the state with every
    potential victim gone; ``node`` (None: the whole cluster) is where the job must fit."""
    if scheduler.rule(_on_node(view, freed, node), job) is None:
        return ()
    if node is not None:
        return _reprieve_on_node(view, job, scheduler, freed, removed, node)
    state, victims = freed, []
    for r in removed:
        back = state.without(r.job, r.gpus.index)
        if scheduler.rule(back, job) is None:
            victims.append(r)
        else:
            state = back
    return tuple(victims)


def _reprieve_on_node(view: View, job: Job, scheduler: Scheduler, freed: ResourceState, removed: list[RunningJob],
                      node: int) -> tuple[RunningJob, ...]:
    """:func:`_reprieve` on one node, each trial built from what ``ResourceState.on_node`` reads of the state (the
    node's free shares, the free CPU and RAM per node) instead of a copy of the whole cluster's state: the same
    states, so the same answers."""
    c = view.cluster
    first, last = int(c.node_first_gpu[node]), int(c.node_first_gpu[node + 1])
    free, cpu, ram = freed.gpu_free_milli[first:last], freed.node_free_cpu_milli, freed.node_free_ram_mib
    victims = []
    for r in removed:
        gpus = np.asarray(r.gpus)
        back = free.copy()
        back[gpus[(gpus >= first) & (gpus < last)] - first] -= r.job.gpu_milli  # the state.without of its GPUs here
        back_cpu, back_ram = cpu, ram
        if r.job.cpu_milli_per_gpu or r.job.ram_mib_per_gpu:
            back_cpu, back_ram = cpu.copy(), ram.copy()
            add_node_holdings(c, r.job, c.gpu_node[gpus], back_cpu, back_ram, -1)
        if scheduler.rule(node_state(view, node, back, back_cpu, back_ram), job) is None:
            victims.append(r)
        else:
            free, cpu, ram = back, back_cpu, back_ram
    return tuple(victims)


def _on_node(view: View, state: ResourceState, node: int | None) -> ResourceState:
    """``state`` with only ``node``'s GPUs free (the others' free shares set to 0); ``state`` itself for None."""
    return state if node is None else state.on_node(node)
