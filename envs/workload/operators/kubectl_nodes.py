"""Kubernetes node lists (``kubectl get nodes -o json``) into a :class:`~envs.core.cluster.ClusterSpec`.

The file is the JSON ``kubectl get nodes -o json`` prints (a ``List`` whose ``items`` are Nodes; one Node object,
``kubectl get node NAME -o json``, is read too), parsed with :mod:`json`. GPU labels are those of NVIDIA's GPU
Feature Discovery (GFD, ``docs/gfd_labels.md`` of NVIDIA/k8s-device-plugin), GPU resources those of NVIDIA's
device plugin. Mapping, per node:

- ``metadata.name`` → the node's name.
- Resources are read from ``status.allocatable`` (what the scheduler may hand to pods), each falling back to
  ``status.capacity`` when absent there.
- ``cpu`` → CPU [milli-cores, rounded down] (``96`` → 96,000, ``95500m`` → 95,500); ``memory`` → RAM [MiB, rounded down]
  from a Kubernetes quantity (``1056270940Ki``, ``512Gi``, ``500G``, bytes); absent: 0, not modelled.
- ``nvidia.com/gpu`` → the GPU count (full GPUs; MIG devices under the ``single`` strategy, below). Other vendors'
  resources (``amd.com/gpu``) are not read. A node with no NVIDIA GPU resource is left out: skip reason
  ``no_gpus`` (CPU nodes).
- ``nvidia.com/gpu.product`` (label) → the GPU type, with ``nvidia.com/gpu.memory`` [MiB] for the memory, resolved
  by :func:`~envs.workload.operators.node_inventory.gpu_type_for` (``NVIDIA-A100-SXM4-80GB`` → ``A100-80GB``,
  ``Tesla-V100-SXM2-16GB`` → ``V100``; an unknown model becomes a new type with the label's memory). Without a
  product label: the untyped type ``gpu``. ``nvidia.com/gpu.count`` is read only for MIG (below).
- Node pool → partition: the first present of the labels :data:`NODE_POOL_LABELS` (GKE
  ``cloud.google.com/gke-nodepool``, EKS ``eks.amazonaws.com/nodegroup``, AKS ``kubernetes.azure.com/agentpool``,
  Karpenter ``karpenter.sh/nodepool``); a node without one is in no partition. There is no default pool: jobs
  naming no partition run anywhere.
- ``spec.unschedulable`` (cordoned) and node conditions are not used: the node is kept, it is part of the cluster.
  Taints are not modelled.

MIG (``nvidia.com/mig.strategy``). The cluster model puts a node's GPUs in MIG mode (``NodeSpec.mig``) for the
MIG-capable types of :data:`~envs.core.mig.MIG_GEOMETRIES` (A100-40GB, A100-80GB, H100); the simulator then creates
GPU instances job by job at NVIDIA's valid positions, so the node's current layout is not kept:

- ``single``: every GPU is cut into identical instances; ``nvidia.com/gpu`` counts instances and the product label
  ends in the profile (``A100-SXM4-40GB-MIG-1g.5gb``). The type comes from the name before ``-MIG-`` (the memory
  label then gives an instance's memory, so it is not used); GPUs = instances / instances per GPU of that profile
  (7 for 1g.5gb, 3 for 2g.10gb, ...; by the type's geometry, else 7 // compute slices); the node is in MIG mode.
- ``mixed``: ``nvidia.com/gpu`` counts the full GPUs and each ``nvidia.com/mig-<profile>`` resource the instances
  of that profile. GPUs = the ``nvidia.com/gpu.count`` label (GFD's number of GPUs), else full GPUs + the fewest
  GPUs that hold the instances (their memory slices / 8, rounded up; compute slices / 7 on a type
  without MIG geometry). The node is in MIG mode when it has no full
  GPU; with some full GPUs it starts in full mode (the simulator switches an empty GPU to MIG mode when a MIG job
  needs it, at the cluster's ``mig_reconfig_s``).
- ``nvidia.com/mig.config`` (the MIG manager's layout name, ``all-1g.5gb``) and the per-profile ``.memory`` /
  ``.multiprocessors`` labels are ignored. On a type without MIG geometry (an unknown model), MIG is ignored: its
  GPUs are counted as above and start in full mode.

Malformed (:class:`~envs.core.errors.TraceFormatError`): text that is not JSON (at the line of the JSON error), a
top level that is not a node List or a Node (line 1), a node without a name, labels or resources that are not
objects, a quantity or count that is not one (at the line naming the node), a profile the node's type does not
offer, instance counts that do not divide into whole GPUs, a ``nvidia.com/gpu.count`` below the full GPUs, a
repeated node name, and a list without a GPU node. The cluster itself (islands, racks, partitions) is built as
:mod:`envs.workload.operators.node_inventory` describes; nodes left out are counted in
:attr:`~envs.workload.operators.node_inventory.NodeInventory.skipped` (:func:`read_kubectl_nodes`).
"""

