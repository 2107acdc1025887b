"""Cluster presets: YAML files under ``configs/clusters/`` turned into :class:`~envs.core.cluster.ClusterSpec`.

Other cluster specs (``swf:N``, ``openb:NODE_LIST.csv``) are read by :func:`envs.scenario.load_cluster`.

A preset file holds::

    name: tiny
    gpu_types:              # optional: add or override entries of the default GPU-type table
      A100-40GB: {memory_gib: 40, speed: 1.0}
    node_groups:
      - name: a100          # nodes are named NAME-0, NAME-1, ...
        count: 2
        gpu_type: A100-40GB
        gpus: 4
        island_size: 2      # or islands: [[0, 1], [2, 3]]  (default: one island of all GPUs)
        cpus: 32            # [cores]      (default 0: not modelled)
        ram_gib: 256        # [GiB]        (default 0: not modelled)
        rack: 0             # or racks: [0, 1] to spread the group over racks in contiguous blocks
        cache_gib: 100      # dataset cache per node [GiB] (default 0: no cache)
        mig: false          # its GPUs start in MIG mode (a MIG-capable type only; default false: full mode)
    mig_reconfig_s: 30      # optional: cost of switching an empty GPU's MIG mode [s] (envs.core.mig)
    partitions: [...]       # optional: partitions and quotas, as :mod:`envs.core.governance` describes
    quotas: {...}

Unknown keys and impossible values raise :class:`~envs.core.errors.ConfigError` naming the file and the key.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import BeforeValidator, Field

from envs.core.cluster import MAX_GPUS, MAX_NODES, ClusterSpec, NodeSpec, even_islands, merge_gpu_types
from envs.core.errors import ConfigError
from envs.core.files import names_a_file, read_yaml
from envs.core.governance import governance_from_dict
from envs.core.gpu_types import GPUType
from envs.core.schema import FileModel, validated


def preset_names() -> list[str]:
    """Names of the cluster presets shipped in ``configs/clusters/``."""
    folder = resources.files("configs") / "clusters"
    return sorted(p.name[: -len(".yaml")] for p in folder.iterdir() if p.name.endswith(".yaml"))


def load_preset(spec: str | Path) -> ClusterSpec:
    """A cluster preset by name (``tiny`` is ``configs/clusters/tiny.yaml``) or a preset file by path."""
    text = str(spec)
    if not text:
        raise ConfigError(f"cluster: empty name (known presets: {', '.join(preset_names())})")
    if names_a_file(text):
        return cluster_from_yaml(text)
    resource = resources.files("configs") / "clusters" / f"{text}.yaml"
    if not resource.is_file():
        raise ConfigError(f"cluster {text!r}: no such preset (known: {', '.join(preset_names())}) and no such file")
    return cluster_from_dict(yaml.safe_load(resource.read_text()), where=f"{text}.yaml")


def cluster_from_yaml(path: str | Path) -> ClusterSpec:
    """Read a cluster preset file."""
    path = Path(path)
    return cluster_from_dict(read_yaml(path, "cluster file"), where=path.name)


def _whole(value: Any) -> Any:
    """An integral float (YAML reads ``1.0e+3`` as one) as an int; anything else as it is, for the strict check."""
    return int(value) if isinstance(value, float) and value.is_integer() and abs(value) < 2**63 else value


Whole = Annotated[int, BeforeValidator(_whole)]
Count = Annotated[Whole, Field(ge=0)]


class GpuTypeFile(FileModel):
    """``gpu_types: NAME:``: a GPU type's memory and relative speed."""

    memory_gib: Annotated[float, Field(ge=0, le=1e6, description="[GiB]")]
    speed: Annotated[float, Field(ge=1e-3, le=1e3, description="relative to 1.0")]


class NodeGroupFile(FileModel):
    """``node_groups[i]``: ``count`` identical nodes named ``NAME-0``, ``NAME-1``, ..."""

    name: str | None = None
    count: Annotated[Whole, Field(ge=1, le=MAX_NODES)]
    gpu_type: str
    gpus: Annotated[Whole, Field(ge=1, le=MAX_GPUS)]
    island_size: Annotated[Whole, Field(ge=1)] | None = None
    islands: list[list[Count]] | None = None
    cpus: Annotated[float, Field(ge=0, le=1e6, description="[cores]; 0: not modelled")] = 0.0
    ram_gib: Annotated[float, Field(ge=0, le=1e6, description="[GiB]; 0: not modelled")] = 0.0
    rack: Count | None = None
    racks: Annotated[list[Count], Field(min_length=1)] | None = None
    cache_gib: Annotated[float, Field(ge=0, le=1e9, description="dataset cache per node [GiB]")] = 0.0
    mig: bool = False


class ClusterFile(FileModel):
    """A cluster preset file (``configs/clusters/NAME.yaml``; the layout of the module docstring)."""

    name: str | None = None
    gpu_types: dict[str, GpuTypeFile] | None = None
    node_groups: Annotated[list[NodeGroupFile], Field(min_length=1)]
    partitions: Any = None  # checked against the nodes by envs.core.governance
    quotas: Any = None
    mig_reconfig_s: Annotated[float, Field(ge=0, le=86_400, description="[s]")] | None = None


def cluster_from_dict(data: Any, where: str = "cluster") -> ClusterSpec:
    """Build a cluster from the mapping a preset file holds (checked by :class:`ClusterFile`); ``where`` prefixes
    error messages."""
    file = validated(ClusterFile, data, where)
    name = file.name or where.removesuffix(".yaml")
    types = merge_gpu_types([GPUType(t, g.memory_gib, g.speed) for t, g in (file.gpu_types or {}).items()])
    nodes: list[NodeSpec] = []
    for i, group in enumerate(file.node_groups):
        nodes.extend(_group_nodes(group, f"{where}: node_groups[{i}]", default_name=f"group{i}"))
    governance = governance_from_dict({k: data[k] for k in ("partitions", "quotas") if k in data},
                                      tuple(n.name for n in nodes), where)
    extra = {"mig_reconfig_s": file.mig_reconfig_s} if file.mig_reconfig_s is not None else {}
    try:
        return ClusterSpec(name=name, nodes=tuple(nodes), gpu_types=types, governance=governance, **extra)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from exc


def _group_nodes(group: NodeGroupFile, where: str, default_name: str) -> list[NodeSpec]:
    count, n_gpus = group.count, group.gpus
    if count * n_gpus > MAX_GPUS:
        raise ConfigError(f"{where}: count x gpus: {count:,} x {n_gpus:,} GPUs is more than the {MAX_GPUS:,} "
                          "a cluster may have")
    if group.islands is not None and group.island_size is not None:
        raise ConfigError(f"{where}: give islands or island_size, not both")
    if group.islands is not None:
        islands = tuple(tuple(island) for island in group.islands)
    else:
        try:
            islands = even_islands(n_gpus, group.island_size or n_gpus)
        except ConfigError as exc:
            raise ConfigError(f"{where}.{exc}") from exc
    if group.rack is not None and group.racks is not None:
        raise ConfigError(f"{where}: give rack or racks, not both")
    racks = group.racks or [group.rack or 0]
    prefix = group.name or default_name
    try:
        return [
            NodeSpec(
                name=f"{prefix}-{k}",
                gpu_type=group.gpu_type,
                n_gpus=n_gpus,
                islands=islands,
                cpu_milli=round(group.cpus * 1000),
                ram_mib=round(group.ram_gib * 1024),
                rack=racks[k * len(racks) // count],  # contiguous, near-equal blocks
                cache_gib=group.cache_gib,
                mig=group.mig,
            )
            for k in range(count)
        ]
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from exc
