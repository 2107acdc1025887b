"""What the kube-scheduler extender (:mod:`bridges.extender`) knows of a Kubernetes cluster: each node's
``nvidia.com/gpu`` devices, those its pods hold, and the free ones as a state the placement rules read.

**Nodes** (``kubectl get nodes -o json``, or the Nodes of a request) are read by
:func:`~envs.workload.operators.kubectl_nodes.kubectl_node_inventory`, with that reader's names, GPU types and
checks. A node's devices are its allocatable ``nvidia.com/gpu`` (capacity when absent): what kube-scheduler counts
and what NVIDIA's device plugin hands out. Each device is one GPU of the cluster the rules see (:class:`GpuNodes`);
a node without any is known (``listed``) but not in that cluster. Modelled: the devices and which are free. Not
modelled (kube-scheduler filters on them itself before it calls an extender): CPU, memory and other resources
(NodeResourcesFit), node pools, labels and affinity, taints, cordons and node conditions; NVLink (kubectl says
nothing of it: each node is one island).

**MIG.** Under the device plugin's ``single`` strategy a node's ``nvidia.com/gpu`` devices are MIG instances of one
profile, and they are judged one device each, as Kubernetes hands them out (a pod asking for 2 gets two
instances). Under the ``mixed`` strategy ``nvidia.com/gpu`` counts the full GPUs only; the ``nvidia.com/mig-PROFILE``
resources are left to kube-scheduler, whose NodeResourcesFit counts them exactly (the MIG manager cuts the
instances beforehand, so there is no placement to choose inside a GPU).

**Pods** (``kubectl get pods -A -o json``): a pod holds devices on ``spec.nodeName`` when it has one and its phase
is neither ``Succeeded`` nor ``Failed`` (bound but ``Pending``, ``Running``, ``Unknown``: the pods kube-scheduler's
own cache counts); its devices are :func:`~envs.workload.operators.kube_objects.pod_gpus`' (the containers' limits,
else requests, of ``nvidia.com/gpu``; init containers and pod overhead are not counted). A node's first held
devices are taken (devices of one node are alike, so which ones does not matter); more held than it has takes all.
The snapshot is as fresh as its file: pods kube-scheduler placed since are not in it, which is why kube-scheduler's
own fit check on ``nvidia.com/gpu`` stays on (``ignoredByScheduler: false``).

**Files** are read again when their modification time or size changes (:class:`WatchedFile`), at the next request;
a file that cannot be read then (half written: write it elsewhere and ``mv`` it in place) is an error until it
changes again. Reading a file runs no code: JSON only.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Generic, TypeVar

import numpy as np

from envs.core.cluster import MILLI_PER_GPU
from envs.core.errors import GpuschedError
from envs.sim.resources import ResourceState
from envs.sim.state import SimState
from envs.sim.view import View
from envs.workload.operators.kube_objects import kubectl_items, pod_gpus
from envs.workload.operators.kubectl_nodes import (
    GPU_RESOURCE,
    json_object,
    kubectl_node_inventory,
    node_resources,
    read_json,
    whole_count,
)
from envs.workload.operators.kubectl_pods import PODS_EXPECTED

T = TypeVar("T")

FINISHED_PHASES = ("Succeeded", "Failed")
"""Pod phases whose pods hold nothing any more."""


class ClusterFileError(GpuschedError):
    """A ``--nodes`` or ``--pods`` file cannot be read now; the message names the file and what is wrong."""


@dataclass(frozen=True)
class GpuNodes:
    """Kubernetes nodes as the extender judges them: the nodes with ``nvidia.com/gpu`` devices as a cluster of that
    many GPUs each (``view``: its empty state; None when no node has a device), and every node named."""

    view: View | None
    index: Mapping[str, int]  # node name -> its index in the cluster (nodes with devices only)
    listed: frozenset[str]  # every node named, with devices or not

    def devices(self, name: str) -> int:
        """The ``nvidia.com/gpu`` devices of node ``name`` (0 for a node without any, or unknown)."""
        i = self.index.get(name)
        return 0 if i is None or self.view is None else self.view.cluster.nodes[i].n_gpus

    def free_state(self, held: Mapping[str, int]) -> ResourceState:
        """The state the placement rules read: on every node its first ``held[name]`` devices taken, the others
        free (whole GPUs; CPU and RAM not modelled)."""
        assert self.view is not None, "no node has nvidia.com/gpu devices"
        c = self.view.cluster
        taken_per_node = np.array([min(held.get(node.name, 0), node.n_gpus) for node in c.nodes], dtype=np.int64)
        rank_in_node = np.arange(c.n_gpus) - c.node_first_gpu[c.gpu_node]
        free = np.where(rank_in_node < taken_per_node[c.gpu_node], 0, MILLI_PER_GPU).astype(np.int64)
        return state_of(self.view, free)


def state_of(view: View, gpu_free_milli: np.ndarray) -> ResourceState:
    """A state of ``view``'s cluster whose free share per GPU is ``gpu_free_milli`` (0 or a whole GPU each)."""
    c = view.cluster
    memory = np.where(gpu_free_milli == MILLI_PER_GPU, c.gpu_memory_mib, 0)
    return ResourceState(view, gpu_free_milli, view.node_free_cpu_milli.copy(), view.node_free_ram_mib.copy(), 0.0,
                         memory, view.gpu_mig_used.copy(), {})


