"""The availability profile: when resources free up, by the running jobs' requested wall times (SPEC §2, §6).

A real scheduler knows only expected ends (start + requested wall time), so the profile is built from those: at
``now`` the cluster's current free resources, then at each expected end the running jobs' holdings come back.
Backfilling heuristics (and the env's backfill-assisted variant) ask it for a job's earliest start and add
reservations to it. A running job whose expected end has already passed (it outlives its estimate) is assumed to
end just after ``now``.

States of the profile are :class:`ResourceState` objects, which placement rules accept wherever they take a
:class:`~envs.sim.view.View`, so a reservation is placed by the same rule that would start the job.

GPU memory and MIG are projected too: free memory per GPU and the MIG occupancy masks come back at expected ends; a
job added to a state takes its memory and, for a MIG job, the lowest free valid position of its profile (where the
simulator would put it). A window of breakpoints (``duration_s``) holds the least free memory and the union of the
masks, so a placement found there is valid at every breakpoint of it. A reservation of a MIG job holds the lowest
position free throughout its window; if none is (a reservation that the state no longer allows), it holds every
free slice of the GPU in that window, which can only delay others. The GPUs' MIG modes are not projected (the
current ones): they only order ties. Every placement a projected state of *now* allows is valid now, so a start
taken from one is never refused.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Iterator

import numpy as np

from envs.core.cluster import MILLI_PER_GPU, ClusterSpec
from envs.core.job import Job
from envs.core.mig import ALL_SLICES, MEMORY_SLICES
from envs.sim.view import PlacementRule, View

OVERDUE_END_S = 1e-6
"""How long after ``now`` an overdue running job (past its requested wall time) is assumed to end [s]."""


class ResourceState:
    """Free resources at one (possibly future) instant, with the read-only interface placement rules use.

    ``gpu_free_mem_mib`` and ``gpu_mig_used`` default to a conservative guess from the view (the GPUs entirely free
    in ``gpu_free_milli`` have all their memory and slices free, the others what they have now); pass them for an
    exact state. ``mig_slices`` (job id -> (GPU, mask)) are the MIG instances held, for :meth:`with_released`.
    """

    def __init__(self, view: View, gpu_free_milli: np.ndarray, node_cpu: np.ndarray, node_ram: np.ndarray,
                 time_s: float, gpu_free_mem_mib: np.ndarray | None = None, gpu_mig_used: np.ndarray | None = None,
                 mig_slices: dict[int, tuple[int, int]] | None = None) -> None:
        c = view.cluster
        self._view = view
        self.cluster = c
        self.time_s = time_s
        self.gpu_free_milli = gpu_free_milli
        self.gpu_whole_free = gpu_free_milli == MILLI_PER_GPU
        if gpu_free_mem_mib is None:
            gpu_free_mem_mib = np.where(self.gpu_whole_free, c.gpu_memory_mib, view.gpu_free_mem_mib)
        if gpu_mig_used is None:
            gpu_mig_used = np.where(self.gpu_whole_free, 0, view.gpu_mig_used).astype(np.uint8)
        self.gpu_free_mem_mib = gpu_free_mem_mib
        self.gpu_mig_used = gpu_mig_used
        self.gpu_mig_mode = view.gpu_mig_mode
        self.mig_slices = dict(view.mig_slices) if mig_slices is None else mig_slices
        self.node_free_gpus = np.bincount(c.gpu_node[self.gpu_whole_free], minlength=c.n_nodes)
        self.free_gpus = int(self.node_free_gpus.sum())
        self.node_free_cpu_milli = node_cpu
        self.node_free_ram_mib = node_ram
        self.node_up = view.node_up
        self.all_nodes_up = view.all_nodes_up
        self.scheduler_up = True
        self.pending = view.pending
        self.running = view.running
        self._memo: dict[object, np.ndarray] = {}

    def memoized(self, key: object, compute: Callable[[], np.ndarray]) -> np.ndarray:
        """``compute()`` once for this state (see :meth:`View.memoized`)."""
        value = self._memo.get(key)
        if value is None:
            value = self._memo[key] = compute()
        return value

    def has_dataset(self, node: int, dataset_id: str) -> bool:
        """Cache contents are not projected: the current ones."""
        return self._view.has_dataset(node, dataset_id)

    def without(self, job: Job, gpus: np.ndarray | slice) -> ResourceState:
        """This state with ``job`` also holding ``gpus``."""
        return self._changed(job, gpus, -1)

    def with_released(self, job: Job, gpus: np.ndarray | slice) -> ResourceState:
        """This state with ``job`` no longer holding ``gpus`` (what preempting it would give back)."""
        return self._changed(job, gpus, +1)

    def _changed(self, job: Job, gpus: np.ndarray | slice, sign: int) -> ResourceState:
        free = self.gpu_free_milli.copy()
        free[gpus] += sign * job.gpu_milli
        mem = self.gpu_free_mem_mib.copy()
        used, slices = self.gpu_mig_used, self.mig_slices
        mask = 0
        if job.mig_profile:
            g = int(np.asarray(gpus).reshape(-1)[0])
            used, slices = used.copy(), dict(slices)
            if sign < 0:
                mask = mig_mask(self.cluster, job, g, int(used[g]))
                if not mask:
                    raise ValueError(f"job {job.job_id}: no valid position of {job.mig_profile} is free on GPU {g}")
                slices[job.job_id] = (g, mask)
                used[g] |= mask
            else:
                mask = slices.pop(job.job_id)[1]
                used[g] &= ~mask & ALL_SLICES
        mem[gpus] += sign * held_memory_mib(self.cluster, job, gpus, mask)
        cpu_held, ram_held = node_holdings(self.cluster, job, gpus)
        return ResourceState(self._view, free, self.node_free_cpu_milli + sign * cpu_held,
                             self.node_free_ram_mib + sign * ram_held, self.time_s, mem, used, slices)

    @classmethod
    def now(cls, view: View) -> ResourceState:
        """The view's free resources at this instant."""
        return cls(view, view.gpu_free_milli.copy(), view.node_free_cpu_milli.copy(), view.node_free_ram_mib.copy(),
                   view.time_s, view.gpu_free_mem_mib.copy(), view.gpu_mig_used.copy(), dict(view.mig_slices))