from __future__ import annotations

import bisect
import itertools
import json
import math
import re
from collections.abc import Mapping
from decimal import Decimal, DecimalException
from pathlib import Path
from typing import Any

from envs.core.cluster import MAX_GPUS, ClusterSpec
from envs.core.errors import TraceFormatError
from envs.core.gpu_types import GPUType
from envs.core.mig import COMPUTE_SLICES, MEMORY_SLICES, MIG_GEOMETRIES, compute_slices_of, normalize_profile
from envs.core.numbers import integer
from envs.workload.operators.node_inventory import GpuNode, NodeInventory, new_inventory
from envs.workload.reader import read_lines, show

GPU_RESOURCE = "nvidia.com/gpu"
"""The NVIDIA device plugin's resource: full GPUs, or MIG devices under the single strategy."""

MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
"""Prefix of the device plugin's per-profile MIG resources (mixed strategy): ``nvidia.com/mig-3g.20gb``."""

NODE_POOL_LABELS = (
    "cloud.google.com/gke-nodepool",
    "eks.amazonaws.com/nodegroup",
    "kubernetes.azure.com/agentpool",
    "karpenter.sh/nodepool",
)
"""Labels naming a node's pool, in the order they are looked for; the pool becomes the node's partition."""

_PRODUCT = "nvidia.com/gpu.product"
_MEMORY = "nvidia.com/gpu.memory"
_COUNT = "nvidia.com/gpu.count"
_STRATEGY = "nvidia.com/mig.strategy"
_QUANTITY = re.compile(r"^([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?$")
MAX_QUANTITY = Decimal(10) ** 18
"""The largest quantity read, in the unit asked for (milli-cores, MiB): beyond it a node is not a node."""
_FACTOR = {
    "": 1,
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
}


def read_json(path: str | Path) -> tuple[str, list[int], Any]:
    """(the text of a kubectl JSON export, the offset where each of its lines starts, its data); malformed JSON is a
    :class:`TraceFormatError` naming the file and the line."""
    lines = read_lines(path)
    text = "\n".join(lines)
    starts = list(itertools.accumulate((len(line) + 1 for line in lines), initial=0))
    try:
        return text, starts, json.loads(text)
    except json.JSONDecodeError as exc:
        raise TraceFormatError(str(path), exc.lineno, f"not JSON: {exc.msg} (column {exc.colno})") from None
    except RecursionError:
        raise TraceFormatError(str(path), 1, "JSON nested too deeply to be a kubectl export") from None


def load_kubectl_cluster(path: str | Path, gpu_types: Mapping[str, GPUType] | None = None) -> ClusterSpec:
    """The cluster of the GPU nodes of a ``kubectl get nodes -o json`` file (``gpu_types``: the type table, default
    built-in)."""
    return read_kubectl_nodes(path, gpu_types).cluster()


def read_kubectl_nodes(path: str | Path, gpu_types: Mapping[str, GPUType] | None = None) -> NodeInventory:
    """The GPU nodes of a ``kubectl get nodes -o json`` file, and the nodes left out by reason."""
    text, starts, data = read_json(path)
    return kubectl_node_inventory(data, path, gpu_types, text, starts)


def kubectl_node_inventory(data: Any, source: str | Path, gpu_types: Mapping[str, GPUType] | None = None,
                           text: str = "", starts: list[int] | None = None) -> NodeInventory:
    """The GPU nodes of parsed ``kubectl get nodes -o json`` data (a node List or one Node) from ``source``, and the
    nodes left out by reason; ``text`` and ``starts`` (the JSON text and where its lines start, :func:`read_json`)
    give errors their line, else errors point at line 1."""
    inventory = new_inventory(source, gpu_types)
    where = inventory.source
    starts = starts if starts is not None else [0]
    inventory.last_line = max(len(starts) - 1, 1)
    if isinstance(data, dict) and data.get("kind") == "Node":
        items: Any = [data]
    elif isinstance(data, dict) and isinstance(data.get("items"), list):
        items = data["items"]
    else:
        raise TraceFormatError(
            where, 1, "expected the output of kubectl get nodes -o json: an object with an items list of Nodes"
        )
    search_from = 0  # where the next node's name is looked for in the text
    for number, item in enumerate(items):
        search_from = _read_node(inventory, item, number, text, search_from, starts)
    return inventory


