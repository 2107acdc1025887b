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

from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from envs.core.cluster import MAX_GPUS, MAX_NODES, ClusterSpec, NodeSpec, even_islands, merge_gpu_types
from envs.core.errors import ConfigError, check_keys
from envs.core.files import read_yaml
from envs.core.governance import governance_from_dict
from envs.core.gpu_types import GPUType

_TOP_KEYS = {"name", "gpu_types", "node_groups", "partitions", "quotas", "mig_reconfig_s"}
_GROUP_KEYS = {"name", "count", "gpu_type", "gpus", "island_size", "islands", "cpus", "ram_gib", "rack", "racks",
               "cache_gib", "mig"}
_TYPE_KEYS = {"memory_gib", "speed"}


def preset_names() -> list[str]:
    """Names of the cluster presets shipped in ``configs/clusters/``."""
    folder = resources.files("configs") / "clusters"
    return sorted(p.name[: -len(".yaml")] for p in folder.iterdir() if p.name.endswith(".yaml"))


def load_preset(spec: str | Path) -> ClusterSpec:
    """A cluster preset by name (``tiny`` is ``configs/clusters/tiny.yaml``) or a preset file by path."""
    text = str(spec)
    if not text:
        raise ConfigError(f"cluster: empty name (known presets: {', '.join(preset_names())})")
    path = Path(text)
    if path.suffix in (".yaml", ".yml") or path.exists():
        return cluster_from_yaml(path)
    resource = resources.files("configs") / "clusters" / f"{text}.yaml"
    if not resource.is_file():
        raise ConfigError(f"cluster {text!r}: no such preset (known: {', '.join(preset_names())}) and no such file")
    return cluster_from_dict(yaml.safe_load(resource.read_text()), where=f"{text}.yaml")


def cluster_from_yaml(path: str | Path) -> ClusterSpec:
    """Read a cluster preset file."""
    path = Path(path)
    return cluster_from_dict(read_yaml(path, "cluster file"), where=path.name)


def cluster_from_dict(data: Any, where: str = "cluster") -> ClusterSpec:
    """Build a cluster from the mapping a preset file holds; ``where`` prefixes error messages."""
    check_keys(data, _TOP_KEYS, where)
    name = str(data.get("name") or where.removesuffix(".yaml"))
    types = merge_gpu_types(_gpu_types(data.get("gpu_types") or {}, f"{where}: gpu_types"))
    groups = data.get("node_groups")
    if not isinstance(groups, list) or not groups:
        raise ConfigError(f"{where}: node_groups: must be a non-empty list")
    nodes: list[NodeSpec] = []
    for i, group in enumerate(groups):
        nodes.extend(_group_nodes(group, f"{where}: node_groups[{i}]", default_name=f"group{i}"))
    governance = governance_from_dict({k: data[k] for k in ("partitions", "quotas") if k in data},
                                      tuple(n.name for n in nodes), where)
    extra = {"mig_reconfig_s": _number(data, "mig_reconfig_s", where)} if "mig_reconfig_s" in data else {}
    try:
        return ClusterSpec(name=name, nodes=tuple(nodes), gpu_types=types, governance=governance, **extra)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from exc


def _gpu_types(data: Any, where: str) -> list[GPUType]:
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where}: must be a mapping of type name to {{memory_gib, speed}}")
    out = []
    for type_name, fields in data.items():
        check_keys(fields, _TYPE_KEYS, f"{where}.{type_name}")
        if set(fields) != _TYPE_KEYS:
            raise ConfigError(f"{where}.{type_name}: needs both memory_gib and speed")
        out.append(GPUType(str(type_name), _number(fields, "memory_gib", where), _number(fields, "speed", where)))
    return out


def _group_nodes(group: Any, where: str, default_name: str) -> list[NodeSpec]:
    check_keys(group, _GROUP_KEYS, where)
    for key in ("count", "gpu_type", "gpus"):
        if key not in group:
            raise ConfigError(f"{where}.{key}: missing")
    count = _integer(group, "count", where, minimum=1, maximum=MAX_NODES)
    n_gpus = _integer(group, "gpus", where, minimum=1, maximum=MAX_GPUS)
    if count * n_gpus > MAX_GPUS:
        raise ConfigError(f"{where}: count x gpus: {count:,} x {n_gpus:,} GPUs is more than the {MAX_GPUS:,} "
                          "a cluster may have")
    if "islands" in group and "island_size" in group:
        raise ConfigError(f"{where}: give islands or island_size, not both")
    if "islands" in group:
        islands_raw = group["islands"]
        if not isinstance(islands_raw, list) or not all(
            isinstance(x, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in x) for x in islands_raw
        ):
            raise ConfigError(f"{where}.islands: must be a list of lists of integer GPU indices, got {islands_raw!r}")
        islands = tuple(tuple(island) for island in islands_raw)
    else:
        size = _integer(group, "island_size", where, minimum=1) if "island_size" in group else n_gpus
        try:
            islands = even_islands(n_gpus, size)
        except ConfigError as exc:
            raise ConfigError(f"{where}.{exc}") from exc
    if "rack" in group and "racks" in group:
        raise ConfigError(f"{where}: give rack or racks, not both")
    racks = group.get("racks", [group.get("rack", 0)])
    if not isinstance(racks, list) or not racks or not all(
        isinstance(r, int) and not isinstance(r, bool) and r >= 0 for r in racks
    ):
        raise ConfigError(f"{where}.racks: must be a non-empty list of rack ids >= 0, got {racks!r}")
    prefix = str(group.get("name", default_name))
    cpu_milli = round(_number(group, "cpus", where, default=0.0) * 1000)
    ram_mib = round(_number(group, "ram_gib", where, default=0.0) * 1024)
    cache_gib = _number(group, "cache_gib", where, default=0.0)
    mig = group.get("mig", False)
    if not isinstance(mig, bool):
        raise ConfigError(f"{where}.mig: must be true or false, got {mig!r}")
    try:
        return [
            NodeSpec(
                name=f"{prefix}-{k}",
                gpu_type=str(group["gpu_type"]),
                n_gpus=n_gpus,
                islands=islands,
                cpu_milli=cpu_milli,
                ram_mib=ram_mib,
                rack=racks[k * len(racks) // count],  # contiguous, near-equal blocks
                cache_gib=cache_gib,
                mig=mig,
            )
            for k in range(count)
        ]
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from exc


def _number(data: Mapping[str, Any], key: str, where: str, default: float | None = None) -> float:
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{where}.{key}: must be a number, got {value!r}")
    if value < 0:
        raise ConfigError(f"{where}.{key}: must be >= 0, got {value}")
    return float(value)


def _integer(data: Mapping[str, Any], key: str, where: str, minimum: int, maximum: int | None = None) -> int:
    value = data.get(key)
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**63:
        value = int(value)  # YAML reads 1e8 as a float
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{where}.{key}: must be an integer, got {value!r}")
    if value < minimum or (maximum is not None and value > maximum):
        bound = f">= {minimum}" if maximum is None else f"in {minimum}..{maximum:,}"
        raise ConfigError(f"{where}.{key}: must be {bound}, got {value:,}")
    return value