def mig_mask(cluster: ClusterSpec, job: Job, gpu: int, used: int) -> int:
    """The slices a MIG ``job`` takes on ``gpu`` whose occupancy is ``used``: its profile's lowest free valid
    position (0 when none is free)."""
    return int(cluster.mig_table("mask", job.mig_profile)[cluster.gpu_mig_geometry[gpu], used])


def held_memory_mib(cluster: ClusterSpec, job: Job, gpus: np.ndarray | slice, mig_mask: int = 0) -> np.ndarray | int:
    """GPU memory [MiB] ``job`` holds on each of ``gpus`` (the simulator's rule): all of it for whole GPUs, its
    ``gpu_mem_mib`` for a fractional share, ``capacity × slices // 8`` for a MIG instance of ``mig_mask``."""
    if not job.is_fractional:
        return cluster.gpu_memory_mib[gpus]
    if job.mig_profile:
        g = int(np.asarray(gpus).reshape(-1)[0])
        return int(cluster.gpu_memory_mib[g]) * mig_mask.bit_count() // MEMORY_SLICES
    return job.gpu_mem_mib


def node_holdings(cluster: ClusterSpec, job: Job, gpus: np.ndarray | slice) -> tuple[np.ndarray, np.ndarray]:
    """(CPU [milli-cores], RAM [MiB]) that ``job`` holds on each node when it runs on ``gpus``."""
    counts = np.bincount(cluster.gpu_node[gpus], minlength=cluster.n_nodes)
    return (np.where(cluster.cpu_modelled, counts * job.cpu_milli_per_gpu, 0),
            np.where(cluster.ram_modelled, counts * job.ram_mib_per_gpu, 0))


Arrays = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]
"""Free milli per GPU, free CPU per node, free RAM per node, free memory per GPU, MIG occupancy per GPU."""