def _read_node(inventory: NodeInventory, item: Any, number: int, text: str, search_from: int,
               starts: list[int]) -> int:
    """Add node ``item`` (``items[number]``) to ``inventory``; returns where its name ends in ``text`` (whose
    line ``i + 1`` starts at offset ``starts[i]``)."""
    where = inventory.source
    metadata = item.get("metadata") if isinstance(item, dict) else None
    name = metadata.get("name") if isinstance(metadata, dict) else None
    if not isinstance(name, str) or not name:
        raise TraceFormatError(where, 1, f"items[{number}] has no metadata.name")
    line, search_from = line_of(text, name, search_from, starts)
    labels = json_object(metadata, "labels", f"node {name!r} metadata.labels", where, line)
    resources = node_resources(item, name, where, line)
    what = f"node {name!r}"
    devices = whole_count(resources.get(GPU_RESOURCE, 0), f"{what} {GPU_RESOURCE}", where, line)
    instances: dict[str, int] = {}
    for key, value in resources.items():
        if key.startswith(MIG_RESOURCE_PREFIX):
            try:
                profile = normalize_profile(key)
            except ValueError as exc:
                raise TraceFormatError(where, line, f"{what}: {exc}") from None
            instances[profile] = whole_count(value, f"{what} {key}", where, line)
    if devices == 0 and not any(instances.values()):
        inventory.skip("no_gpus")
        return search_from
    product = _label(labels, _PRODUCT, what, where, line)
    strategy = _label(labels, _STRATEGY, what, where, line)
    base, _, single_profile = product.partition("-MIG-")
    if strategy == "single" and single_profile:
        gpu_type = inventory.resolve(base)
        n_gpus, mig = _single_strategy(gpu_type, single_profile, devices, what, where, line)
    else:
        memory_text = _label(labels, _MEMORY, what, where, line)
        memory_mib = whole_count(memory_text, f"{what} {_MEMORY}", where, line) if memory_text else None
        gpu_type = inventory.resolve(product, memory_mib)
        count_text = _label(labels, _COUNT, what, where, line)
        labelled = whole_count(count_text, f"{what} {_COUNT}", where, line) if count_text else None
        n_gpus, mig = _mixed_strategy(gpu_type, devices, instances, labelled, what, where, line)
    cpu_milli = _quantity(resources.get("cpu", "0"), 1000, math.floor, f"{what} cpu", where, line)
    ram_mib = _quantity(resources.get("memory", "0"), Decimal(1) / 2**20, math.floor, f"{what} memory", where, line)
    pool = next((labels[k] for k in NODE_POOL_LABELS if isinstance(labels.get(k), str) and labels[k]), "")
    inventory.nodes.append(
        GpuNode(
            name=name,
            gpu_type=gpu_type,
            n_gpus=n_gpus,
            cpu_milli=cpu_milli,
            ram_mib=ram_mib,
            line=line,
            partitions=(pool,) if pool else (),
            mig=mig,
        )
    )
    return search_from


def _single_strategy(
    gpu_type: str, profile_text: str, devices: int, what: str, where: str, line: int
) -> tuple[int, bool]:
    """(GPUs, MIG mode) of a node whose ``devices`` MIG devices all have the profile ``profile_text``."""
    try:
        profile = normalize_profile(profile_text)
    except ValueError as exc:
        raise TraceFormatError(where, line, f"{what} {_PRODUCT}: {exc}") from None
    geometry = MIG_GEOMETRIES.get(gpu_type)
    if geometry is None:
        per_gpu = COMPUTE_SLICES // compute_slices_of(profile)
    else:
        found = geometry.profile(profile)
        if found is None:
            raise TraceFormatError(where, line, f"{what}: type {gpu_type} offers no MIG profile {profile}")
        occupied, per_gpu = 0, 0
        for mask in found.masks:  # instances of one profile at disjoint valid positions
            if not mask & occupied:
                occupied |= mask
                per_gpu += 1
    if devices % per_gpu:
        raise TraceFormatError(where, line, f"{what}: {devices} {profile} devices are not whole GPUs of {per_gpu}")
    return devices // per_gpu, geometry is not None


