"""Forking a running simulation: an independent copy of a run at its current instant, with the true future kept
(a hindsight bound) or replaced by a :class:`Future` (what a planner may assume without knowing it).

A fork copies every mutable book of the simulator (the state, the completion and event heaps, the holdings, the
quota ledger, the time integrals) and shares what never changes (the cluster, the runtime model, the job records
and the job objects), so it costs a few milliseconds and leaves the original run bit-identical whatever the fork
does. A :class:`Future` replaces the two things a real scheduler cannot know at a decision point:

- the jobs that have not arrived yet (``arrivals``): the fork's later arrivals are these jobs, nothing else;
- the true base runtimes of the jobs pending or running now (``runtimes_s``): the fork runs each job for the
  runtime given (a running job's end is recomputed from its start, speed, topology factor, staging, restart and
  mode-switch overheads, and its time limit when ``kill_at_walltime``; never before now).

What a fork keeps from the run: the failure and outage timeline already drawn (dynamics scenarios; the learning
suite runs without them) and the checkpoints of interrupted jobs.
"""

from __future__ import annotations

import copy
import dataclasses
import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from envs.core.cluster import ClusterSpec
from envs.core.dynamics import DynamicsConfig
from envs.core.errors import ConfigError
from envs.core.job import Job
from envs.core.runtime import RuntimeConfig
from envs.sim.state import SimState


@dataclass(frozen=True)
class Future:
    """A stand-in for a run's unknown future, put into a fork in place of the true one."""

    arrivals: Sequence[Job] | None = ()  # the jobs that arrive after now: submit times >= now [s], distinct ids
    # not among the jobs arrived so far (the run's own later jobs are dropped, so their ids may be reused); None
    # keeps the run's true arrivals (for diagnostic bounds that know them)
    runtimes_s: Mapping[int, float] = field(default_factory=dict)  # job id -> base runtime [s] of known jobs


F = TypeVar("F", bound="Forking")


class Forking:
    """The simulator's :meth:`fork` (module docstring); the :class:`~envs.sim.simulator.Simulator` inherits it."""

    # the simulator's books a fork copies or replaces (set by Simulator.__init__ and reset)
    cluster: ClusterSpec
    runtime: RuntimeConfig
    dynamics: DynamicsConfig
    state: SimState
    _jobs: tuple[Job, ...]
    _job_ids: set[int]
    _reject_cache: dict[tuple, object]
    _heap: list[tuple[float, int, int]]
    _run_info: dict[int, tuple]

    def fork(self: F, future: Future | None = None) -> F:
        """An independent copy of this run at its current instant; ``future`` None keeps the true future (for
        hindsight bounds only), a :class:`Future` replaces it. Raises :class:`ConfigError` for an arrival before
        now, an arrival id the run already has, or a runtime for a job that is neither pending nor running."""
        shared = {id(x): x for x in (self.cluster, self.runtime, self.dynamics, self._jobs, self._job_ids,
                                     self._reject_cache)}
        shared.update((id(r), r) for r in self.state.records)
        shared.update((id(j), j) for j in self._jobs)
        copy_ = copy.deepcopy(self, shared)
        if future is not None:
            if future.arrivals is not None:
                copy_._replace_arrivals(future.arrivals)
            copy_._replace_runtimes(future.runtimes_s)
        return copy_

    def _replace_arrivals(self, arrivals: Sequence[Job]) -> None:
        s = self.state
        arrived = self._jobs[:s.next_arrival]
        known = {j.job_id for j in arrived}
        later = tuple(sorted(arrivals, key=lambda j: (j.submit_time_s, j.job_id)))
        for job in later:
            if job.submit_time_s < s.time_s:
                raise ConfigError(f"fork at t={s.time_s:g}s: arrival of job {job.job_id} at {job.submit_time_s:g}s "
                                  "is in the past")
            if job.job_id in known:
                raise ConfigError(f"fork at t={s.time_s:g}s: arrival id {job.job_id} is repeated or already a job of "
                                  "the run")
            known.add(job.job_id)
        self._jobs = arrived + later
        self._job_ids = known
        s.n_jobs = len(self._jobs)

    def _replace_runtimes(self, runtimes_s: Mapping[int, float]) -> None:
        s = self.state
        changed_ends = False
        for job_id, runtime_s in runtimes_s.items():
            if job_id in s.pending:
                s.pending[job_id] = dataclasses.replace(s.pending[job_id], runtime_s=float(runtime_s))
            elif job_id in s.running:
                self._rerun(job_id, float(runtime_s))
                changed_ends = True
            else:
                raise ConfigError(f"fork at t={s.time_s:g}s: a runtime for job {job_id}, which is neither pending "
                                  "nor running")
        if changed_ends:
            heapq.heapify(self._heap)

    def _rerun(self, job_id: int, runtime_s: float) -> None:
        """Give running job ``job_id`` the base runtime ``runtime_s`` [s]: its end is recomputed as the simulator's
        ``_allocate`` computes it, but not before now."""
        s = self.state
        running = s.running[job_id]
        alloc, nodes, counts, speed, level, factor, staging_s, _, overhead_s, end, reconfig_s = self._run_info[job_id]
        job = dataclasses.replace(running.job, runtime_s=runtime_s)
        history = s.history.get(job_id)
        done_work_s = history.done_work_s if history is not None else 0.0
        run_s = overhead_s + max(runtime_s - done_work_s, 0.0) / speed * factor + staging_s + reconfig_s
        timed_out = self.runtime.kill_at_walltime and run_s > job.runtime_estimate_s
        if timed_out:
            run_s = job.runtime_estimate_s
        new_end = (max(running.start_time_s + run_s, s.time_s), end[1], job_id)
        s.running[job_id] = running._replace(job=job)
        self._run_info[job_id] = (alloc, nodes, counts, speed, level, factor, staging_s, timed_out, overhead_s,
                                  new_end, reconfig_s)
        self._heap[self._heap.index(end)] = new_end