def _releases(view: View) -> Iterator[tuple[float, Arrays, int]]:
    """(time, arrays, fully free GPUs) at ``now`` and after each expected end, in time order. The arrays are
    updated in place from one step to the next: copy to keep them."""
    c = view.cluster
    now = view.time_s
    free = view.gpu_free_milli.copy()
    cpu = view.node_free_cpu_milli.copy()
    ram = view.node_free_ram_mib.copy()
    mem = view.gpu_free_mem_mib.copy()
    used = view.gpu_mig_used.copy()
    arrays = (free, cpu, ram, mem, used)
    whole = view.free_gpus
    ends = sorted(view.running.values(), key=lambda r: (r.expected_end_s, r.start_time_s, r.job.job_id))
    t, i = now, 0
    while True:
        yield t, arrays, whole
        if i == len(ends):
            return
        t = max(ends[i].expected_end_s, now + OVERDUE_END_S)
        while i < len(ends) and max(ends[i].expected_end_s, now + OVERDUE_END_S) == t:
            job, index = ends[i].job, ends[i].gpus.index
            before = int((free[index] == MILLI_PER_GPU).sum()) if job.is_fractional else 0
            free[index] += job.gpu_milli
            mask = 0
            if job.mig_profile:
                g, mask = view.mig_slices[job.job_id]
                used[g] &= ~mask & ALL_SLICES
            mem[index] += held_memory_mib(c, job, index, mask)
            whole += int((free[index] == MILLI_PER_GPU).sum()) - before
            if job.cpu_milli_per_gpu or job.ram_mib_per_gpu:
                cpu_held, ram_held = node_holdings(c, job, index)
                cpu += cpu_held
                ram += ram_held
            i += 1


def earliest_start(view: View, job: Job, rule: PlacementRule) -> tuple[float, np.ndarray, ResourceState] | None:
    """(time, GPUs, state) of the first instant, now or at an expected end, at which ``rule`` places ``job``.

    Resources only come back over time, so this streams through the expected ends without building a profile.
    None when the job does not fit even once every running job has ended.
    """
    need = 0 if job.is_fractional else job.n_gpus
    for t, (free, cpu, ram, mem, used), whole in _releases(view):
        if whole < need:
            continue
        state = ResourceState(view, free, cpu, ram, t, mem, used, {})
        gpus = rule(state, job)
        if gpus is not None:
            return t, gpus, state
    return None