def _mixed_strategy(
    gpu_type: str, full: int, instances: dict[str, int], labelled: int | None, what: str, where: str, line: int
) -> tuple[int, bool]:
    """(GPUs, MIG mode) of a node with ``full`` full GPUs and ``instances`` MIG devices by profile."""
    if not any(instances.values()):
        return full, False
    geometry = MIG_GEOMETRIES.get(gpu_type)
    used = 0  # memory slices (compute slices on a type without geometry) the instances take
    for profile, count in instances.items():
        if geometry is None:
            used += count * compute_slices_of(profile)
            continue
        found = geometry.profile(profile)
        if found is None:
            raise TraceFormatError(where, line, f"{what}: type {gpu_type} offers no MIG profile {profile}")
        used += count * found.size
    if labelled is not None and labelled < full:
        raise TraceFormatError(where, line, f"{what}: {_COUNT} {labelled} is below its {full} full GPUs")
    per_gpu = COMPUTE_SLICES if geometry is None else MEMORY_SLICES
    n_gpus = labelled if labelled is not None and labelled > full else full + -(-used // per_gpu)
    return n_gpus, geometry is not None and full == 0


def node_resources(item: Any, name: str, where: str, line: int) -> dict[str, Any]:
    """The resources of Node ``item`` (named ``name``): ``status.allocatable``, each falling back to
    ``status.capacity`` when absent there (quantities as the API writes them)."""
    status = json_object(item, "status", f"node {name!r} status", where, line)
    capacity = json_object(status, "capacity", f"node {name!r} status.capacity", where, line)
    allocatable = json_object(status, "allocatable", f"node {name!r} status.allocatable", where, line)
    return {**capacity, **allocatable}


def json_object(parent: Any, key: str, what: str, where: str, line: int) -> dict[str, Any]:
    value = parent.get(key, {}) if isinstance(parent, dict) else None
    if not isinstance(value, dict):
        raise TraceFormatError(where, line, f"{what} is not an object")
    return value


def _label(labels: dict[str, Any], key: str, what: str, where: str, line: int) -> str:
    value = labels.get(key, "")
    if not isinstance(value, str):
        raise TraceFormatError(where, line, f"{what} label {key} is not a string")
    return value


def whole_count(value: Any, what: str, where: str, line: int) -> int:
    """A whole number >= 0 written as a JSON string (``"8"``) or number."""
    text = str(value) if isinstance(value, (str, int)) and not isinstance(value, bool) else ""
    count = integer(text) if text[:1] not in "+-" else None  # the one number rule: plain ASCII digits
    if count is None:
        raise TraceFormatError(where, line, f"{what} {show(str(value))} is not a whole number >= 0")
    if count > MAX_GPUS:
        raise TraceFormatError(where, line, f"{what} {count:,} is past the largest machine modelled "
                                            f"({MAX_GPUS:,} GPUs)")
    return count


def _quantity(value: Any, scale: Decimal | int, rounding: Any, what: str, where: str, line: int) -> int:
    """A Kubernetes quantity (``95500m``, ``512Gi``, ``1e3``) times ``scale``, rounded by ``rounding``."""
    match = _QUANTITY.match(value) if isinstance(value, str) else None
    if match is None:
        raise TraceFormatError(where, line, f"{what} {show(str(value))} is not a Kubernetes quantity")
    number, suffix = match.group(1), match.group(2) or ""
    try:
        factor = Decimal(f"1{suffix}") if suffix[:1] in "eE" and suffix else Decimal(_FACTOR[suffix])
        scaled = Decimal(number) * factor * scale
        if scaled > MAX_QUANTITY:
            raise OverflowError
        return int(rounding(scaled))
    except (DecimalException, OverflowError):
        raise TraceFormatError(where, line, f"{what} {show(value)} is out of range") from None


def line_of(text: str, name: str, search_from: int, starts: list[int]) -> tuple[int, int]:
    """(the line where node ``name`` is named in the JSON text at or after offset ``search_from``, 1 when it cannot
    be found; the offset after it); line ``i + 1`` of ``text`` starts at offset ``starts[i]``, so that finding the
    line takes a bisection, not a count from the start (which made N nodes cost N² time)."""
    found = re.compile(r'"name"\s*:\s*' + re.escape(json.dumps(name))).search(text, search_from)
    if found is None:
        return 1, search_from
    return bisect.bisect_right(starts, found.start()), found.end()
