"""Schedulers composed of a priority order, a backfilling mode and a placement rule (SPEC §6).

- ``none``: the top-ranked job starts when its placement rule finds room; until then nothing else starts.
- ``easy``: the top-ranked job that does not fit gets a reservation at its earliest start, computed from the
  running jobs' requested wall times; a later job may start now only if it does not delay that reservation: it
  ends (by its requested time) no later than the reservation, or the top job still fits at the reservation time
  with the later job's GPUs taken.
- ``greedy``: no reservation at all: the highest-ranked job that fits now starts (list scheduling, also called
  aggressive backfilling without guarantees); a job that never fits while smaller ones keep arriving can starve.
- ``conservative``: every queued job gets a reservation (a start time and GPUs), made once when it is first
  seen (newcomers in rank order) and kept while it stays valid; a job starts now only if it fits now around every
  other job's reservation. So no reservation is ever delayed while estimates are exact; a reservation whose time
  has passed without the job starting (a job ran past its estimate) is made anew.

Requested wall times are the only durations used: the true runtime is never looked at.
"""

from __future__ import annotations

import numpy as np

from baselines.orders import Fcfs, Order
from baselines.shapes import ShapeMemo
from envs.core.job import Job
from envs.sim.policy import WAIT, Action, Start
from envs.sim.profile import AvailabilityProfile, easy_backfill
from envs.sim.view import PlacementRule, View

BACKFILL_DOCS = {
    "none": "no backfilling: a blocked top-ranked job blocks everyone",
    "easy": "EASY: reserve for the top-ranked job only; later jobs start now if they do not delay it",
    "conservative": "conservative: a reservation for every queued job in order; backfill delays none of them",
    "greedy": "no reservation (list scheduling): every job that fits now starts, in rank order; large jobs may starve",
}
"""Backfilling modes and what they do."""


class Scheduler:
    """A heuristic policy: an order, a backfilling mode and a placement rule."""

    def __init__(self, name: str, order: Order, backfill: str, rule: PlacementRule) -> None:
        if backfill not in BACKFILL_DOCS:
            raise ValueError(f"unknown backfilling mode {backfill!r}")
        self.name, self.order, self.backfill, self.rule = name, order, backfill, rule
        self.reservations: dict[int, float] = {}  # job id -> first reserved start [s] (kept for inspection)
        self._reserved: dict[int, tuple[float, int, np.ndarray]] = {}  # conservative: id -> (start, order, GPUs)
        self._sequence = 0

    def reset(self) -> None:
        """Forget reservations and the order's state."""
        self.order.reset()
        self.reservations.clear()
        self._reserved.clear()
        self._sequence = 0

    def act(self, view: View) -> Action:
        """The next job to start now, or Wait."""
        if not view.scheduler_up or not view.pending:
            return WAIT
        if self.backfill == "none":  # only the head matters; FCFS reads it off the queue without copying it
            head = view.first_schedulable(view.pending.values() if isinstance(self.order, Fcfs)
                                          else self.order.rank(view))
            gpus = None if head is None else ShapeMemo.of_view(self.rule, view).place(head)
            return WAIT if gpus is None else Start(head.job_id, gpus)
        queue = view.schedulable(self.order.rank(view))
        if not queue:
            return WAIT
        if self.backfill == "conservative":
            return self._conservative(view, queue)
        placed = ShapeMemo.of_view(self.rule, view)  # jobs of one shape: one answer until the holdings change
        if self.backfill == "greedy":
            return next((Start(job.job_id, gpus) for job in queue if (gpus := placed.place(job)) is not None), WAIT)
        head = queue[0]
        gpus = placed.place(head)
        if gpus is not None:
            return Start(head.job_id, gpus)
        return self._easy(view, head, queue[1:], placed)

    def _easy(self, view: View, head: Job, rest: list[Job], rule: ShapeMemo) -> Action:
        shadow_s, job, gpus = easy_backfill(view, head, rest, rule)
        if shadow_s is not None:
            self.reservations.setdefault(head.job_id, shadow_s)
        return WAIT if job is None else Start(job.job_id, gpus)

    def _conservative(self, view: View, queue: list[Job]) -> Action:
        """Every queued job holds a reservation (start, GPUs) made once, in order, and kept while it stays valid;
        a job starts now when it fits now around every other reservation."""
        now = view.time_s
        profile = AvailabilityProfile(view)
        queued = {job.job_id for job in queue}
        for job_id in [j for j in self._reserved if j not in queued]:  # started or gone
            del self._reserved[job_id]
        reserved = sorted((j for j in queue if j.job_id in self._reserved), key=lambda j: self._reserved[j.job_id][1])
        for job in reserved:  # hold every existing reservation first: none of them may be delayed
            start_s, _, gpus = self._reserved[job.job_id]
            if start_s >= now:
                profile.reserve(job, gpus, start_s, job.runtime_estimate_s)
        for job in reserved + [j for j in queue if j.job_id not in self._reserved]:
            held = self._reserved.get(job.job_id)
            estimate_s = job.runtime_estimate_s
            if held is not None and held[0] >= now:
                profile.reserve(job, held[2], held[0], estimate_s, sign=-1)  # free its own hold
                gpus = profile.fits_at(now, job, self.rule, estimate_s)
                if gpus is not None:
                    self._reserved.pop(job.job_id)
                    return Start(job.job_id, gpus)
                # not startable now: it keeps the reservation it had if it fits anywhere (where it held is a
                # breakpoint; the full search only when it does not fit there)
                if (profile.fits_at(held[0], job, self.rule, estimate_s) is None
                        and profile.earliest_start(job, self.rule, estimate_s) is None):
                    continue
                profile.reserve(job, held[2], held[0], estimate_s)
                continue
            found = profile.earliest_start(job, self.rule, estimate_s)
            if found is None:
                continue
            start_s, gpus, _ = found
            if start_s == now:
                self._reserved.pop(job.job_id, None)
                return Start(job.job_id, gpus)
            sequence = held[1] if held is not None else self._next_sequence()
            self._reserved[job.job_id] = (start_s, sequence, gpus)
            self.reservations.setdefault(job.job_id, start_s)
            profile.reserve(job, gpus, start_s, job.runtime_estimate_s)
        return WAIT

    def _next_sequence(self) -> int:
        self._sequence += 1
        return self._sequence
