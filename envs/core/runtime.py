"""The runtime model: how long a job runs on a given allocation (SPEC §3).

effective runtime = base runtime / speed of the slowest GPU type in the allocation × topology factor + staging.

Topology factor, with the job's communication sensitivity c in [0, 1]:

============================  ===================
allocation spans              factor
============================  ===================
one NVLink island             1
islands of one node (PCIe)    1 + c · a_pcie
nodes of one rack             1 + c · a_net
several racks                 1 + c · a_xrack
============================  ===================

Staging: when the job's dataset is missing from the cache of any node it runs on, the dataset is copied to those
nodes in parallel, taking dataset_gib / staging_gib_per_s seconds before the job computes.

The defaults (a_pcie 0.15, a_net 0.5, a_xrack 0.8, 1 GiB/s) are illustrative, in the range reported for
data-parallel training of communication-heavy models (e.g. Tiresias, Gandiva, Themis); override them per
experiment. With every switch off the model reduces to rigid-job scheduling: effective runtime = base runtime.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from envs.core.cluster import ClusterSpec
from envs.core.errors import ConfigError, check_keys
from envs.core.job import Job
from envs.core.joblog import TopologyLevel

RUNTIME_MODELS = ("full", "rigid")
"""Names of the runtime models :meth:`RuntimeConfig.named` builds: every factor on, or every factor off."""


@dataclass(frozen=True, slots=True)
class RuntimeConfig:
    """Switches and constants of the runtime model."""

    use_speed: bool = True  # divide by the slowest GPU type's speed factor
    use_topology: bool = True  # multiply by the topology factor
    use_staging: bool = True  # add data staging time on cache misses
    a_pcie: float = 0.15  # slowdown per unit of comm sensitivity across NVLink islands of one node
    a_net: float = 0.5  # ... across nodes of one rack
    a_xrack: float = 0.8  # ... across racks
    staging_gib_per_s: float = 1.0  # staging bandwidth per node [GiB/s]
    kill_at_walltime: bool = False  # end a job at its requested wall time (Slurm's time limit)

    def __post_init__(self) -> None:
        for key in ("a_pcie", "a_net", "a_xrack"):
            if not getattr(self, key) >= 0:
                raise ConfigError(f"runtime.{key}: must be >= 0, got {getattr(self, key)}")
        if not self.staging_gib_per_s > 0:
            raise ConfigError(f"runtime.staging_gib_per_s: must be > 0, got {self.staging_gib_per_s}")

    @classmethod
    def rigid(cls) -> RuntimeConfig:
        """Every factor off: the plain rigid-job model that SWF studies assume."""
        return cls(use_speed=False, use_topology=False, use_staging=False)

    @classmethod
    def named(cls, name: str) -> RuntimeConfig:
        """The runtime model called ``name`` (one of :data:`RUNTIME_MODELS`): ``"full"`` has every factor on,
        ``"rigid"`` every factor off."""
        if name not in RUNTIME_MODELS:
            raise ConfigError(f"runtime model {name!r}: must be one of {', '.join(RUNTIME_MODELS)}")
        return cls() if name == "full" else cls.rigid()

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> RuntimeConfig:
        """Build from a mapping; unknown keys are a :class:`ConfigError` naming the key."""
        check_keys(data, (f.name for f in fields(cls)), "runtime")
        return cls(**data)  # type: ignore[arg-type]

    def topology_factor(self, level: TopologyLevel, comm_sensitivity: float) -> float:
        """The slowdown factor (>= 1) of spreading a job with sensitivity c over ``level``."""
        if not self.use_topology or level is TopologyLevel.ISLAND:
            return 1.0
        alpha = (0.0, self.a_pcie, self.a_net, self.a_xrack)[level]
        return 1.0 + comm_sensitivity * alpha


def topology_level(cluster: ClusterSpec, gpus: np.ndarray | slice, nodes: list[int]) -> TopologyLevel:
    """The widest interconnect of an allocation: ascending GPU indices (or a slice) and its distinct nodes."""
    if cluster.islands_contiguous:  # one island iff the first and last GPU share it
        lo, hi = (gpus.start, gpus.stop - 1) if isinstance(gpus, slice) else (gpus[0], gpus[-1])
        one_island = cluster.gpu_island[lo] == cluster.gpu_island[hi]
    else:
        islands = cluster.gpu_island[gpus]
        one_island = bool((islands == islands[0]).all())
    if one_island:
        return TopologyLevel.ISLAND
    if len(nodes) == 1:
        return TopologyLevel.NODE
    racks = {cluster.nodes[n].rack for n in nodes}
    return TopologyLevel.RACK if len(racks) == 1 else TopologyLevel.CROSS_RACK


def allocation_speed(cluster: ClusterSpec, job: Job, nodes: list[int]) -> float:
    """Speed factor of ``job`` on ``nodes``: the slowest GPU type among them (the job's own speeds override)."""
    if not job.type_speeds:
        speeds = cluster.node_speed
        return float(speeds[nodes[0]]) if len(nodes) == 1 else float(speeds[nodes].min())
    types = {cluster.nodes[n].gpu_type for n in nodes}
    overrides = dict(job.type_speeds)
    return min(overrides.get(t, cluster.gpu_types[t].speed) for t in types)
