"""Tiresias's discretized two-dimensional LAS (Gu et al., NSDI'19) and YARN-CS, the baseline the paper beats.

``tiresias`` knows nothing of job durations. A job's *attained service* is its GPU share × the time it has held
GPUs [GPU-seconds] (:meth:`~envs.sim.view.View.attained_gpu_s`; restart overheads count, they hold GPUs too),
measured from the last time the job entered the top queue. The rule as implemented, after the paper (§3.2) and its
simulator (SymbioticLab/Tiresias: ``simulator/run_sim.py`` ``dlas_sim_jobs`` with ``gputime=True``, i.e. the
``dlas-gpu`` schedule, and ``simulator/jobs.py``):

- Queues: K = len(thresholds) + 1. A job enters queue 0 on arrival and is in queue i while its attained service is
  below ``thresholds_gpu_s[i]``; it moves down at the instant it crosses one. Default (3250, 7200) GPU-seconds,
  three queues: the reference's ``num_queue = 3``, ``queue_limit = [3250, 7200, 18000]`` (its third limit is
  never read with three queues).
- Order: higher queues first. Within a queue, running jobs before pending ones (so a job never preempts one of its
  own queue), then FIFO by the time the job entered the queue (arrival: its submit time; demotion: the instant it
  crossed the threshold; promotion: the instant it was promoted), then submit time and job id. The reference
  appends a job to a queue's tail whenever it enters it and moves pending jobs behind running ones every round.
- Starts are fit-first: a pending job that does not fit is skipped and later ones may start (the reference's
  "in each queue, jobs are scheduled in fit-first with FIFO").
- Preemption: a pending job that does not fit may preempt running jobs of strictly lower queues. Victims are
  chosen by releasing every candidate, placing the job, then holding candidates back again from the most important
  down while the job still fits: every victim is needed, and the least important ones go first. Only jobs marked
  ``preemptible`` are candidates, since the simulator refuses the others (the paper treats every training job as
  preemptible; mark a workload's jobs so to reproduce it). A preempted job is not restarted at the same instant,
  and it pays the restart overhead and its checkpoint rollback when it starts again.
- Starvation guard: a pending job below the top queue whose time spent waiting since its first start after it last
  entered the top queue reaches ``starve_factor`` × its executed time over the same span is promoted to the top
  queue, its attained service counted afresh (the reference's ``solve_starvation`` test
  ``last_pending_time >= executed_time * solve_starvation``, both reset by a promotion). It is promoted at
  first start + (1 + starve_factor) × executed time. Default 2, the ``dlas-gpu-2`` schedule of the reference's
  sweep (0.5 to 1000); its plain ``dlas-gpu`` runs without the guard (``math.inf`` here).
- Progress guard (not in Tiresias, whose preempted jobs resume where they stopped): here a preempted job pays the
  restart overhead and loses its work since its last checkpoint, and promotions can then livelock (three 8-GPU
  jobs with a 500 GPU-s threshold promote and preempt one another every 62.5 s, each run too short to get past its
  60 s restart and a checkpoint). So a running job preempted p times before may be preempted again only once its
  current run has lasted ``min_run_s`` × 2^p (default 60 s, the restart overhead of
  :class:`~envs.core.dynamics.DynamicsConfig`): a job's protected runs double until one is long enough to finish
  it, so every job is preempted finitely often and every run ends. The policy wakes up when such a protection
  ends if a job of a higher queue is waiting.

Each decision point makes one plan: preempt the victims, start jobs in order on a projected state (the placement
rule sees the room that the preemptions and earlier starts leave), then wait. The policy asks to be woken
(``Wait(until_s)``) when a running job will cross its next threshold, a waiting one reach its starvation limit or
a protection end, since no other event marks those instants.

``yarn-cs`` is the information-agnostic baseline of every comparison in the paper's evaluation (an Apache YARN
capacity scheduler as used in production): one FIFO queue by submit time, a head that does not fit blocks everyone,
no preemption. It is the reference's ``fifo`` schedule (``one_queue_fifo_sim_jobs``), and so the same schedule as
this project's ``fifo``; it is here so that the paper's pair can be run under its own names.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from envs.core.errors import ConfigError
from envs.core.job import Job
from envs.placement import first_fit, get_placement_rule
from envs.sim.policy import WAIT, Action, Policy, Preempt, Start, Wait
from envs.sim.resources import ResourceState
from envs.sim.state import RunningJob
from envs.sim.view import PlacementRule, View

DEFAULT_THRESHOLDS_GPU_S = (3250.0, 7200.0)
"""Attained service at which a job leaves queue 0 and queue 1 [GPU-seconds] (the reference's ``jobs.py``)."""

DEFAULT_STARVE_FACTOR = 2.0
"""Waiting time, as a multiple of the executed time, after which a job is promoted [dimensionless] (``dlas-gpu-2``)."""

DEFAULT_MIN_RUN_S = 60.0
"""Shortest run after which a job never preempted before may be preempted [s]; doubled by each preemption."""

TIRESIAS_DOCS: dict[str, str] = {
    "tiresias": "Tiresias discretized 2D-LAS: queues by attained GPU-seconds (3250, 7200), FIFO within a queue, "
                "higher queues preempt lower ones, starvation guard at 2 x executed time, a job preempted p times "
                "runs 60 s x 2^p before it can be preempted again",
    "yarn-cs": "YARN-CS, the Tiresias paper's production baseline: one FIFO queue, a blocked head blocks everyone, "
               "no preemption (the same schedule as fifo)",
}
"""The Tiresias policies by name, one line each."""


@dataclass(slots=True)
class _Standing:
    """Where one job in the system stands: its queue, since when, and where its attained service counts from."""

    level: int  # queue index, 0 = top
    entry_s: float  # when it entered that queue [s]
    base_executed_s: float = 0.0  # its executed time when it last entered the top queue [s]
    first_run_s: float | None = None  # its first start since then [s]; None until it starts


class Tiresias:
    """Discretized 2D-LAS (see the module docstring); ``blocking`` makes a pending job that does not fit block
    every later one instead of being skipped (YARN-CS)."""

    def __init__(self, rule: PlacementRule = first_fit,
                 thresholds_gpu_s: Sequence[float] = DEFAULT_THRESHOLDS_GPU_S,
                 starve_factor: float = DEFAULT_STARVE_FACTOR, min_run_s: float = DEFAULT_MIN_RUN_S,
                 blocking: bool = False, name: str = "tiresias") -> None:
        self.thresholds_gpu_s = _thresholds(thresholds_gpu_s, name)
        if not starve_factor > 0:
            raise ConfigError(f"{name}: starve_factor: must be > 0 (math.inf: no promotion), got {starve_factor}")
        if not (math.isfinite(min_run_s) and min_run_s >= 0):
            raise ConfigError(f"{name}: min_run_s: must be finite and >= 0, got {min_run_s}")
        self.name, self.rule, self.blocking = name, rule, blocking
        self.starve_factor, self.min_run_s = float(starve_factor), float(min_run_s)
        self._standing: dict[int, _Standing] = {}
        self._plan: deque[Action] = deque()

    def reset(self) -> None:
        """Forget every job's standing and any plan in progress."""
        self._standing.clear()
        self._plan.clear()

    def act(self, view: View) -> Action:
        """The next action of this decision point's plan (preemptions, then starts, then a wake-up call)."""
        if not self._plan:
            if not view.scheduler_up or not view.pending:
                return WAIT
            self._plan.extend(self._decide(view))
        return self._plan.popleft()

    # ---- standing of the jobs --------------------------------------------------------------------------------
    def _observe(self, view: View) -> None:
        """Bring every job's standing up to now: new arrivals, demotions, then promotions."""
        active = [*view.pending.values(), *(r.job for r in view.running.values())]
        self._standing = {job.job_id: self._standing.get(job.job_id) or _new_standing(view, job) for job in active}
        for job in active:
            self._demote(view, job, self._standing[job.job_id])
        for job in view.pending.values():
            standing = self._standing[job.job_id]
            promote_s = self._promotion_s(view, job, standing)
            if view.time_s >= promote_s:
                standing.level, standing.entry_s = 0, promote_s
                standing.base_executed_s, standing.first_run_s = view.executed_s(job.job_id), None

    def _demote(self, view: View, job: Job, standing: _Standing) -> None:
        """Move ``job`` down past every threshold it crossed in its current (or last) run."""
        run = _last_run(view, job)
        if run is None:
            return
        start_s, held_before_s, end_s = run
        while standing.level < len(self.thresholds_gpu_s):
            crossing_s = self._crossing_s(job, standing, start_s, held_before_s)
            if crossing_s > end_s:
                return
            standing.level, standing.entry_s = standing.level + 1, crossing_s

    def _crossing_s(self, job: Job, standing: _Standing, start_s: float, held_before_s: float) -> float:
        """When ``job``, in a run from ``start_s`` after holding GPUs ``held_before_s`` seconds before it, reaches
        the threshold of its queue [s]."""
        return start_s + self.thresholds_gpu_s[standing.level] / job.gpu_share + standing.base_executed_s \
            - held_before_s

    def _promotion_s(self, view: View, job: Job, standing: _Standing) -> float:
        """When the waiting ``job`` reaches its starvation limit [s] (inf: never, or not applicable)."""
        if standing.level == 0 or standing.first_run_s is None:
            return math.inf
        executed_s = view.executed_s(job.job_id) - standing.base_executed_s
        return standing.first_run_s + (1 + self.starve_factor) * executed_s

    def _key(self, view: View, job: Job) -> tuple[int, bool, float, float, int]:
        """Priority order: queue, running before pending, time it entered the queue, submit time, job id."""
        standing = self._standing[job.job_id]
        return standing.level, job.job_id not in view.running, standing.entry_s, job.submit_time_s, job.job_id

    # ---- the plan of one decision point ----------------------------------------------------------------------
    def _decide(self, view: View) -> list[Action]:
        """Victims to preempt, jobs to start (in priority order) and the wake-up call, for now."""
        self._observe(view)
        order = sorted([*view.pending.values(), *(r.job for r in view.running.values())],
                       key=lambda job: self._key(view, job))
        running = [view.running[job.job_id] for job in order if job.job_id in view.running]
        state = ResourceState.now(view)
        victims: list[RunningJob] = []
        starts: list[tuple[Job, np.ndarray]] = []
        quotas = view.has_quotas
        for job in order:
            if job.job_id in view.running or (quotas and not view.admits(job)):
                continue  # a job a quota refuses is set aside, as Slurm sets aside jobs held by a limit
            gpus = self.rule(state, job)
            if gpus is None:
                room = self._make_room(view, state, job, self._candidates(view, job, running, victims))
                if room is None:
                    if self.blocking:
                        break
                    continue
                state, gpus, freed = room
                victims.extend(freed)
            starts.append((job, gpus))
            if quotas:
                break  # one start per plan: the next plan sees the quota it took
            state = state.without(job, gpus)
        for job, _ in starts:
            standing = self._standing[job.job_id]
            if standing.first_run_s is None:
                standing.first_run_s = view.time_s
        actions: list[Action] = [*(Preempt(r.job.job_id) for r in victims),
                                 *(Start(job.job_id, gpus) for job, gpus in starts)]
        if quotas and starts:
            return actions  # no wake-up call yet: the next plan is made at this same instant
        return [*actions, self._wake_up(view, [job for job, _ in starts], victims)]

    def _candidates(self, view: View, job: Job, running: list[RunningJob], victims: list[RunningJob]
                    ) -> list[RunningJob]:
        """The running jobs ``job`` may preempt, least important first: preemptible, of a lower queue, past their
        protection, not yet chosen."""
        level = self._standing[job.job_id].level
        chosen = {r.job.job_id for r in victims}
        return [r for r in reversed(running) if r.job.preemptible and r.job.job_id not in chosen
                and self._standing[r.job.job_id].level > level
                and view.time_s >= self._protected_until_s(view, r.job, r.start_time_s)]

    def _protected_until_s(self, view: View, job: Job, start_s: float) -> float:
        """The end of the protection of ``job``'s run from ``start_s``: ``min_run_s`` doubled for each preemption
        it has suffered [s]."""
        if not self.min_run_s:
            return start_s  # no guard (and no 2 ** preemptions to overflow)
        history = view.history.get(job.job_id)
        return start_s + self.min_run_s * 2.0 ** (history.preemptions if history else 0)

    def _make_room(self, view: View, state: ResourceState, job: Job, candidates: list[RunningJob]
                   ) -> tuple[ResourceState, np.ndarray, list[RunningJob]] | None:
        """(state with the victims released, GPUs for ``job``, victims), or None if preempting every candidate
        would not make ``job`` fit."""
        if not candidates or (not job.is_fractional and
                              state.free_gpus + sum(len(r.gpus) for r in candidates) < job.n_gpus):
            return None
        released = state.with_all_released(candidates)
        gpus = self.rule(released, job)
        if gpus is None:
            return None
        victims = []
        for r in reversed(candidates):  # the most important first: it keeps running if the job fits without it
            held = released.without(r.job, r.gpus.index)
            placed = self.rule(held, job)
            if placed is None:
                victims.append(r)
            else:
                released, gpus = held, placed
        return released, gpus, victims

    def _wake_up(self, view: View, started: list[Job], victims: list[RunningJob]) -> Wait:
        """A wake-up call at the next threshold crossing of a job running after this plan, the next starvation
        limit of one waiting after it, or the end of a protection that a waiting job of a higher queue waits for;
        plain WAIT if there is none."""
        now = view.time_s
        started_ids = {job.job_id for job in started}
        waiting = [job for job in view.pending.values() if job.job_id not in started_ids] + [r.job for r in victims]
        times = [self._promotion_s(view, job, self._standing[job.job_id]) for job in waiting]
        top_waiting = min((self._standing[job.job_id].level for job in waiting), default=math.inf)
        preempted = {r.job.job_id for r in victims}
        runs = [(r.job, r.start_time_s) for r in view.running.values() if r.job.job_id not in preempted]
        for job, start_s in [*runs, *((job, now) for job in started)]:
            standing = self._standing[job.job_id]
            if standing.level < len(self.thresholds_gpu_s):
                times.append(self._crossing_s(job, standing, start_s, _held_s(view, job)))
            if job.preemptible and standing.level > top_waiting:
                times.append(self._protected_until_s(view, job, start_s))
        until_s = min((t for t in times if t > now), default=math.inf)
        return Wait(until_s) if until_s < math.inf else WAIT


class YarnCs(Tiresias):
    """YARN-CS (see the module docstring): FIFO by submit time, a blocked head blocks everyone, no preemption."""

    def __init__(self, rule: PlacementRule = first_fit, name: str = "yarn-cs") -> None:
        super().__init__(rule, thresholds_gpu_s=(), starve_factor=math.inf, blocking=True, name=name)


def tiresias_policy(name: str, rule: str) -> Policy:
    """The policy ``name`` (a key of :data:`TIRESIAS_DOCS`) placing jobs with the placement rule called ``rule``;
    it is named ``NAME[/RULE]``, the rule left out when it is ``firstfit``. Raises :class:`ConfigError` naming the
    known names (and rules)."""
    key, rule = name.strip().lower(), rule.strip().lower()
    if key not in TIRESIAS_DOCS:
        raise ConfigError(f"policy {name!r}: unknown (known: {', '.join(TIRESIAS_DOCS)})")
    placement = get_placement_rule(rule)
    canonical = key + ("" if rule == "firstfit" else f"/{rule}")
    return YarnCs(placement, name=canonical) if key == "yarn-cs" else Tiresias(placement, name=canonical)


def _thresholds(values: Sequence[float], name: str) -> tuple[float, ...]:
    """``values`` as queue thresholds [GPU-seconds]: finite, > 0 and strictly increasing, else ConfigError."""
    thresholds = tuple(float(v) for v in values)
    if any(not (math.isfinite(t) and t > 0) for t in thresholds) or list(thresholds) != sorted(set(thresholds)):
        raise ConfigError(f"{name}: thresholds_gpu_s: must be finite, > 0 and strictly increasing, got {values}")
    return thresholds


def _new_standing(view: View, job: Job) -> _Standing:
    """The standing of a job first seen now: queue 0 since its submission."""
    history, running = view.history.get(job.job_id), view.running.get(job.job_id)
    first_run_s = history.first_start_s if history else running.start_time_s if running else None
    return _Standing(level=0, entry_s=job.submit_time_s, first_run_s=first_run_s)


def _held_s(view: View, job: Job) -> float:
    """Time ``job`` held GPUs in its ended runs [s]."""
    history = view.history.get(job.job_id)
    return history.held_s if history else 0.0


def _last_run(view: View, job: Job) -> tuple[float, float, float] | None:
    """(start [s], time held before it [s], end [s]) of ``job``'s current run (ending now) or, if it is waiting,
    of its last one; None if it never ran."""
    running = view.running.get(job.job_id)
    if running is not None:
        return running.start_time_s, _held_s(view, job), view.time_s
    history = view.history.get(job.job_id)
    if history is None:
        return None
    return history.last_end_s - history.last_run_s, history.held_s - history.last_run_s, history.last_end_s
