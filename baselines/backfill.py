"""Schedulers composed of a priority order, a backfilling mode and a placement rule (SPEC §6).

- ``none``: the top-ranked job starts when its placement rule finds room; until then nothing else starts.
- ``easy``: the top-ranked job that does not fit gets a reservation at its earliest start, computed from the
  running jobs' requested wall times; a later job may start now only if it does not delay that reservation: it
  ends (by its requested time) no later than the reservation, or the top job still fits at the reservation time
  with the later job's GPUs taken.
- ``conservative``: every queued job gets a reservation, in order (jobs already holding one keep their place in
  the order of their reservations, newcomers follow in rank order); a job starts now only if its earliest start,
  after all reservations before it, is now. Reservations are recomputed at each decision and never move later
  while estimates are exact.

Requested wall times are the only durations used: the true runtime is never looked at.
"""

from __future__ import annotations

from typing import Protocol

from envs.job import Job
from envs.placement import PlacementRule
from envs.policy import WAIT, Action, Start
from envs.profile import AvailabilityProfile, easy_backfill
from envs.view import View

BACKFILL_DOCS = {
    "none": "no backfilling: a blocked top-ranked job blocks everyone",
    "easy": "EASY: reserve for the top-ranked job only; later jobs start now if they do not delay it",
    "conservative": "conservative: a reservation for every queued job in order; backfill delays none of them",
}
"""Backfilling modes and what they do."""


class Order(Protocol):
    """A priority order: the pending jobs, highest priority first."""

    name: str

    def reset(self) -> None: ...

    def rank(self, view: View) -> list[Job]: ...


class Scheduler:
    """A heuristic policy: an order, a backfilling mode and a placement rule."""

    def __init__(self, name: str, order: Order, backfill: str, rule: PlacementRule) -> None:
        if backfill not in BACKFILL_DOCS:
            raise ValueError(f"unknown backfilling mode {backfill!r}")
        self.name, self.order, self.backfill, self.rule = name, order, backfill, rule
        self.reservations: dict[int, float] = {}  # job id -> first reserved start [s] (kept for inspection)
        self._reserved: dict[int, tuple[float, int]] = {}  # conservative: job id -> (reserved start, sequence)
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
        queue = self.order.rank(view)
        if self.backfill == "conservative":
            return self._conservative(view, queue)
        head = queue[0]
        gpus = self.rule(view, head)
        if gpus is not None:
            return Start(head.job_id, gpus)
        if self.backfill == "none":
            return WAIT
        return self._easy(view, head, queue[1:])

    def _easy(self, view: View, head: Job, rest: list[Job]) -> Action:
        shadow_s, job, gpus = easy_backfill(view, head, rest, self.rule)
        if shadow_s is not None:
            self.reservations.setdefault(head.job_id, shadow_s)
        return WAIT if job is None else Start(job.job_id, gpus)

    def _conservative(self, view: View, queue: list[Job]) -> Action:
        reserved = sorted((j for j in queue if j.job_id in self._reserved),
                          key=lambda j: self._reserved[j.job_id])
        ordered = reserved + [j for j in queue if j.job_id not in self._reserved]
        profile = AvailabilityProfile(view)
        now = view.time_s
        for job in ordered:
            found = profile.earliest_start(job, self.rule, job.runtime_estimate_s)
            if found is None:
                continue
            start_s, gpus, _ = found
            if start_s == now:
                self._reserved.pop(job.job_id, None)
                return Start(job.job_id, gpus)
            if job.job_id not in self._reserved:
                self._reserved[job.job_id] = (start_s, self._sequence)
                self._sequence += 1
            else:
                self._reserved[job.job_id] = (start_s, self._reserved[job.job_id][1])
            self.reservations.setdefault(job.job_id, start_s)
            profile.reserve(job, gpus, start_s, job.runtime_estimate_s)
        return WAIT
