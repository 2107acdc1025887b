"""Projected resources: :class:`ResourceState`, the free resources at one (possibly future) instant, with the read-only
interface placement rules use, so that backfilling (:mod:`envs.sim.profile`), preemptive policies and Tiresias ask
the same rules about a state they imagine as about the live view.

A state is built from the view and changed by holdings taken or given back (:meth:`ResourceState.without`,
:meth:`ResourceState.with_released`): the per-GPU arrays are copied, the per-node counts changed on the touched nodes
only. GPU memory and MIG are projected too: a job added to a state takes its memory and, for a MIG job, the lowest
free valid position of its profile (where the simulator would put it), except a running job put back, which keeps
its own slices. Dataset caches are never projected: a state shares them with the view.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np

from envs.core.cluster import MILLI_PER_GPU, ClusterSpec
from envs.core.job import Job
from envs.core.mig import ALL_SLICES, MEMORY_SLICES
from envs.sim.state import RunningJob
from envs.sim.view import View

LIVE_KEYS = frozenset({"cached"})
"""First elements of the memo keys whose arrays a projected state shares with the live view (dataset caches, which
are never projected): :meth:`ResourceState.memoized` passes them on to the view."""


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
        self._fill(view, gpu_free_mem_mib, gpu_mig_used, dict(view.mig_slices) if mig_slices is None else mig_slices,
                   np.bincount(c.gpu_node[self.gpu_whole_free], minlength=c.n_nodes), node_cpu, node_ram)

    def _fill(self, view: View, mem: np.ndarray, used: np.ndarray, slices: dict[int, tuple[int, int]],
              node_free_gpus: np.ndarray, node_cpu: np.ndarray, node_ram: np.ndarray,
              free_gpus: int | None = None) -> None:
        self.gpu_free_mem_mib = mem
        self.gpu_mig_used = used
        self.gpu_mig_mode = view.gpu_mig_mode
        self.mig_slices = slices
        self.node_free_gpus = node_free_gpus
        self.free_gpus = int(node_free_gpus.sum()) if free_gpus is None else free_gpus
        self.node_free_cpu_milli = node_cpu
        self.node_free_ram_mib = node_ram
        self.node_up = view.node_up
        self.all_nodes_up = view.all_nodes_up
        self.scheduler_up = True
        self.pending = view.pending
        self.running = view.running
        self._memo: dict[object, np.ndarray] = {}

    @classmethod
    def _of(cls, view: View, free: np.ndarray, whole: np.ndarray, node_free_gpus: np.ndarray, free_gpus: int,
            node_cpu: np.ndarray, node_ram: np.ndarray, time_s: float, mem: np.ndarray, used: np.ndarray,
            slices: dict[int, tuple[int, int]]) -> ResourceState:
        """A state from arrays that are already consistent (``whole``, ``node_free_gpus`` and ``free_gpus`` those
        of ``free``): what the constructor builds, without its pass over every GPU."""
        state = cls.__new__(cls)
        state._view, state.cluster, state.time_s = view, view.cluster, time_s
        state.gpu_free_milli, state.gpu_whole_free = free, whole
        state._fill(view, mem, used, slices, node_free_gpus, node_cpu, node_ram, free_gpus)
        return state

    def memoized(self, key: object, compute: Callable[[], np.ndarray]) -> np.ndarray:
        """``compute()`` once for this state (see :meth:`View.memoized`). Keys of :data:`LIVE_KEYS` (arrays that
        projected resources do not change: the dataset caches) are memoized on the live view, shared by every
        state projected from it."""
        if type(key) is tuple and key and key[0] in LIVE_KEYS:
            return self._view.memoized(key, compute)
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
        """A new state with ``job``'s holdings on ``gpus`` added back (``sign`` +1) or taken (-1): the per-GPU arrays
        are copied, the per-node counts changed on the touched nodes only."""
        c = self.cluster
        free = self.gpu_free_milli.copy()
        free[gpus] += sign * job.gpu_milli
        became = free[gpus] == MILLI_PER_GPU
        change = became.astype(np.int64) - self.gpu_whole_free[gpus]
        whole = self.gpu_whole_free.copy()
        whole[gpus] = became
        node_free_gpus = self.node_free_gpus.copy()
        nodes = c.gpu_node[gpus]
        np.add.at(node_free_gpus, nodes, change)
        mem = self.gpu_free_mem_mib.copy()
        used, slices = self.gpu_mig_used, self.mig_slices
        mask = 0
        if job.mig_profile:
            g = int(np.asarray(gpus).reshape(-1)[0])
            used, slices = used.copy(), dict(slices)
            if sign < 0:  # a running job put back (a reprieved victim) keeps its own slices; others take the lowest
                held = self._view.mig_slices.get(job.job_id)
                fits = held is not None and held[0] == g and not int(used[g]) & held[1]
                mask = held[1] if fits else mig_mask(self.cluster, job, g, int(used[g]))
                if not mask:
                    raise ValueError(f"job {job.job_id}: no valid position of {job.mig_profile} is free on GPU {g}")
                slices[job.job_id] = (g, mask)
                used[g] |= mask
            else:
                mask = slices.pop(job.job_id)[1]
                used[g] &= ~mask & ALL_SLICES
        mem[gpus] += sign * held_memory_mib(self.cluster, job, gpus, mask)
        cpu, ram = self.node_free_cpu_milli.copy(), self.node_free_ram_mib.copy()
        add_node_holdings(c, job, nodes, cpu, ram, sign)
        return ResourceState._of(self._view, free, whole, node_free_gpus, self.free_gpus + int(change.sum()), cpu,
                                 ram, self.time_s, mem, used, slices)

    def with_all_released(self, runs: Iterable[RunningJob]) -> ResourceState:
        """:meth:`with_released` of every one of ``runs`` (their GPUs), in one pass."""
        runs = list(runs)
        if not runs:
            return self
        if any(r.job.mig_profile for r in runs):  # MIG masks come back one by one (rare: keep the plain path)
            state = self
            for r in runs:
                state = state.with_released(r.job, r.gpus.index)
            return state
        c = self.cluster
        parts = [_indices(r.gpus.index) for r in runs]
        index = np.concatenate(parts)
        milli = np.repeat([r.job.gpu_milli for r in runs], [len(p) for p in parts])
        mem_held = np.concatenate([np.broadcast_to(held_memory_mib(c, r.job, p), len(p))
                                   for r, p in zip(runs, parts, strict=True)])
        free = self.gpu_free_milli.copy()
        np.add.at(free, index, milli)
        mem = self.gpu_free_mem_mib.copy()
        np.add.at(mem, index, mem_held)
        whole = free == MILLI_PER_GPU
        nodes = c.gpu_node[index]
        cpu, ram = self.node_free_cpu_milli.copy(), self.node_free_ram_mib.copy()
        sizes = [len(p) for p in parts]
        cpu_per_gpu = np.repeat([r.job.cpu_milli_per_gpu for r in runs], sizes)
        ram_per_gpu = np.repeat([r.job.ram_mib_per_gpu for r in runs], sizes)
        np.add.at(cpu, nodes, np.where(c.cpu_modelled[nodes], cpu_per_gpu, 0))
        np.add.at(ram, nodes, np.where(c.ram_modelled[nodes], ram_per_gpu, 0))
        node_free_gpus = np.bincount(c.gpu_node[whole], minlength=c.n_nodes)
        return ResourceState._of(self._view, free, whole, node_free_gpus, int(node_free_gpus.sum()), cpu, ram,
                                 self.time_s, mem, self.gpu_mig_used, self.mig_slices)

    def on_node(self, node: int) -> ResourceState:
        """This state with only ``node``'s GPUs free (every other GPU's free share 0) and the memory and MIG guess
        of the constructor's defaults, at the live view's time: where preemption asks if a job fits on one node."""
        first, last = int(self.cluster.node_first_gpu[node]), int(self.cluster.node_first_gpu[node + 1])
        return node_state(self._view, node, self.gpu_free_milli[first:last], self.node_free_cpu_milli,
                          self.node_free_ram_mib)

    @classmethod
    def now(cls, view: View) -> ResourceState:
        """The view's free resources at this instant."""
        return cls(view, view.gpu_free_milli.copy(), view.node_free_cpu_milli.copy(), view.node_free_ram_mib.copy(),
                   view.time_s, view.gpu_free_mem_mib.copy(), view.gpu_mig_used.copy(), dict(view.mig_slices))


