"""The event-driven simulator of a GPU cluster (SPEC §3-§4).

Time is continuous (seconds). Arrivals come from the job table in (submit time, job id) order; completions sit on
a heap keyed by (time, start sequence number), so ties are broken deterministically. After all events at one
time are applied, that time is a *decision point* if a job is pending: the policy is asked for actions until it
says Wait. The simulator knows nothing of Gymnasium or of any policy; :func:`envs.sim.loop.simulate` is the loop.

What a policy may see lives in a :class:`~envs.sim.state.SimState` (read through ``sim.view``); the simulator keeps
its own books beside it: the completion heap, the demand histogram and the time integrals.

Dynamics (:class:`~envs.core.dynamics.DynamicsConfig`): failures and repairs of nodes and GPUs and scheduler
outages are events on a third heap, applied at their instant after completions and before arrivals. A failed GPU
has no free share until it is repaired; the jobs holding it are interrupted. While the scheduler is down no
decision point happens (arrivals queue, completions, failures and repairs go on). ``preempt(job_id)`` interrupts a
running preemptible job. An interrupted job keeps the work of its last checkpoint, goes back to its place in the
queue and pays the restart overhead when it starts again; interrupted by failures more often than the retry limit,
it ends FAILED. With no dynamics the simulator does exactly what it did before they existed.

A policy may ask to be woken at a time (``wait(until_s)``): that time becomes a decision point if a job is pending
(Tiresias demotes jobs when their attained service crosses a threshold, which no other event marks).

GPU memory and MIG (:mod:`envs.core.mig`): fractional jobs sharing a GPU never hold more than its memory (refused
with ``GPU_MEMORY``). A MIG job is placed on the GPU its Start names at the lowest valid free position of its
profile (what ``nvidia-smi mig -cgi`` does without an explicit placement), and is refused with ``MIG_GEOMETRY``
when none is free, the GPU is not MIG-capable, or it is in full mode and not empty; an ordinary fractional job is
refused with ``GPU_MODE`` on a GPU holding MIG slices. A job started on an empty GPU in the other mode switches it
(MIG mode for a MIG job, full mode for any other) and pays ``cluster.mig_reconfig_s`` at the start of its run, after
any restart overhead and before staging; switches happen only on empty GPUs.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence

import numpy as np

from envs.core.admission import capacity_reject_reason, partition_reject_reason
from envs.core.allocation import GpuSet
from envs.core.cluster import MILLI_PER_GPU, ClusterSpec
from envs.core.dynamics import STATIC, DynamicsConfig
from envs.core.errors import ActionRefused, ConfigError, SimulationStalled
from envs.core.job import Job, JobState, RefusalReason, RejectReason
from envs.core.joblog import JobLog, JobRecord, TopologyLevel
from envs.core.runtime import RuntimeConfig, allocation_speed, topology_level
from envs.sim.dynamics import TIMER, Event, Timeline
from envs.sim.fork import Forking
from envs.sim.holdings import GPUs, Holdings
from envs.sim.interruptions import Interruptions
from envs.sim.quota import QuotaLedger
from envs.sim.state import RunningJob, SimState
from envs.sim.view import View
from envs.workload.table import Workload


class Simulator(Interruptions, Forking):
    """One run of a workload on a cluster, driven one action at a time.

    ``reset()`` (called by the constructor) moves to the first decision point. Then, while not ``done``, call
    ``start(job_id, gpus)`` and ``preempt(job_id)`` any number of times and ``wait()`` to advance; ``log()``
    returns the job log; ``fork()`` copies the run at its current instant (:mod:`envs.sim.fork`).
    """

    def __init__(self, cluster: ClusterSpec, jobs: Workload | Sequence[Job], runtime: RuntimeConfig | None = None,
                 dynamics: DynamicsConfig | None = None):
        self.cluster = cluster
        self.runtime = runtime or RuntimeConfig()
        self.dynamics = dynamics or STATIC
        job_list = jobs.jobs if isinstance(jobs, Workload) else tuple(jobs)
        self._jobs: tuple[Job, ...] = tuple(sorted(job_list, key=lambda j: (j.submit_time_s, j.job_id)))
        self._job_ids = {j.job_id for j in self._jobs}
        if len(self._job_ids) != len(self._jobs):
            raise ConfigError("simulator: job ids must be unique")
        self._reject_cache: dict[tuple, RejectReason | None] = {}
        self.reset()

    # ---- lifecycle -------------------------------------------------------------------------------------------
    def reset(self) -> None:
        """Clear all state and advance to the first decision point."""
        self.state = SimState(self.cluster, self._jobs[0].submit_time_s if self._jobs else 0.0, len(self._jobs))
        self._heap: list[tuple[float, int, int]] = []  # (end time [s], start sequence number, job id)
        self._seq = 0
        self._run_info: dict[int, tuple] = {}
        self._events: list[tuple[float, int, int, Event]] = []  # (time [s], kind, sequence number, event)
        self._event_seq = 0
        self._timeline = Timeline(self.dynamics, self.cluster, self.state.time_s) if self.dynamics.active else None
        sizes = (self.cluster.n_gpus, self.cluster.n_nodes) if self._timeline else (0, 0)
        self._down_count = np.zeros(sizes[0], dtype=np.int32)  # failures in progress per GPU
        self._node_down = np.zeros(sizes[1], dtype=np.int32)  # node failures in progress per node
        self._down_milli_s = 0.0
        self._outage_depth = 0  # outages in progress (windows may overlap)
        self._downtime_s = 0.0
        self._outage_jobs: set[int] = set()  # jobs pending at some moment while the scheduler was down
        self._demand: dict[tuple[int, int, str], int] = {}  # (n_gpus, gpu_milli, mig_profile) -> pending jobs
        self._busy_milli_s = 0.0
        self._idle_pending_milli_s = 0.0
        self._frag_milli_s = 0.0
        self._pending_job_s = 0.0  # ∫ number of pending jobs dt: the total wait so far [job-seconds]
        self._holdings = Holdings(self.cluster, self.state)
        self._reconfig_paid_s: dict[int, float] = {}  # job id -> MIG mode-switch time paid over its runs so far [s]
        quotas = self.cluster.governance.quotas
        self._quota = QuotaLedger(quotas) if quotas.active else None
        self.view = View(self.state, self._quota, self.fork)
        for event in self._timeline.initial() if self._timeline else ():
            self._push_event(event)
        self._advance()

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        del state["view"]  # a live read-only window (mapping proxies), rebuilt on load
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self.view = View(self.state, self._quota, self.fork)

    @property
    def time_s(self) -> float:
        """Current simulated time [s]."""
        return self.state.time_s

    @property
    def done(self) -> bool:
        """True once every job has ended (completed or rejected)."""
        s = self.state
        return not s.pending and not s.running and s.next_arrival >= s.n_jobs

    @property
    def pending_job_s(self) -> float:
        """∫ (number of pending jobs) dt so far [job-seconds]; at the end it equals the jobs' total wait."""
        return self._pending_job_s

    @property
    def busy_gpu_s(self) -> float:
        """∫ (allocated GPU share) dt so far [GPU-seconds]."""
        return self._busy_milli_s / MILLI_PER_GPU

    @property
    def events_left(self) -> bool:
        """True while some event (an arrival or a completion) is still to come; waiting without one would stall."""
        return self.state.events_left

    @property
    def mig_reconfig_paid_s(self) -> dict[int, float]:
        """Per job that paid any: the MIG mode-switch time paid over its runs so far [s] (a copy)."""
        return dict(self._reconfig_paid_s)

    def wait(self, until_s: float | None = None) -> None:
        """Advance to the next decision point (or to the end); raises SimulationStalled if nothing can happen.

        ``until_s`` [s], if later than now, makes that time a decision point too (when some job is pending then).
        """
        if self.done:
            return
        if until_s is not None and until_s > self.state.time_s:
            self.wake_at(until_s)
        elif not self.state.events_left:
            raise SimulationStalled(
                f"t={self.state.time_s:g}s: the policy waited with {len(self.state.pending)} pending job(s), "
                "nothing running, no future arrival and nothing to repair"
            )
        self._advance()

    def wake_at(self, time_s: float) -> None:
        """Make ``time_s`` [s] a decision point if a job is pending then (a timer), without advancing."""
        self._push_event(Event(float(time_s), TIMER))

    def check_preempt(self, job_id: int) -> None:
        """Raise :class:`ActionRefused` if ``preempt(job_id)`` would be refused now; change nothing."""
        reason = self.view.preempt_refusal(job_id)
        if reason is RefusalReason.NOT_RUNNING and job_id not in self._job_ids:
            reason = RefusalReason.UNKNOWN_JOB
        if reason is not None:
            raise self._refuse(reason, job_id, _PREEMPT_REFUSALS[reason], "preempt")

    def preempt(self, job_id: int) -> None:
        """Interrupt running preemptible job ``job_id`` now (Slurm PreemptMode=REQUEUE): it keeps the work of its
        last checkpoint, returns to the queue and pays the restart overhead when it starts again. Raises
        :class:`ActionRefused` naming the reason otherwise."""
        self.check_preempt(job_id)
        self._interrupt(job_id, preempted=True)

    def check_start(self, job_id: int, gpus: Sequence[int] | np.ndarray) -> None:
        """Raise :class:`ActionRefused` if ``start(job_id, gpus)`` would be refused now; change nothing."""
        self._validate(job_id, gpus)

    def start(self, job_id: int, gpus: Sequence[int] | np.ndarray) -> None:
        """Start pending job ``job_id`` on ``gpus`` now; raises :class:`ActionRefused` naming the reason."""
        self._allocate(*self._validate(job_id, gpus))

    def log(self) -> JobLog:
        """The job log so far (complete once ``done``)."""
        return JobLog(
            cluster_name=self.cluster.name,
            total_gpus=self.cluster.n_gpus,
            records=tuple(self.state.records),
            busy_gpu_s=self._busy_milli_s / MILLI_PER_GPU,
            idle_gpu_s_while_pending=self._idle_pending_milli_s / MILLI_PER_GPU,
            fragmented_gpu_s=self._frag_milli_s / MILLI_PER_GPU,
            down_gpu_s=self._down_milli_s / MILLI_PER_GPU,
            scheduler_downtime_s=self._downtime_s,
            outage_waiting_jobs=len(self._outage_jobs),
            **(self._quota.log_fields() if self._quota is not None else {}),
        )

    # ---- events ----------------------------------------------------------------------------------------------
    def _advance(self) -> None:
        """Apply events time by time until a job is pending while the scheduler is up, or every job has ended."""
        s, jobs, heap, events = self.state, self._jobs, self._heap, self._events
        n_jobs = len(jobs)
        while True:
            t_arr = jobs[s.next_arrival].submit_time_s if s.next_arrival < n_jobs else math.inf
            t_end = heap[0][0] if heap else math.inf
            t = t_arr if t_arr < t_end else t_end
            if events:
                if t_arr == math.inf and not s.running and not s.pending:
                    return  # every job has ended: later failures, outages and timers do not matter
                if events[0][0] < t:
                    t = events[0][0]
            if t == math.inf:
                return
            self._integrate(t)
            while heap and heap[0][0] == t:
                self._complete(heapq.heappop(heap)[2])
            while events and events[0][0] == t:
                self._apply(heapq.heappop(events)[3])
            while s.next_arrival < n_jobs and jobs[s.next_arrival].submit_time_s == t:
                self._arrive(jobs[s.next_arrival])
                s.next_arrival += 1
            if s.pending and s.scheduler_up:
                if self._quota is not None and self._quota.nominal:
                    self._reclaim()
                return

    def _integrate(self, t: float) -> None:
        s = self.state
        dt = t - s.time_s
        if dt > 0:
            books = self._holdings
            self._busy_milli_s += books.alloc_milli * dt
            if s.pending:
                self._pending_job_s += len(s.pending) * dt
                self._idle_pending_milli_s += (self.cluster.n_gpus * MILLI_PER_GPU - books.alloc_milli
                                               - books.down_milli) * dt
                self._frag_milli_s += books.fragmented_milli(min(self._demand)) * dt
            if self._quota is not None:
                self._quota.integrate(dt)
            if self._timeline is not None:
                self._down_milli_s += self._holdings.down_milli * dt
                if not s.scheduler_up:
                    self._downtime_s += dt
        s.time_s = t

    def _arrive(self, job: Job) -> None:
        reason = self._reject_reason(job)
        if reason is not None:
            self.state.records.append(JobRecord(job=job, state=JobState.REJECTED, reject_reason=reason))
            return
        self._queue(job)  # arrivals come in (submit time, job id) order: each goes last

    def _queue(self, job: Job) -> None:
        """Add ``job`` at the end of the queue and to the demand histogram."""
        self.state.pending[job.job_id] = job
        key = (job.n_gpus, job.gpu_milli, job.mig_profile)
        self._demand[key] = self._demand.get(key, 0) + 1
        if not self.state.scheduler_up:
            self._outage_jobs.add(job.job_id)

    def _complete(self, job_id: int) -> None:
        s = self.state
        running = s.running.pop(job_id)
        job = running.job
        alloc, nodes, counts, speed, level, factor, staging_s, timed_out, overhead_s, _, reconfig_s = \
            self._run_info.pop(job_id)
        self._hold(job, alloc, nodes, counts, +1)
        start_s, interruptions = running.start_time_s, None
        if reconfig_s:
            paid = min(max(s.time_s - start_s - overhead_s, 0.0), reconfig_s)
            self._reconfig_paid_s[job_id] = self._reconfig_paid_s.get(job_id, 0.0) + paid
        if s.history:
            history = s.history.pop(job_id, None)
            if history is not None:
                run_s = s.time_s - start_s
                history.overhead_gpu_s += job.gpu_share * min(run_s, overhead_s)
                start_s, interruptions = history.first_start_s, history.freeze(history.held_s + run_s,
                                                                               (start_s, s.time_s))
        s.records.append(JobRecord(
            job=job, state=JobState.COMPLETED, start_time_s=start_s, finish_time_s=s.time_s,
            gpus=running.gpus, n_nodes=len(nodes), topology=level, speed=speed, topology_factor=factor,
            staging_s=staging_s, timed_out=timed_out, interruptions=interruptions,
        ))

    # ---- rejection at submission ------------------------------------------------------------------------------
    def _reject_reason(self, job: Job) -> RejectReason | None:
        reason = partition_reject_reason(self.cluster.governance, job)
        if reason is not None:
            return reason
        if self._quota is not None and self._quota.never_admits(job):
            return RejectReason.QUOTA
        key = (job.gpu_types, job.gpu_mem_gib, job.n_gpus, job.cpu_milli_per_gpu, job.ram_mib_per_gpu, job.partition,
               job.mig_profile)
        if key not in self._reject_cache:
            self._reject_cache[key] = capacity_reject_reason(self.cluster, job)
        return self._reject_cache[key]

    # ---- starting and releasing ---------------------------------------------------------------------------------
    def _refuse(self, reason: RefusalReason, job_id: int, detail: str, verb: str = "start") -> ActionRefused:
        return ActionRefused(reason, f"t={self.state.time_s:g}s: cannot {verb} job {job_id}: {detail}")

    def _validate(self, job_id: int, gpus: Sequence[int] | np.ndarray) -> tuple[Job, GPUs, list[int], list[int]]:
        """(job, GPUs, nodes, GPUs per node) for a valid Start; raises ActionRefused otherwise.

        The GPUs come back ascending, as an index array or, when they form a contiguous range, as a slice
        (indexing by slice is what keeps large SWF allocations cheap). ``nodes`` are the distinct nodes of the
        allocation, ascending, and ``counts`` how many of its GPUs each holds.
        """
        s = self.state
        job = s.pending.get(job_id)
        if job is None:
            if job_id in self._job_ids:
                raise self._refuse(RefusalReason.NOT_PENDING, job_id, "it is not pending")
            raise self._refuse(RefusalReason.UNKNOWN_JOB, job_id, "no job has this id")
        if not s.scheduler_up:
            raise self._refuse(RefusalReason.SCHEDULER_DOWN, job_id, "the scheduler is down")
        try:  # a private copy: the caller may reuse its buffer after the start
            alloc = np.array(gpus)
        except (TypeError, ValueError) as exc:
            raise self._refuse(RefusalReason.BAD_GPU_INDEX, job_id, f"GPUs must be a list of integers: {exc}") from exc
        if alloc.ndim != 1 or (alloc.size and alloc.dtype.kind not in "iu"):
            raise self._refuse(RefusalReason.BAD_GPU_INDEX, job_id, f"GPUs must be a list of integers, got {gpus!r}")
        alloc = alloc.astype(np.int64, copy=False)
        if alloc.size != job.n_gpus:
            raise self._refuse(RefusalReason.WRONG_GPU_COUNT, job_id,
                               f"it asks for {job.n_gpus} GPU(s), the allocation has {alloc.size}")
        c = self.cluster
        if alloc.size > 1 and not (alloc[1:] > alloc[:-1]).all():  # placement rules give ascending GPUs
            alloc = np.sort(alloc)
            if (alloc[1:] == alloc[:-1]).any():
                raise self._refuse(RefusalReason.BAD_GPU_INDEX, job_id, f"a GPU is repeated in {gpus!r}")
        lo, hi = int(alloc[0]), int(alloc[-1])
        if lo < 0 or hi >= c.n_gpus:
            raise self._refuse(RefusalReason.BAD_GPU_INDEX, job_id, f"GPU indices must be in 0..{c.n_gpus - 1}")
        if alloc.size > 1 and hi - lo + 1 == alloc.size:  # a contiguous range: index by slice
            alloc = slice(lo, hi + 1)
        first_node = int(c.gpu_node[lo])
        if first_node == c.gpu_node[hi]:  # ascending GPUs: one node iff the first and last GPU share it
            nodes, counts = [first_node], [job.n_gpus]
        else:
            unique, unique_counts = np.unique(c.gpu_node[alloc], return_counts=True)
            nodes, counts = unique.tolist(), unique_counts.tolist()
        if c.governance.partitions:
            inside = c.eligible_nodes(frozenset(), 0.0, job.partition)
            if not all(inside[n] for n in nodes):
                raise self._refuse(RefusalReason.PARTITION, job_id, f"a GPU lies outside partition {job.partition!r}")
        if job.gpu_types or job.gpu_mem_gib:
            eligible = c.eligible_nodes(job.gpu_types, job.gpu_mem_gib)
            if not all(eligible[n] for n in nodes):
                raise self._refuse(RefusalReason.GPU_TYPE, job_id, "a GPU type is not allowed or lacks memory")
        if not s.all_nodes_up and not all(s.node_up[n] for n in nodes):
            raise self._refuse(RefusalReason.NODE_DOWN, job_id, "a node of the allocation is down")
        if s.down_gpus and not s.gpu_up[alloc].all():
            raise self._refuse(RefusalReason.GPU_DOWN, job_id, "a GPU of the allocation has failed")
        refused = self._holdings.refusal(job, alloc, lo, nodes, counts)
        if refused is not None:
            raise self._refuse(refused[0], job_id, refused[1])
        if self._quota is not None:
            detail = self._quota.refusal(job)
            if detail is not None:
                raise self._refuse(RefusalReason.QUOTA, job_id, detail)
        return job, alloc, nodes, counts

    def _allocate(self, job: Job, alloc: GPUs, nodes: list[int], counts: list[int]) -> None:
        s = self.state
        reconfig_s = self._holdings.switch_modes(job, alloc)
        self._hold(job, alloc, nodes, counts, -1)
        del s.pending[job.job_id]
        key = (job.n_gpus, job.gpu_milli, job.mig_profile)
        left = self._demand[key] - 1
        if left:
            self._demand[key] = left
        else:
            del self._demand[key]
        speed, level, factor, staging_s = self._runtime_on(job, alloc, nodes)
        history = s.history.get(job.job_id) if s.history else None
        if history is None:
            overhead_s = 0.0
            run_s = job.runtime_s / speed * factor + staging_s
        else:  # a restart: pay the overhead, then redo only the work since the last checkpoint
            overhead_s = self.dynamics.restart_overhead_s
            run_s = overhead_s + max(job.runtime_s - history.done_work_s, 0.0) / speed * factor + staging_s
        if reconfig_s:
            run_s += reconfig_s
        timed_out = self.runtime.kill_at_walltime and run_s > job.runtime_estimate_s
        if timed_out:
            run_s = job.runtime_estimate_s
        now = s.time_s
        s.running[job.job_id] = RunningJob(job, now, now + job.runtime_estimate_s, GpuSet.of(alloc))
        end = (now + run_s, self._seq, job.job_id)
        self._run_info[job.job_id] = (alloc, nodes, counts, speed, level, factor, staging_s, timed_out, overhead_s,
                                      end, reconfig_s)
        heapq.heappush(self._heap, end)
        self._seq += 1

    def _hold(self, job: Job, alloc: GPUs, nodes: list[int], counts: list[int], sign: int) -> None:
        """Take (sign -1) or give back (sign +1) the job's resources, and its quota."""
        self._holdings.change(job, alloc, nodes, counts, sign)
        if self._quota is not None:
            self._quota.change(job, -sign)

    def _runtime_on(self, job: Job, alloc: GPUs, nodes: list[int]) -> tuple[float, TopologyLevel, float, float]:
        """(speed, topology level, topology factor, staging time [s]) of ``job`` on ascending ``alloc``."""
        c, model = self.cluster, self.runtime
        level = topology_level(c, alloc, nodes)
        speed = allocation_speed(c, job, nodes) if model.use_speed else 1.0
        factor = model.topology_factor(level, job.comm_sensitivity)
        staging_s = 0.0
        if model.use_staging and job.dataset_gib > 0:
            caches = self.state.caches
            hits = [caches[n].touch(job.dataset_id, job.dataset_gib) for n in nodes]
            if not all(hits):
                staging_s = job.dataset_gib / model.staging_gib_per_s
        return speed, level, factor, staging_s


_PREEMPT_REFUSALS = {RefusalReason.UNKNOWN_JOB: "no job has this id", RefusalReason.NOT_RUNNING: "it is not running",
                     RefusalReason.SCHEDULER_DOWN: "the scheduler is down",
                     RefusalReason.NOT_PREEMPTIBLE: "it is not preemptible"}
"""What a refused preemption says, by reason."""
