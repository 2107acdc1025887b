"""The static description of a GPU cluster: nodes, GPUs, NVLink islands and racks.

A cluster is immutable. Its GPUs are numbered globally, node by node (node 0's GPUs first), and the flat numpy
arrays built here (``gpu_node``, ``gpu_island``, ...) are what the simulator and the placement rules index.
Resources: every GPU has a capacity of 1000 milli-GPU and its type's memory (counted in MiB, ``round(GiB × 1024)``,
for exact sums); CPUs are counted in milli-cores and RAM in MiB. GPUs of a MIG-capable type (:mod:`envs.core.mig`)
start in MIG mode or in full mode, as their node says (``NodeSpec.mig``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from envs.core.errors import ConfigError
from envs.core.governance import NO_GOVERNANCE, Governance
from envs.core.gpu_types import DEFAULT_GPU_TYPES, GPUType
from envs.core.mig import DEFAULT_MIG_RECONFIG_S, MIG_GEOMETRIES

MILLI_PER_GPU = 1000
"""Capacity of one GPU in milli-GPU; fractional jobs ask for a share of it."""

MAX_GPUS = 1_000_000
"""The largest cluster modelled, in GPUs (or SWF processors): a larger one is a configuration error, not a hang."""
MAX_NODES = 100_000
"""The most nodes a cluster may have."""


@dataclass(frozen=True, slots=True)
class NodeSpec:
    """One machine of the cluster."""

    name: str
    gpu_type: str
    n_gpus: int
    islands: tuple[tuple[int, ...], ...]  # partition of the local GPU indices 0..n_gpus-1 into NVLink islands
    cpu_milli: int = 0  # CPU capacity [milli-cores]; 0 means CPUs are not modelled
    ram_mib: int = 0  # RAM capacity [MiB]; 0 means RAM is not modelled
    rack: int = 0  # rack (top-of-rack switch) id
    cache_gib: float = 0.0  # dataset cache capacity [GiB]; 0 means no cache
    mig: bool = False  # its GPUs start in MIG mode (the type must be MIG-capable); else in full mode

    def __post_init__(self) -> None:
        where = f"node {self.name!r}"
        if self.n_gpus < 1:
            raise ConfigError(f"{where}: gpus: must be >= 1, got {self.n_gpus}")
        flat = sorted(i for island in self.islands for i in island)
        if flat != list(range(self.n_gpus)) or any(len(island) == 0 for island in self.islands):
            raise ConfigError(
                f"{where}: islands: must partition the GPU indices 0..{self.n_gpus - 1} into non-empty "
                f"groups, got {[list(i) for i in self.islands]}"
            )
        for key in ("cpu_milli", "ram_mib", "rack"):
            if getattr(self, key) < 0:
                raise ConfigError(f"{where}: {key}: must be >= 0, got {getattr(self, key)}")
        if self.cache_gib < 0:
            raise ConfigError(f"{where}: cache_gib: must be >= 0, got {self.cache_gib}")


def even_islands(n_gpus: int, island_size: int) -> tuple[tuple[int, ...], ...]:
    """Split GPUs 0..n_gpus-1 into consecutive NVLink islands of ``island_size`` GPUs."""
    if island_size < 1 or n_gpus % island_size:
        raise ConfigError(f"island_size: must divide gpus ({n_gpus}), got {island_size}")
    return tuple(tuple(range(s, s + island_size)) for s in range(0, n_gpus, island_size))


@dataclass(frozen=True)
class ClusterSpec:
    """A cluster: its nodes, the GPU-type table they refer to, and its partitions and quotas."""

    name: str
    nodes: tuple[NodeSpec, ...]
    gpu_types: Mapping[str, GPUType] = field(default_factory=lambda: dict(DEFAULT_GPU_TYPES))
    governance: Governance = NO_GOVERNANCE
    mig_reconfig_s: float = DEFAULT_MIG_RECONFIG_S  # cost of switching an empty GPU's MIG mode [s], paid by its job

    def __post_init__(self) -> None:
        if not self.nodes:
            raise ConfigError(f"cluster {self.name!r}: nodes: a cluster needs at least one node")
        if len(self.nodes) > MAX_NODES or sum(n.n_gpus for n in self.nodes) > MAX_GPUS:
            raise ConfigError(f"cluster {self.name!r}: more than {MAX_NODES:,} nodes or {MAX_GPUS:,} GPUs")
        names = [n.name for n in self.nodes]
        if len(set(names)) != len(names):
            dup = next(n for n in names if names.count(n) > 1)
            raise ConfigError(f"cluster {self.name!r}: node name {dup!r} is used twice")
        for node in self.nodes:
            if node.gpu_type not in self.gpu_types:
                raise ConfigError(
                    f"cluster {self.name!r}: node {node.name!r}: gpu_type: unknown type {node.gpu_type!r} "
                    f"(known: {', '.join(sorted(self.gpu_types))})"
                )
            if node.mig and node.gpu_type not in MIG_GEOMETRIES:
                raise ConfigError(
                    f"cluster {self.name!r}: node {node.name!r}: mig: type {node.gpu_type!r} is not MIG-capable "
                    f"(MIG-capable: {', '.join(MIG_GEOMETRIES)})"
                )
        if not (self.mig_reconfig_s >= 0 and self.mig_reconfig_s < float("inf")):
            raise ConfigError(f"cluster {self.name!r}: mig_reconfig_s: must be finite and >= 0, "
                              f"got {self.mig_reconfig_s}")
        for partition in self.governance.partitions:
            if partition.nodes and partition.nodes[-1] >= len(self.nodes):
                raise ConfigError(f"cluster {self.name!r}: partition {partition.name!r}: node index out of range")

    # ---- sizes -------------------------------------------------------------------------------------------
    @property
    def n_nodes(self) -> int:
        """Number of nodes."""
        return len(self.nodes)

    @cached_property
    def n_gpus(self) -> int:
        """Number of GPUs in the cluster."""
        return int(sum(n.n_gpus for n in self.nodes))

    @cached_property
    def n_racks(self) -> int:
        """Number of distinct racks."""
        return len({n.rack for n in self.nodes})

    # ---- flat per-GPU and per-node arrays (read-only) -----------------------------------------------------
    @cached_property
    def gpu_node(self) -> np.ndarray:
        """Node index of every GPU, shape (n_gpus,)."""
        return _frozen(np.repeat(np.arange(self.n_nodes), [n.n_gpus for n in self.nodes]))

    @cached_property
    def node_first_gpu(self) -> np.ndarray:
        """Global index of each node's GPU 0, shape (n_nodes + 1,); the last entry is n_gpus."""
        return _frozen(np.concatenate([[0], np.cumsum([n.n_gpus for n in self.nodes])]))

    @cached_property
    def gpu_island(self) -> np.ndarray:
        """Cluster-wide NVLink-island id of every GPU, shape (n_gpus,)."""
        out = np.empty(self.n_gpus, dtype=np.int64)
        island_id = 0
        for node, first in zip(self.nodes, self.node_first_gpu[:-1], strict=True):
            for island in node.islands:
                out[[first + i for i in island]] = island_id
                island_id += 1
        return _frozen(out)

    @cached_property
    def islands_contiguous(self) -> bool:
        """True when every NVLink island is a run of consecutive GPU indices (then an ascending allocation lies in
        one island iff its first and last GPU do)."""
        return all(list(island) == list(range(island[0], island[0] + len(island)))
                   for node in self.nodes for island in (sorted(i) for i in node.islands))

    @cached_property
    def node_rack(self) -> np.ndarray:
        """Rack of every node, shape (n_nodes,)."""
        return _frozen(np.array([n.rack for n in self.nodes], dtype=np.int64))

    @cached_property
    def node_n_gpus(self) -> np.ndarray:
        """GPU count of every node, shape (n_nodes,)."""
        return _frozen(np.array([n.n_gpus for n in self.nodes], dtype=np.int64))

    @cached_property
    def node_cpu_milli(self) -> np.ndarray:
        """CPU capacity of every node [milli-cores], shape (n_nodes,)."""
        return _frozen(np.array([n.cpu_milli for n in self.nodes], dtype=np.int64))

    @cached_property
    def node_ram_mib(self) -> np.ndarray:
        """RAM capacity of every node [MiB], shape (n_nodes,)."""
        return _frozen(np.array([n.ram_mib for n in self.nodes], dtype=np.int64))

    @cached_property
    def cpu_modelled(self) -> np.ndarray:
        """Per node: True when its CPUs are modelled (capacity > 0); jobs' CPU needs are ignored elsewhere."""
        return _frozen(self.node_cpu_milli > 0)

    @cached_property
    def ram_modelled(self) -> np.ndarray:
        """Per node: True when its RAM is modelled (capacity > 0)."""
        return _frozen(self.node_ram_mib > 0)

    @cached_property
    def type_names(self) -> tuple[str, ...]:
        """Names of the GPU types present in the cluster, sorted; ``gpu_type_index`` indexes this tuple."""
        return tuple(sorted({n.gpu_type for n in self.nodes}))

    @cached_property
    def node_type_index(self) -> np.ndarray:
        """Index into ``type_names`` of every node's GPU type, shape (n_nodes,)."""
        index = {name: i for i, name in enumerate(self.type_names)}
        return _frozen(np.array([index[n.gpu_type] for n in self.nodes], dtype=np.int64))

    @cached_property
    def type_speed(self) -> np.ndarray:
        """Speed factor of each type in ``type_names``."""
        return _frozen(np.array([self.gpu_types[t].speed for t in self.type_names], dtype=np.float64))

    @cached_property
    def node_speed(self) -> np.ndarray:
        """Speed factor of every node's GPU type, shape (n_nodes,)."""
        return _frozen(self.type_speed[self.node_type_index])

    @cached_property
    def type_memory_gib(self) -> np.ndarray:
        """Memory [GiB] of each type in ``type_names``."""
        return _frozen(np.array([self.gpu_types[t].memory_gib for t in self.type_names], dtype=np.float64))

    @cached_property
    def gpu_memory_mib(self) -> np.ndarray:
        """Memory of every GPU [MiB] (its type's memory, ``round(GiB × 1024)``), shape (n_gpus,)."""
        per_type = np.array([round(self.gpu_types[t].memory_gib * 1024) for t in self.type_names], dtype=np.int64)
        return _frozen(per_type[self.node_type_index][self.gpu_node])

    # ---- MIG ---------------------------------------------------------------------------------------------------
    @cached_property
    def mig_types(self) -> tuple[str, ...]:
        """The MIG-capable GPU types present in the cluster, sorted; ``gpu_mig_geometry`` indexes this tuple."""
        return tuple(t for t in self.type_names if t in MIG_GEOMETRIES)

    @property
    def has_mig(self) -> bool:
        """True when some GPU of the cluster is MIG-capable."""
        return bool(self.mig_types)

    @cached_property
    def gpu_mig_geometry(self) -> np.ndarray:
        """Per GPU: index into ``mig_types`` of its type, or ``len(mig_types)`` when it is not MIG-capable (the row
        of :meth:`mig_table` that offers nothing)."""
        index = {t: i for i, t in enumerate(self.mig_types)}
        per_type = np.array([index.get(t, len(self.mig_types)) for t in self.type_names], dtype=np.int64)
        return _frozen(per_type[self.node_type_index][self.gpu_node])

    @cached_property
    def gpu_mig_initial(self) -> np.ndarray:
        """Per GPU: True when it starts in MIG mode."""
        return _frozen(np.repeat([n.mig for n in self.nodes], [n.n_gpus for n in self.nodes]).astype(bool))

    def mig_table(self, kind: str, profile: str) -> np.ndarray:
        """Stacked lookup table (one row per ``mig_types`` entry, then one for types without MIG) of shape
        (len(mig_types) + 1, 256), indexed ``[gpu_mig_geometry[g], occupancy mask]``: ``"lowest"`` the lowest free
        valid position of ``profile`` (-1: none), ``"mask"`` the slices an instance there takes (0: none),
        ``"stranded"`` the free compute slices no free position of it
        covers, ``"placements"`` (``profile`` ignored) the (profile, position) instances still possible."""
        key = (kind, profile)
        table = self._mig_tables.get(key)
        if table is None:
            rows = []
            for t in self.mig_types:
                geometry = MIG_GEOMETRIES[t]
                rows.append(geometry.lowest_position_table(profile) if kind == "lowest" else
                            geometry.mask_table(profile) if kind == "mask" else
                            geometry.stranded_compute_table(profile) if kind == "stranded" else
                            geometry.placements_table)
            fill = -1 if kind == "lowest" else 0
            rows.append(np.full(256, fill, dtype=np.int64))
            table = self._mig_tables[key] = _frozen(np.stack(rows))
        return table

    @cached_property
    def _mig_tables(self) -> dict[tuple[str, str], np.ndarray]:
        return {}

    def eligible_nodes(self, gpu_types: frozenset[str], gpu_mem_gib: float, partition: str = "",
                       mig_profile: str = "") -> np.ndarray:
        """Boolean mask over nodes whose GPU type is allowed (empty set = any) and has >= ``gpu_mem_gib``, inside
        the nodes of a job naming ``partition`` (where the cluster has partitions; an unknown one has no node), and
        offers MIG profile ``mig_profile`` (canonical name; "" for a job that asks for none)."""
        key = (gpu_types, gpu_mem_gib, partition, mig_profile)
        cache = self._eligible_cache
        mask = cache.get(key)
        if mask is None:
            ok_type = np.array(
                [(not gpu_types or t in gpu_types)
                 and (not mig_profile or (t in MIG_GEOMETRIES and MIG_GEOMETRIES[t].profile(mig_profile) is not None))
                 for t in self.type_names], dtype=bool
            ) & (self.type_memory_gib >= gpu_mem_gib)
            mask = ok_type[self.node_type_index]
            if self.governance.partitions:
                mask = mask & self.partition_nodes(partition)
            mask = _frozen(mask)
            cache[key] = mask
        return mask

    def partition_nodes(self, partition: str) -> np.ndarray:
        """Boolean mask over the nodes a job naming ``partition`` may use: the partition's nodes (its default one
        for ``""``); every node when the cluster has no partitions or no default; none for an unknown name."""
        mask = np.ones(self.n_nodes, dtype=bool)
        if not self.governance.partitions:
            return mask
        found = self.governance.partition(partition)
        if found is None:
            mask[:] = not partition
        else:
            mask[:] = False
            mask[list(found.nodes)] = True
        return mask

    @cached_property
    def _eligible_cache(self) -> dict[tuple[frozenset[str], float, str, str], np.ndarray]:
        return {}

    def describe(self) -> str:
        """One line: name, nodes, GPUs by type, racks."""
        by_type: dict[str, int] = {}
        for n in self.nodes:
            by_type[n.gpu_type] = by_type.get(n.gpu_type, 0) + n.n_gpus
        mix = ", ".join(f"{k}: {v}" for k, v in sorted(by_type.items()))
        return f"{self.name}: {self.n_nodes} nodes, {self.n_gpus} GPUs ({mix}), {self.n_racks} racks"


def swf_machine(n_procs: int, name: str = "swf") -> ClusterSpec:
    """The machine of an SWF trace: one node of ``n_procs`` identical single-GPU-equivalent processors.

    Topology is flat (one island, one rack) and the type ``proc`` has speed 1, so with staging off the runtime
    model reduces to plain rigid-job scheduling.
    """
    if not 1 <= n_procs <= MAX_GPUS:
        raise ConfigError(f"swf machine: processors: must be in 1..{MAX_GPUS:,}, got {n_procs:g}")
    node = NodeSpec(name="procs", gpu_type="proc", n_gpus=n_procs, islands=(tuple(range(n_procs)),))
    return ClusterSpec(name=name, nodes=(node,))


def merge_gpu_types(overrides: Sequence[GPUType]) -> dict[str, GPUType]:
    """The default GPU-type table with ``overrides`` added or replacing entries of the same name."""
    table = dict(DEFAULT_GPU_TYPES)
    table.update({t.name: t for t in overrides})
    return table


def _frozen(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a