def node_state(view: View, node: int, free_on_node: np.ndarray, node_cpu: np.ndarray,
               node_ram: np.ndarray) -> ResourceState:
    """:meth:`ResourceState.on_node` of a state whose free shares on ``node``'s GPUs are ``free_on_node``
    [milli-GPU] and whose free CPU and RAM per node are ``node_cpu`` and ``node_ram`` (it reads nothing else of
    that state): every other GPU's free share 0, the memory and MIG occupancy the view's, except that entirely free
    GPUs hold none."""
    c = view.cluster
    first, last = int(c.node_first_gpu[node]), int(c.node_first_gpu[node + 1])
    free = np.zeros(c.n_gpus, dtype=free_on_node.dtype)
    free[first:last] = free_on_node
    whole = np.zeros(c.n_gpus, dtype=bool)
    whole[first:last] = on = free_on_node == MILLI_PER_GPU
    node_free_gpus = np.zeros(c.n_nodes, dtype=view.node_free_gpus.dtype)
    node_free_gpus[node] = n_free = int(on.sum())
    mem = view.gpu_free_mem_mib.copy()
    mem[first:last] = np.where(on, c.gpu_memory_mib[first:last], mem[first:last])
    used = view.gpu_mig_used.astype(np.uint8)
    used[first:last] = np.where(on, 0, used[first:last])
    return ResourceState._of(view, free, whole, node_free_gpus, n_free, node_cpu, node_ram, view.time_s, mem, used,
                             dict(view.mig_slices))


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


def add_node_holdings(cluster: ClusterSpec, job: Job, nodes: np.ndarray, cpu: np.ndarray, ram: np.ndarray,
                      sign: int) -> None:
    """Add ``sign`` × the CPU and RAM ``job`` holds per GPU, on ``nodes`` (the node of each of its GPUs), to the
    per-node ``cpu`` and ``ram`` in place: :func:`node_holdings` on the touched nodes only."""
    if job.cpu_milli_per_gpu:
        np.add.at(cpu, nodes, np.where(cluster.cpu_modelled[nodes], sign * job.cpu_milli_per_gpu, 0))
    if job.ram_mib_per_gpu:
        np.add.at(ram, nodes, np.where(cluster.ram_modelled[nodes], sign * job.ram_mib_per_gpu, 0))


def _indices(index: np.ndarray | slice) -> np.ndarray:
    """``index`` (GPU indices or a slice with a stop, as a :class:`~envs.core.allocation.GpuSet` holds them) as an
    array of indices."""
    if isinstance(index, slice):
        return np.arange(index.start or 0, index.stop, index.step or 1)
    return np.asarray(index)
