"""GPU nodes as cluster operators export them (Slurm's ``scontrol`` / ``sinfo``, Kubernetes' ``kubectl``), and the
:class:`~envs.core.cluster.ClusterSpec` built from them; also the GPU model names those exports (and ``sacct``) use,
resolved to the GPU-type table.

**GPU model names** (:func:`gpu_type_for`). An export names a GPU model its own way: a Slurm gres type (``a100``,
``a100_80gb``, ``v100``, whatever the site configured) or a Kubernetes product label (``NVIDIA-A100-SXM4-80GB``,
``Tesla-V100-SXM2-16GB``). A name resolves to a type of the table (by default
:data:`~envs.core.gpu_types.DEFAULT_GPU_TYPES`) by, in this order:

1. the same name, case aside (``v100`` → ``V100``, ``h100`` → ``H100``, ``a100-80gb`` → ``A100-80GB``), also after
   dropping a leading ``NVIDIA-`` / ``Tesla-`` (``NVIDIA-H100`` → ``H100``);
2. the model family (the first letters-then-digits run: ``a100``, ``v100``, ``h100``, ``t4``) and the memory, which is
   a size token in the name (``80gb``, ``40g``) or, for Kubernetes, the ``nvidia.com/gpu.memory`` label [MiB]: the
   family's type whose memory is within 10 % (``NVIDIA-A100-SXM4-80GB`` → ``A100-80GB``; ``NVIDIA-H100-80GB-HBM3``
   with 81,559 MiB → ``H100``). Without a memory figure the family's type named like the family (``V100``), else its
   smallest (a bare ``a100`` → ``A100-40GB``, the original A100; name the memory, ``a100_80gb``, for the other);
3. otherwise a new type of that exact name, speed 1 (the reference type's) and the memory the name or label gives,
   else :data:`UNKNOWN_GPU_MEMORY_GIB`. Untyped GPUs (Slurm ``gpu:8``, a Kubernetes node without a product label)
   are the type :data:`UNTYPED_GPU` (``gpu``), speed 1 and :data:`UNKNOWN_GPU_MEMORY_GIB`.

A type table passed to a loader (``gpu_types=``) is searched the same way, so a site can give its own names,
memories and speeds; the built-in speed factors are illustrative (:mod:`envs.core.gpu_types`).

**The cluster** (:meth:`NodeInventory.cluster`): one :class:`~envs.core.cluster.NodeSpec` per GPU node, in the order
of the export; every node is one NVLink island (no export says more); ``rack`` = GPU-node index //
:data:`~envs.workload.openb.NODES_PER_RACK`, an illustrative 32 nodes per rack (as for openb); CPU [milli-cores]
and RAM [MiB] as the export gives them (0: not modelled); no dataset cache. Nodes without GPUs are left out and
counted in :attr:`NodeInventory.skipped` by reason. Partitions (Slurm partitions, Kubernetes node pools) become the
cluster's :class:`~envs.core.governance.Partition` entries, in order of first appearance, with their GPU nodes only
(a partition without a GPU node is dropped), priority tier 0, no time limit and every team allowed: node exports do
not carry partition limits. A partition the export marks as the default (``sinfo``'s ``*``) is the default one;
otherwise jobs that name no partition may run anywhere. A node repeated, more than 256 GPUs in a node, and an
export without a GPU node are malformed (:class:`~envs.core.errors.TraceFormatError`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from envs.core.cluster import ClusterSpec, NodeSpec, even_islands
from envs.core.errors import ConfigError, TraceFormatError
from envs.core.governance import Governance, Partition
from envs.core.gpu_types import DEFAULT_GPU_TYPES, GPUType
from envs.workload.openb import MAX_GPUS_PER_NODE, NODES_PER_RACK
from envs.workload.reader import show, trace_name

UNTYPED_GPU = "gpu"
"""The type name of GPUs an export does not name (Slurm's untyped ``gpu:N``)."""

UNKNOWN_GPU_MEMORY_GIB = 16.0
"""Memory [GiB] given to a GPU type whose memory no export says: the smallest of the built-in data-center types
(V100, T4), so that a job needing more GPU memory than is known to be there is not placed on it."""

MEMORY_TOLERANCE = 0.1
"""How far (a fraction of the type's memory) a reported GPU memory may be from a type's to match it: GPUs report a
little less than their nominal size (an H100 80GB reports 81,559 MiB, a V100 16GB 16,160 MiB)."""

_VENDOR_PREFIX = re.compile(r"^(?:nvidia|tesla)[-_ ]+")
_FAMILY = re.compile(r"^[a-z]+[0-9]+")
_SIZE_TOKEN = re.compile(r"(?:^|[-_ .])([0-9]+)gb?(?=$|[-_ .])")


def _normalized(name: str) -> str:
    text = name.strip().lower()
    while (stripped := _VENDOR_PREFIX.sub("", text)) != text:
        text = stripped
    return text


def _family(normalized: str) -> str | None:
    match = _FAMILY.match(normalized)
    return match.group() if match else None


def gpu_type_for(name: str, table: Mapping[str, GPUType], memory_mib: float | None = None) -> GPUType:
    """The GPU type of ``table`` that a model called ``name`` is (see the module docstring), else a new type (which
    the caller adds to its table). ``memory_mib``: the memory a GPU of it reports, when the export says."""
    raw = name.strip()
    if not raw:
        return table.get(UNTYPED_GPU) or GPUType(UNTYPED_GPU, UNKNOWN_GPU_MEMORY_GIB, 1.0)
    norm = _normalized(raw)
    for type_name, gpu_type in table.items():
        if type_name.lower() == raw.lower() or _normalized(type_name) == norm:
            return gpu_type
    size = _SIZE_TOKEN.search(norm)
    memory_gib = float(size.group(1)) if size else memory_mib / 1024 if memory_mib else None
    family = _family(norm)
    candidates = [t for t in table.values() if family is not None and _family(_normalized(t.name)) == family]
    if memory_gib is not None:
        close = [t for t in candidates if abs(t.memory_gib - memory_gib) <= MEMORY_TOLERANCE * t.memory_gib]
        if close:
            return min(close, key=lambda t: (abs(t.memory_gib - memory_gib), t.name))
    elif candidates:
        named = [t for t in candidates if _normalized(t.name) == family]
        return named[0] if named else min(candidates, key=lambda t: (t.memory_gib, t.name))
    return GPUType(raw, memory_gib if memory_gib else UNKNOWN_GPU_MEMORY_GIB, 1.0)


@dataclass(frozen=True, slots=True)
class GpuNode:
    """One GPU node of an export, its GPU type already resolved."""

    name: str
    gpu_type: str  # a key of the inventory's gpu_types
    n_gpus: int
    cpu_milli: int  # [milli-cores]; 0: not modelled
    ram_mib: int  # [MiB]; 0: not modelled
    line: int  # where the export describes the node (1-based)
    partitions: tuple[str, ...] = ()  # Slurm partitions / Kubernetes node pools, in the export's order
    mig: bool = False  # its GPUs start in MIG mode


@dataclass
class NodeInventory:
    """The GPU nodes an export lists, the GPU-type table they refer to, and the nodes left out by reason."""

    source: str  # the file read
    gpu_types: dict[str, GPUType]  # the loader's table plus the types the export added
    nodes: list[GpuNode] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)  # nodes left out, by reason (no_gpus, ...)
    default_partition: str = ""  # the partition the export marks as the default; "" for none
    last_line: int = 1  # the export's last line read (where a "no GPU node" error points)

    def resolve(self, model: str, memory_mib: float | None = None) -> str:
        """The type name of GPU model ``model`` (:func:`gpu_type_for`), adding a new type to the table."""
        gpu_type = gpu_type_for(model, self.gpu_types, memory_mib)
        self.gpu_types.setdefault(gpu_type.name, gpu_type)
        return gpu_type.name

    def skip(self, reason: str) -> None:
        """Count one node left out under ``reason``."""
        self.skipped[reason] = self.skipped.get(reason, 0) + 1

    def cluster(self) -> ClusterSpec:
        """The cluster of the GPU nodes (see the module docstring)."""
        if not self.nodes:
            counts = ", ".join(f"{n} {reason}" for reason, n in sorted(self.skipped.items())) or "no node at all"
            raise TraceFormatError(self.source, self.last_line, f"the export lists no GPU node ({counts})")
        specs: list[NodeSpec] = []
        first_line: dict[str, int] = {}
        members: dict[str, list[int]] = {}
        for index, node in enumerate(self.nodes):
            first = first_line.get(node.name)
            if first is not None:
                raise TraceFormatError(
                    self.source, node.line, f"node {show(node.name)} repeats the node of line {first}"
                )
            first_line[node.name] = node.line
            if node.n_gpus > MAX_GPUS_PER_NODE:
                raise TraceFormatError(
                    self.source, node.line, f"{node.n_gpus} GPUs in one node: at most {MAX_GPUS_PER_NODE}"
                )
            try:
                specs.append(
                    NodeSpec(
                        name=node.name,
                        gpu_type=node.gpu_type,
                        n_gpus=node.n_gpus,
                        islands=even_islands(node.n_gpus, node.n_gpus),
                        cpu_milli=node.cpu_milli,
                        ram_mib=node.ram_mib,
                        rack=index // NODES_PER_RACK,
                        mig=node.mig,
                    )
                )
            except ConfigError as exc:
                raise TraceFormatError(self.source, node.line, str(exc)) from None
            for partition in dict.fromkeys(node.partitions):
                members.setdefault(partition, []).append(index)
        partitions = tuple(
            Partition(name, tuple(nodes), default=name == self.default_partition) for name, nodes in members.items()
        )
        try:
            return ClusterSpec(
                name=cluster_name(self.source),
                nodes=tuple(specs),
                gpu_types=dict(self.gpu_types),
                governance=Governance(partitions),
            )
        except ConfigError as exc:  # node by node checks above; kept so that no ConfigError leaks
            raise TraceFormatError(self.source, self.last_line, str(exc)) from None


def new_inventory(path: str | Path, gpu_types: Mapping[str, GPUType] | None) -> NodeInventory:
    """An empty inventory of ``path`` over a copy of ``gpu_types`` (default: the built-in table)."""
    return NodeInventory(str(path), dict(DEFAULT_GPU_TYPES if gpu_types is None else gpu_types))


def cluster_name(path: str | Path) -> str:
    """A cluster name from an export's file name: ``kubectl_nodes.json.gz`` → ``kubectl_nodes``."""
    return trace_name(path).removesuffix(".json") or "cluster"
