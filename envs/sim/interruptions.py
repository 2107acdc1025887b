"""How runs end early: failures and repairs of nodes and GPUs, scheduler outages, preemption, and the reclaim of
borrowed quota (SPEC §3 Lifecycle and Events). The :class:`~envs.sim.simulator.Simulator` inherits these methods;
they share its books (the event and completion heaps, the run records, the holdings).

An interrupted job keeps the work of its last checkpoint, goes back to its place in the queue and pays the restart
overhead when it starts again; interrupted by failures more often than the retry limit, it ends FAILED. A failed GPU
has no free share until it is repaired; while the scheduler is down no decision point happens.
"""

from __future__ import annotations

import heapq

import numpy as np

from envs.core.cluster import ClusterSpec
from envs.core.dynamics import DynamicsConfig
from envs.core.job import Job, JobState
from envs.core.joblog import JobRecord
from envs.sim.dynamics import FAIL, OUTAGE_END, OUTAGE_START, REPAIR, Event, Timeline
from envs.sim.holdings import Holdings
from envs.sim.quota import QuotaLedger
from envs.sim.state import JobHistory, SimState


class Interruptions:
    """The simulator's handling of dynamics events, preemptions and reclaims (module docstring)."""

    # the simulator's books these methods read and write (set by Simulator.reset); they call its _hold and _queue
    cluster: ClusterSpec
    dynamics: DynamicsConfig
    state: SimState
    _events: list[tuple[float, int, int, Event]]
    _event_seq: int
    _timeline: Timeline | None
    _down_count: np.ndarray
    _node_down: np.ndarray
    _outage_depth: int
    _outage_jobs: set[int]
    _quota: QuotaLedger | None
    _holdings: Holdings
    _heap: list[tuple[float, int, int]]
    _run_info: dict[int, tuple]
    _reconfig_paid_s: dict[int, float]

    def _push_event(self, event: Event) -> None:
        heapq.heappush(self._events, (event.time_s, event.kind, self._event_seq, event))
        self._event_seq += 1

    def _apply(self, event: Event) -> None:
        """Apply one dynamics event (at the current time) and schedule its process's next one."""
        kind = event.kind
        if kind in (FAIL, REPAIR):
            c, s = self.cluster, self.state
            if event.gpu >= 0:
                gpus = np.array([event.gpu])
            else:
                node = event.node
                gpus = np.arange(c.node_first_gpu[node], c.node_first_gpu[node + 1])
                self._node_down[node] += 1 if kind == FAIL else -1
                s.node_up[node] = self._node_down[node] == 0
                s.all_nodes_up = bool(s.node_up.all())
            if kind == FAIL:
                self._gpus_down(gpus)
            else:
                self._gpus_up(gpus)
        elif kind == OUTAGE_START:
            self._outage_depth += 1
            if self.state.scheduler_up:
                self.state.scheduler_up = False
                self._outage_jobs.update(self.state.pending)
        elif kind == OUTAGE_END:
            self._outage_depth -= 1
            self.state.scheduler_up = self._outage_depth == 0
        if self._timeline is not None:
            follow = self._timeline.follow(event)
            if follow is not None:
                self._push_event(follow)

    def _reclaim(self) -> None:
        """Preempt the jobs that borrow quota a lender's pending job needs back (:mod:`envs.sim.quota`)."""
        quota, s = self._quota, self.state
        quota.forget_reservations(s.pending)
        for _, victim in quota.reclaim_victims(s.pending.values(), s.running):
            job = s.running[victim].job
            before = s.history[victim].lost_preemption_gpu_s if victim in s.history else 0.0
            self._interrupt(victim, preempted=True)
            quota.note_reclaim(job, s.history[victim].lost_preemption_gpu_s - before)

    def _gpus_down(self, gpus: np.ndarray) -> None:
        """One more reason for each of ``gpus`` to be down; interrupt the jobs on those that just failed."""
        counts = self._down_count
        newly = gpus[counts[gpus] == 0]
        counts[gpus] += 1
        if newly.size == 0:
            return
        s = self.state
        hit = np.zeros(self.cluster.n_gpus, dtype=bool)
        hit[newly] = True
        for job_id in [j for j, r in s.running.items() if hit[r.gpus.index].any()]:
            self._interrupt(job_id, preempted=False)
        self._holdings.set_capacity(newly, up=False)

    def _gpus_up(self, gpus: np.ndarray) -> None:
        """One reason less for each of ``gpus`` to be down; those with none left are back in the pool."""
        counts = self._down_count
        counts[gpus] -= 1
        self._holdings.set_capacity(gpus[counts[gpus] == 0], up=True)

    def _interrupt(self, job_id: int, preempted: bool) -> None:
        """End the current run of ``job_id`` now: roll its progress back to the last checkpoint, then requeue it,
        or end it FAILED past the retry limit."""
        s = self.state
        running = s.running.pop(job_id)
        job = running.job
        alloc, nodes, counts, speed, level, factor, staging_s, _, overhead_s, end, reconfig_s = \
            self._run_info.pop(job_id)
        self._heap.remove(end)
        heapq.heapify(self._heap)
        self._hold(job, alloc, nodes, counts, +1)
        now = s.time_s
        history = s.history.get(job_id)
        if history is None:
            history = s.history[job_id] = JobHistory(first_start_s=running.start_time_s)
        elapsed = now - running.start_time_s
        paid = min(elapsed, overhead_s)
        if reconfig_s:
            self._reconfig_paid_s[job_id] = (self._reconfig_paid_s.get(job_id, 0.0)
                                             + min(max(elapsed - overhead_s, 0.0), reconfig_s))
        computing = max(0.0, elapsed - overhead_s - reconfig_s - staging_s)
        kept = job.checkpointed_s(computing)
        share = job.gpu_share
        lost = share * (computing - kept)  # staging is not lost: the dataset stays in the nodes' caches
        history.done_work_s += kept * speed / factor
        history.held_s += elapsed
        history.last_run_s, history.last_end_s = elapsed, now
        history.runs.append((running.start_time_s, now))
        history.run_gpus.append(tuple(map(int, running.gpus)))
        history.run_ends.append("preemption" if preempted else "failure")
        history.overhead_gpu_s += share * paid
        if preempted:
            history.preemptions += 1
            history.lost_preemption_gpu_s += lost
        else:
            history.failures += 1
            history.lost_failure_gpu_s += lost
        if not preempted and history.failures > self.dynamics.max_failures:
            del s.history[job_id]
            # a FAILED job's kept work is lost with it: all it held is lost, but for the overhead paid
            history.lost_failure_gpu_s = share * history.held_s - history.overhead_gpu_s - history.lost_preemption_gpu_s
            s.records.append(JobRecord(
                job=job, state=JobState.FAILED, start_time_s=history.first_start_s, finish_time_s=now,
                gpus=running.gpus, n_nodes=len(nodes), topology=level, speed=speed, topology_factor=factor,
                staging_s=staging_s, interruptions=history.freeze(history.held_s),
            ))
            return
        self._requeue(job)

    def _requeue(self, job: Job) -> None:
        """Put an interrupted job back in the queue at its place (submit time, then job id)."""
        pending = self.state.pending
        last = next(reversed(pending.values()), None) if pending else None
        self._queue(job)
        if last is not None and (last.submit_time_s, last.job_id) > (job.submit_time_s, job.job_id):
            ordered = sorted(pending.values(), key=lambda j: (j.submit_time_s, j.job_id))
            pending.clear()  # in place: views hold a read-only proxy of this very dict
            pending.update((j.job_id, j) for j in ordered)