def gpu_nodes(data: Any, source: str, text: str = "", starts: list[int] | None = None) -> GpuNodes:
    """The :class:`GpuNodes` of parsed ``kubectl get nodes -o json`` data (a node List or one Node) from ``source``
    (``text``, ``starts``: its JSON text and line starts, for errors' lines). Malformed nodes are a
    :class:`~envs.core.errors.TraceFormatError`."""
    inventory = kubectl_node_inventory(data, source, None, text, starts)
    items = [data] if data.get("kind") == "Node" else data["items"]  # the inventory checked the shape
    by_name = {item["metadata"]["name"]: item for item in items}
    kept = []
    for node in inventory.nodes:
        resources = node_resources(by_name[node.name], node.name, source, node.line)
        devices = whole_count(resources.get(GPU_RESOURCE, 0), f"node {node.name!r} {GPU_RESOURCE}", source, node.line)
        if devices:
            kept.append(replace(node, n_gpus=devices, cpu_milli=0, ram_mib=0, partitions=(), mig=False))
    inventory.nodes = kept
    return GpuNodes(view=View(SimState(inventory.cluster(), 0.0, 0)) if kept else None,
                    index={node.name: i for i, node in enumerate(kept)}, listed=frozenset(by_name))


def read_gpu_nodes(path: Path) -> GpuNodes:
    """The :class:`GpuNodes` of a ``kubectl get nodes -o json`` file."""
    text, starts, data = read_json(path)
    return gpu_nodes(data, str(path), text, starts)


def read_held_gpus(path: Path) -> dict[str, int]:
    """Per node name, the ``nvidia.com/gpu`` devices held by the pods of a ``kubectl get pods -A -o json`` file that
    are bound to it and not finished (module docstring)."""
    where = str(path)
    held: dict[str, int] = {}
    for item, name, line in kubectl_items(path, "Pod", PODS_EXPECTED):
        spec = json_object(item, "spec", f"pod {name!r} spec", where, line)
        status = json_object(item, "status", f"pod {name!r} status", where, line)
        node = spec.get("nodeName")
        if isinstance(node, str) and node and status.get("phase") not in FINISHED_PHASES:
            held[node] = held.get(node, 0) + pod_gpus(spec, f"pod {name!r}", where, line)[0]
    return held


class WatchedFile(Generic[T]):
    """A file read by ``read`` and read again when its modification time or size changes. A read that fails is a
    :class:`ClusterFileError` (its message) on every call until the file changes. Safe to share between threads."""

    def __init__(self, path: str | Path, read: Callable[[Path], T]) -> None:
        self.path = Path(path)
        self._read = read
        self._lock = threading.Lock()
        self._stamp: tuple[int, int] | None = None  # (mtime [ns], size [bytes]) of the version read
        self._value: T | None = None
        self._error = ""

    def current(self) -> T:
        """The file's value as of its current version."""
        try:
            stat = self.path.stat()
        except OSError as exc:
            raise ClusterFileError(f"{self.path}: {exc.strerror or exc}") from None
        stamp = (stat.st_mtime_ns, stat.st_size)
        with self._lock:
            if stamp != self._stamp:
                self._stamp = stamp
                try:
                    self._value, self._error = self._read(self.path), ""
                except (GpuschedError, OSError) as exc:
                    self._value, self._error = None, " ".join(str(exc).split())
            if self._value is None:
                raise ClusterFileError(self._error)
            return self._value
