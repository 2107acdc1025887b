"""The availability profile: when resources free up, by the running jobs' requested wall times (SPEC §2, §6).

A real scheduler knows only expected ends (start + requested wall time), so the profile is built from those: at
``now`` the cluster's current free resources, then at each expected end the running jobs' holdings come back.
Backfilling heuristics (and the env's backfill-assisted variant) ask it for a job's earliest start and add
reservations to it. A running job whose expected end has already passed (it outlives its estimate) is assumed to
end just after ``now``.

States of the profile are :class:`ResourceState` objects, which placement rules accept wherever they take a
:class:`~envs.sim.view.View`, so a reservation is placed by the same rule that would start the job.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Iterator

import numpy as np

from envs.core.cluster import MILLI_PER_GPU, ClusterSpec
from envs.core.job import Job
from envs.sim.view import PlacementRule, View

OVERDUE_END_S = 1e-6
"""How long after ``now`` an overdue running job (past its requested wall time) is assumed to end [s]."""


class ResourceState:
    """Free resources at one (possibly future) instant, with the read-only interface placement rules use."""

    def __init__(self, view: View, gpu_free_milli: np.ndarray, node_cpu: np.ndarray, node_ram: np.ndarray,
                 time_s: float) -> None:
        c = view.cluster
        self._view = view
        self.cluster = c
        self.time_s = time_s
        self.gpu_free_milli = gpu_free_milli
        self.gpu_whole_free = gpu_free_milli == MILLI_PER_GPU
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
        cpu_held, ram_held = node_holdings(self.cluster, job, gpus)
        return ResourceState(self._view, free, self.node_free_cpu_milli + sign * cpu_held,
                             self.node_free_ram_mib + sign * ram_held, self.time_s)

    @classmethod
    def now(cls, view: View) -> ResourceState:
        """The view's free resources at this instant."""
        return cls(view, view.gpu_free_milli.copy(), view.node_free_cpu_milli.copy(), view.node_free_ram_mib.copy(),
                   view.time_s)


def node_holdings(cluster: ClusterSpec, job: Job, gpus: np.ndarray | slice) -> tuple[np.ndarray, np.ndarray]:
    """(CPU [milli-cores], RAM [MiB]) that ``job`` holds on each node when it runs on ``gpus``."""
    counts = np.bincount(cluster.gpu_node[gpus], minlength=cluster.n_nodes)
    return (np.where(cluster.cpu_modelled, counts * job.cpu_milli_per_gpu, 0),
            np.where(cluster.ram_modelled, counts * job.ram_mib_per_gpu, 0))


def _releases(view: View) -> Iterator[tuple[float, np.ndarray, np.ndarray, np.ndarray, int]]:
    """(time, free milli per GPU, free CPU per node, free RAM per node, fully free GPUs) at ``now`` and after each
    expected end, in time order. The arrays are updated in place from one step to the next: copy to keep them."""
    c = view.cluster
    now = view.time_s
    free = view.gpu_free_milli.copy()
    cpu = view.node_free_cpu_milli.copy()
    ram = view.node_free_ram_mib.copy()
    whole = view.free_gpus
    ends = sorted(view.running.values(), key=lambda r: (r.expected_end_s, r.start_time_s, r.job.job_id))
    t, i = now, 0
    while True:
        yield t, free, cpu, ram, whole
        if i == len(ends):
            return
        t = max(ends[i].expected_end_s, now + OVERDUE_END_S)
        while i < len(ends) and max(ends[i].expected_end_s, now + OVERDUE_END_S) == t:
            job, index = ends[i].job, ends[i].gpus.index
            before = int((free[index] == MILLI_PER_GPU).sum()) if job.is_fractional else 0
            free[index] += job.gpu_milli
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
    for t, free, cpu, ram, whole in _releases(view):
        if whole < need:
            continue
        state = ResourceState(view, free, cpu, ram, t)
        gpus = rule(state, job)
        if gpus is not None:
            return t, gpus, state
    return None


class AvailabilityProfile:
    """Free resources as a step function of future time, from expected ends and added reservations."""

    def __init__(self, view: View) -> None:
        self._view = view
        self.times: list[float] = []
        self._arrays: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self._whole_free: list[int] = []  # fully free GPUs per breakpoint: a cheap necessary test before placing
        for t, free, cpu, ram, whole in _releases(view):
            self.times.append(t)
            self._arrays.append((free.copy(), cpu.copy(), ram.copy()))
            self._whole_free.append(whole)

    def state(self, i: int) -> ResourceState:
        """The free resources from ``times[i]`` until the next breakpoint."""
        free, cpu, ram = self._arrays[i]
        return ResourceState(self._view, free, cpu, ram, self.times[i])

    def _window_state(self, i: int, end_s: float) -> ResourceState:
        """The resources free throughout [times[i], end_s): the element-wise minimum over the breakpoints."""
        j = bisect.bisect_left(self.times, end_s)
        arrays = self._arrays[i:max(j, i + 1)]
        if len(arrays) == 1:
            free, cpu, ram = arrays[0]
        else:
            free = np.minimum.reduce([a[0] for a in arrays])
            cpu = np.minimum.reduce([a[1] for a in arrays])
            ram = np.minimum.reduce([a[2] for a in arrays])
        return ResourceState(self._view, free, cpu, ram, self.times[i])

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
        cpu_held, ram_held = node_holdings(self._view.cluster, job, gpus)
        for i in range(bisect.bisect_left(self.times, start_s), bisect.bisect_left(self.times, end_s)):
            free, cpu, ram = self._arrays[i]
            free[gpus] -= sign * job.gpu_milli
            cpu -= sign * cpu_held
            ram -= sign * ram_held
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
