"""The read-only view of the simulator's state that a policy decides from (SPEC §4)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from envs.allocation import GpuSet
from envs.cluster import ClusterSpec
from envs.job import Job
from envs.joblog import JobRecord

if TYPE_CHECKING:
    from envs.simulator import Simulator


class RunningJob(NamedTuple):
    """A job that holds GPUs, as a real scheduler knows it: its expected end comes from the requested wall time."""

    job: Job
    start_time_s: float
    expected_end_s: float  # start + requested wall time [s]
    gpus: GpuSet


class View:
    """Live, read-only window on one simulator: every attribute reflects the current state, nothing can change it.

    Arrays are numpy views with the write flag off; mappings are read-only proxies, iterated in queue order.
    """

    __slots__ = ("_memo", "_memo_version", "_sim", "cluster", "gpu_free_milli", "gpu_whole_free",
                 "node_free_cpu_milli", "node_free_gpus", "node_free_ram_mib", "node_up", "pending", "running")

    def __init__(self, sim: Simulator) -> None:
        self._sim = sim
        self._memo: dict[object, np.ndarray] = {}
        self._memo_version = -1
        self.cluster: ClusterSpec = sim.cluster
        self.pending: Mapping[int, Job] = sim._pending_view
        self.running: Mapping[int, RunningJob] = sim._running_view
        self.gpu_free_milli: np.ndarray = _read_only(sim._gpu_free_milli)  # free share per GPU [milli-GPU]
        self.gpu_whole_free: np.ndarray = _read_only(sim._gpu_whole_free)  # GPU is entirely free
        self.node_free_gpus: np.ndarray = _read_only(sim._node_free_gpus)  # fully free GPUs per node
        self.node_free_cpu_milli: np.ndarray = _read_only(sim._node_free_cpu)  # [milli-cores]
        self.node_free_ram_mib: np.ndarray = _read_only(sim._node_free_ram)  # [MiB]
        self.node_up: np.ndarray = _read_only(sim._node_up)  # health per node

    @property
    def time_s(self) -> float:
        """Current simulated time [s]."""
        return self._sim.time_s

    @property
    def free_gpus(self) -> int:
        """Number of fully free GPUs in the cluster."""
        return self._sim._free_gpus

    @property
    def events_left(self) -> bool:
        """False when waiting now would stall the simulation (nothing running, no future arrival)."""
        return self._sim.events_left

    @property
    def all_nodes_up(self) -> bool:
        """True when every node is healthy."""
        return self._sim._all_nodes_up

    @property
    def scheduler_up(self) -> bool:
        """False while the scheduler is down (no job may start)."""
        return self._sim._scheduler_up

    def memoized(self, key: object, compute: Callable[[], np.ndarray]) -> np.ndarray:
        """``compute()`` once per state of the holdings: placement rules share derived arrays through this.

        The returned array is read-only; it is recomputed after any start or completion.
        """
        if self._memo_version != self._sim._version:
            self._memo.clear()
            self._memo_version = self._sim._version
        value = self._memo.get(key)
        if value is None:
            value = compute()
            value.setflags(write=False)
            self._memo[key] = value
        return value

    @property
    def n_ended(self) -> int:
        """Jobs ended so far (completed or rejected)."""
        return len(self._sim._records)

    def ended_since(self, index: int) -> tuple[JobRecord, ...]:
        """Records of the jobs that ended after the first ``index`` (in end order): what a tracker has not seen."""
        return tuple(self._sim._records[index:])

    def has_dataset(self, node: int, dataset_id: str) -> bool:
        """True when ``dataset_id`` is in the cache of node ``node``."""
        return dataset_id in self._sim._caches[node]


def _read_only(a: np.ndarray) -> np.ndarray:
    v = a.view()
    v.setflags(write=False)
    return v