class AvailabilityProfile:
    """Free resources as a step function of future time, from expected ends and added reservations."""

    def __init__(self, view: View) -> None:
        self._view = view
        self.times: list[float] = []
        self._arrays: list[Arrays] = []
        self._whole_free: list[int] = []  # fully free GPUs per breakpoint: a cheap necessary test before placing
        self._mig_holds: dict[tuple[int, float], int] = {}  # (job id, start [s]) -> slices a reservation holds
        for t, arrays, whole in _releases(view):
            self.times.append(t)
            self._arrays.append(tuple(a.copy() for a in arrays))
            self._whole_free.append(whole)

    def state(self, i: int) -> ResourceState:
        """The free resources from ``times[i]`` until the next breakpoint."""
        free, cpu, ram, mem, used = self._arrays[i]
        return ResourceState(self._view, free, cpu, ram, self.times[i], mem, used, {})

    def _window(self, i: int, end_s: float) -> Arrays:
        """The resources free throughout [times[i], end_s): the element-wise minimum over the breakpoints (the
        union of the MIG occupancy masks). A GPU shared in full mode at one breakpoint and holding MIG slices at
        another can take neither kind of job for the whole window: it counts as holding every slice."""
        j = bisect.bisect_left(self.times, end_s)
        arrays = self._arrays[i:max(j, i + 1)]
        if len(arrays) == 1:
            return arrays[0]
        used = np.bitwise_or.reduce([a[4] for a in arrays])
        shared_full = np.logical_or.reduce([(a[0] < MILLI_PER_GPU) & (a[4] == 0) for a in arrays])
        used = np.where(shared_full & (used != 0), ALL_SLICES, used).astype(used.dtype)
        return (*(np.minimum.reduce([a[k] for a in arrays]) for k in range(4)), used)

    def _window_state(self, i: int, end_s: float) -> ResourceState:
        free, cpu, ram, mem, used = self._window(i, end_s)
        return ResourceState(self._view, free, cpu, ram, self.times[i], mem, used, {})

    def earliest_start(self, job: Job, rule: PlacementRule,
                       duration_s: float | None = None) -> tuple[float, np.ndarray, ResourceState] | None:
        """(time, GPUs, state) of the earliest breakpoint at which ``rule`` places ``job`` for ``duration_s``.

        Without a duration only the instant matters (resources only come back later, unless reservations were
        added). None when the job does not fit even once everything has ended.
        """
        whole = 0 if job.is_fractional else job.n_gpus
        for i, t in enumerate(self.times):
            if whole:
                j = i + 1 if duration_s is None else max(bisect.bisect_left(self.times, t + duration_s), i + 1)
                if min(self._whole_free[i:j]) < whole:
                    continue
            state = self.state(i) if duration_s is None else self._window_state(i, t + duration_s)
            gpus = rule(state, job)
            if gpus is not None:
                return t, gpus, state
        return None

    def reserve(self, job: Job, gpus: np.ndarray, start_s: float, duration_s: float, sign: int = 1) -> None:
        """Hold ``gpus`` (and the job's CPU and RAM) for ``job`` during [start_s, start_s + duration_s); with
        ``sign=-1``, give such a hold back."""
        self._breakpoint(start_s)
        end_s = start_s + duration_s
        self._breakpoint(end_s)
        c = self._view.cluster
        cpu_held, ram_held = node_holdings(c, job, gpus)
        first, last = bisect.bisect_left(self.times, start_s), bisect.bisect_left(self.times, end_s)
        mask = 0
        if job.mig_profile:
            g = int(np.asarray(gpus).reshape(-1)[0])
            if sign > 0:
                used = int(self._window(first, end_s)[4][g]) if last > first else 0
                mask = mig_mask(c, job, g, used) or (~used & ALL_SLICES)
                self._mig_holds[(job.job_id, start_s)] = mask
            else:
                mask = self._mig_holds.pop((job.job_id, start_s), 0)
        mem_held = held_memory_mib(c, job, gpus, mask)
        for i in range(first, last):
            free, cpu, ram, mem, used = self._arrays[i]
            free[gpus] -= sign * job.gpu_milli
            cpu -= sign * cpu_held
            ram -= sign * ram_held
            mem[gpus] -= sign * mem_held
            if mask:
                used[g] = used[g] | mask if sign > 0 else used[g] & (~mask & ALL_SLICES)
            self._whole_free[i] = int((free == MILLI_PER_GPU).sum())

    def _breakpoint(self, t: float) -> None:
        i = bisect.bisect_left(self.times, t)
        if i < len(self.times) and self.times[i] == t:
            return
        source = self._arrays[i - 1]  # t > now: the state in force just before t continues
        self.times.insert(i, t)
        self._arrays.insert(i, tuple(a.copy() for a in source))
        self._whole_free.insert(i, self._whole_free[i - 1])


def easy_backfill(view: View, head: Job, others: Iterable[Job],
                  rule: PlacementRule) -> tuple[float | None, Job | None, np.ndarray | None]:
    """EASY backfilling for a blocked ``head``: (its reserved start, a job to start now, that job's GPUs).

    The head is reserved at its earliest start by requested wall times; the first of ``others`` (in the caller's
    order) that fits now and does not delay that reservation is returned: it ends by its requested time no later
    than the reservation, or the head still fits at the reservation with that job's GPUs taken. (None, None, None)
    when the head can never start; (start, None, None) when no job can be backfilled now.
    """
    found = earliest_start(view, head, rule)
    if found is None:
        return None, None, None
    shadow_s, _, state = found
    for job in others:
        gpus = rule(view, job)
        if gpus is None:
            continue
        if view.time_s + job.runtime_estimate_s <= shadow_s or rule(state.without(job, gpus), head) is not None:
            return shadow_s, job, gpus
    return shadow_s, None, None
