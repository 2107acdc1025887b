"""Placement rules: functions (view, job) -> GPUs to start the job on now, or None when it does not fit.

They live with the world model because both the heuristics (``baselines/``) and the Gymnasium env's action
decoder use them, so a learned agent chooses among exactly the placements the heuristics make. This module holds
the shared feasibility queries and the rules of SPEC §6, registered by name in :data:`PLACEMENT_RULES`:

=============  =========================================================================================
firstfit       the first node that holds the job, else the first free GPUs across nodes
pack           best-fit: the node (or GPU share) with the least room that still holds the job
spread         worst-fit: the node (or GPU share) with the most room
topology       the smallest topology level (one NVLink island, one node, one rack), then pack
locality       nodes caching the job's dataset first, then pack (:mod:`envs.placement_extra`)
fragmentation  the node whose free GPUs left unusable for the job mix grow least (:mod:`envs.placement_extra`)
=============  =========================================================================================

Every rule is complete: it returns None only when no valid allocation exists now, i.e. when
``usable_gpus_per_node(view, job).sum() < job.n_gpus`` (whole GPUs) or ``usable_gpu_mask(view, job)`` is all
False (a fractional share). A job that fits on no single node is placed by the same gang rule in pack, spread and
topology's last step: nodes in descending order of usable GPUs (ties: lowest index), all of each node's usable
GPUs until the last node gives the remainder, so the job spans the fewest nodes. GPUs inside a node are its lowest
free indices. Rules are vectorized over nodes (and islands): no Python loop over GPUs.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from envs.cluster import ClusterSpec
from envs.errors import ConfigError
from envs.job import Job
from envs.view import View

PlacementRule = Callable[[View, Job], "np.ndarray | None"]
"""The type of a placement rule: the ascending global GPU indices to start the job on, or None."""


def eligible_free_gpus(view: View, job: Job) -> np.ndarray:
    """Fully free GPUs per node, counting only nodes whose GPU type, memory and health suit ``job``.

    CPU and RAM are not checked here: see :func:`usable_gpus_per_node` and :func:`node_has_cpu_ram`.
    """
    if not (job.gpu_types or job.gpu_mem_gib) and view.all_nodes_up:
        return view.node_free_gpus
    eligible = view.cluster.eligible_nodes(job.gpu_types, job.gpu_mem_gib) & view.node_up
    return np.where(eligible, view.node_free_gpus, 0)


def eligible_gpu_mask(view: View, job: Job) -> np.ndarray:
    """Per GPU: True when its node suits ``job`` (type, memory, health) and it has ``job.gpu_milli`` free."""
    c = view.cluster
    node_ok = c.eligible_nodes(job.gpu_types, job.gpu_mem_gib) & view.node_up
    return node_ok[c.gpu_node] & (view.gpu_free_milli >= job.gpu_milli)


def usable_gpus_per_node(view: View, job: Job) -> np.ndarray:
    """How many fully free GPUs of each node ``job`` could use now (type, memory, health, CPU and RAM).

    Read-only, and memoized on the view per state: jobs of one shape share it until the holdings change.
    """
    if not (job.cpu_milli_per_gpu or job.ram_mib_per_gpu):
        return eligible_free_gpus(view, job)
    key = ("usable", job.gpu_types, job.gpu_mem_gib, job.cpu_milli_per_gpu, job.ram_mib_per_gpu)
    return view.memoized(key, lambda: _cap_by_cpu_ram(view, job, eligible_free_gpus(view, job)))


def usable_gpu_mask(view: View, job: Job) -> np.ndarray:
    """Per GPU: True when a fractional ``job`` could take its share of that GPU now (CPU and RAM included)."""
    c = view.cluster
    node_ok = _cap_by_cpu_ram(view, job, np.ones(c.n_nodes, dtype=np.int64)) > 0
    return eligible_gpu_mask(view, job) & node_ok[c.gpu_node]


def node_has_cpu_ram(view: View, job: Job, node: int, n_gpus: int) -> bool:
    """True when ``node`` has the free CPU and RAM for ``n_gpus`` of the job's GPUs."""
    c = view.cluster
    cpu, ram = job.cpu_milli_per_gpu, job.ram_mib_per_gpu
    if cpu and c.cpu_modelled[node] and view.node_free_cpu_milli[node] < n_gpus * cpu:
        return False
    return not (ram and c.ram_modelled[node] and view.node_free_ram_mib[node] < n_gpus * ram)


def _cap_by_cpu_ram(view: View, job: Job, per_node: np.ndarray) -> np.ndarray:
    c = view.cluster
    if job.cpu_milli_per_gpu:
        by_cpu = view.node_free_cpu_milli // job.cpu_milli_per_gpu
        per_node = np.where(c.cpu_modelled, np.minimum(per_node, by_cpu), per_node)
    if job.ram_mib_per_gpu:
        by_ram = view.node_free_ram_mib // job.ram_mib_per_gpu
        per_node = np.where(c.ram_modelled, np.minimum(per_node, by_ram), per_node)
    return per_node


def free_gpus_of_node(view: View, node: int, count: int) -> np.ndarray:
    """The first ``count`` fully free GPUs of ``node`` (global indices, ascending)."""
    first, last = int(view.cluster.node_first_gpu[node]), int(view.cluster.node_first_gpu[node + 1])
    free = view.gpu_whole_free
    # Scan a prefix long enough to hold `count` free GPUs if they were spread evenly, and grow it if not: on a
    # large node (an SWF machine has thousands of processors) this avoids scanning the whole node every time.
    window = 64 + (3 * count * (last - first)) // (2 * max(int(view.node_free_gpus[node]), 1))
    while True:
        end = min(first + window, last)
        found = free[first:end].nonzero()[0]
        if found.size >= count or end == last:
            return found[:count] + first
        window *= 4


def gather(view: View, nodes: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Take ``counts[i]`` free GPUs from each ``nodes[i]`` (nodes ascending), lowest indices first."""
    parts = [free_gpus_of_node(view, int(n), int(k)) for n, k in zip(nodes, counts, strict=True) if k > 0]
    return np.concatenate(parts)


def first_fit(view: View, job: Job) -> np.ndarray | None:
    """The first node (in index order) that can host the whole job; if none can, the first free GPUs across nodes.

    A fractional job takes the first GPU with enough free share.
    """
    gpu_node = view.cluster.gpu_node
    if job.is_fractional:
        for g in eligible_gpu_mask(view, job).nonzero()[0]:
            if node_has_cpu_ram(view, job, gpu_node[g], 1):
                return np.array([g])
        return None
    n = job.n_gpus
    if view.free_gpus < n:
        return None
    free = eligible_free_gpus(view, job)
    for node in (free >= n).nonzero()[0]:
        if node_has_cpu_ram(view, job, node, n):
            return free_gpus_of_node(view, int(node), n)
    usable = usable_gpus_per_node(view, job)
    cumulative = np.cumsum(usable)
    if cumulative[-1] < n:
        return None
    last = int(np.searchsorted(cumulative, n))
    counts = usable[: last + 1].copy()
    counts[last] -= cumulative[last] - n
    return gather(view, np.arange(last + 1), counts)


# ---- pack, spread, topology ------------------------------------------------------------------------------------
_NEVER = np.iinfo(np.int64).max  # a key no candidate reaches: masks out nodes and GPUs in argmin


def pack(view: View, job: Job) -> np.ndarray | None:
    """Best-fit: leave the least room behind, so that large holes stay whole for large jobs.

    Whole GPUs: the node with the fewest usable free GPUs that still holds the job (ties: lowest node index);
    when no node does, the gang rule (module docstring). A fractional share: the usable GPU with the least free
    share that still holds it, so partly used GPUs fill first (ties: lowest GPU index).
    """
    if job.is_fractional:
        return _fractional(view, job, most_free=False)
    usable = _usable_or_none(view, job)
    if usable is None:
        return None
    node = int(np.where(usable >= job.n_gpus, usable, _NEVER).argmin())
    if usable[node] >= job.n_gpus:
        return free_gpus_of_node(view, node, job.n_gpus)
    return _gang(view, usable, job.n_gpus)


def spread(view: View, job: Job) -> np.ndarray | None:
    """Worst-fit: put the job where the most room is, to even out load (and leave partly used GPUs alone).

    Whole GPUs: the node with the most usable free GPUs (ties: lowest node index) when it holds the job; else the
    same gang as pack, on purpose: a gang spread over more nodes than needed would only add communication.
    A fractional share: the usable GPU with the most free share (ties: lowest GPU index).
    """
    if job.is_fractional:
        return _fractional(view, job, most_free=True)
    usable = _usable_or_none(view, job)
    if usable is None:
        return None
    node = int(usable.argmax())
    if usable[node] >= job.n_gpus:
        return free_gpus_of_node(view, node, job.n_gpus)
    return _gang(view, usable, job.n_gpus)


def topology(view: View, job: Job) -> np.ndarray | None:
    """Topology-aware: the smallest topology level that holds the job now (SPEC §3), and pack within it.

    In order: (1) one NVLink island: the island with the fewest usable free GPUs that holds the job (ties: lowest
    island id, i.e. node order, then the node's island order), its lowest free GPUs; an island's usable count is
    capped by its node's CPU/RAM. (2) One node: plain pack among the nodes that hold the job. The runtime model
    charges the same factor for every placement that spans two or more islands of a node, so choosing the node
    (or GPUs) that span the fewest islands would buy nothing and is not done. (3) One rack: among racks whose
    usable GPUs add up to the job, the one with the fewest (ties: lowest rack id), and the gang rule inside it.
    (4) The gang rule across racks. A fractional share sits on one GPU, always inside one island: as pack.
    """
    if job.is_fractional:
        return _fractional(view, job, most_free=False)
    usable = _usable_or_none(view, job)
    if usable is None:
        return None
    n = job.n_gpus
    node = int(np.where(usable >= n, usable, _NEVER).argmin())
    if usable[node] >= n:
        shape = _shape_of(view.cluster)
        if shape.split_nodes and n <= shape.largest_island:
            gpus = _in_one_island(view, shape, usable, n)
            if gpus is not None:
                return gpus
        return free_gpus_of_node(view, node, n)
    shape = _shape_of(view.cluster)
    if shape.n_racks > 1:
        rack_usable = np.bincount(shape.node_rack, weights=usable, minlength=shape.n_racks)
        rack = int(np.where(rack_usable >= n, rack_usable, np.inf).argmin())
        if rack_usable[rack] >= n:
            return _gang(view, np.where(shape.node_rack == rack, usable, 0), n)
    return _gang(view, usable, n)


def _usable_or_none(view: View, job: Job) -> np.ndarray | None:
    """Usable free GPUs per node, or None when they cannot add up to the job."""
    if view.free_gpus < job.n_gpus:
        return None
    usable = usable_gpus_per_node(view, job)
    return usable if usable.sum() >= job.n_gpus else None


def _gang(view: View, usable: np.ndarray, n: int) -> np.ndarray:
    """The gang rule: nodes by descending ``usable`` (ties: lowest index), all their GPUs until ``n`` is reached.

    ``usable.sum() >= n`` is the caller's promise.
    """
    order = np.argsort(-usable, kind="stable")
    cumulative = np.cumsum(usable[order])
    last = int(np.searchsorted(cumulative, n))
    nodes = order[: last + 1]
    counts = usable[nodes]  # a copy (fancy indexing)
    counts[last] -= cumulative[last] - n
    ascending = np.argsort(nodes)
    return gather(view, nodes[ascending], counts[ascending])


def _fractional(view: View, job: Job, most_free: bool) -> np.ndarray | None:
    """The usable GPU with the most (or least) free share; ties: lowest GPU index."""
    mask = usable_gpu_mask(view, job)
    free = view.gpu_free_milli
    g = int(np.where(mask, free, -1).argmax() if most_free else np.where(mask, free, _NEVER).argmin())
    return np.array([g], dtype=np.int64) if mask[g] else None


class _Shape(NamedTuple):
    """A cluster's islands and racks as flat arrays, built once per cluster for the topology rule."""

    island_gpus: np.ndarray  # GPU indices grouped by island, ascending inside each island
    island_bounds: np.ndarray  # island i holds island_gpus[island_bounds[i]:island_bounds[i + 1]]
    island_node: np.ndarray  # node of each island
    largest_island: int  # GPUs in the largest island
    split_nodes: bool  # some node has more than one island (else step 1 of topology is step 2)
    node_rack: np.ndarray  # per node: index of its rack among the sorted distinct rack ids
    n_racks: int


_shapes: dict[int, tuple[weakref.ref, _Shape]] = {}


def _shape_of(cluster: ClusterSpec) -> _Shape:
    entry = _shapes.get(id(cluster))
    if entry is not None and entry[0]() is cluster:
        return entry[1]
    island = cluster.gpu_island
    island_gpus = np.argsort(island, kind="stable")
    sizes = np.bincount(island)
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    racks, node_rack = np.unique(cluster.node_rack, return_inverse=True)
    shape = _Shape(island_gpus, bounds, cluster.gpu_node[island_gpus[bounds[:-1]]], int(sizes.max()),
                   sizes.size > cluster.n_nodes, node_rack.reshape(-1), racks.size)
    _shapes[id(cluster)] = (weakref.ref(cluster), shape)
    weakref.finalize(cluster, _shapes.pop, id(cluster), None)
    return shape


def _in_one_island(view: View, shape: _Shape, usable: np.ndarray, n: int) -> np.ndarray | None:
    """The lowest ``n`` free GPUs of the island with the fewest usable free GPUs that holds ``n``, or None."""
    whole_free = view.gpu_whole_free[shape.island_gpus]
    free_per_island = np.add.reduceat(whole_free, shape.island_bounds[:-1], dtype=np.int64)
    island_usable = np.minimum(free_per_island, usable[shape.island_node])
    island = int(np.where(island_usable >= n, island_usable, _NEVER).argmin())
    if island_usable[island] < n:
        return None
    lo, hi = shape.island_bounds[island], shape.island_bounds[island + 1]
    return shape.island_gpus[lo:hi][whole_free[lo:hi]][:n]


# ---- registry -------------------------------------------------------------------------------------------------
# Imported here, after the helpers it uses are defined: envs.placement_extra builds on this module.
from envs.placement_extra import fragmentation, locality  # noqa: E402

PLACEMENT_RULES: dict[str, PlacementRule] = {
    "firstfit": first_fit,
    "pack": pack,
    "spread": spread,
    "topology": topology,
    "locality": locality,
    "fragmentation": fragmentation,
}
"""The placement rules by name, in the order an env lists them."""

PLACEMENT_DOCS: dict[str, str] = {
    "firstfit": "first node that holds the job, else the first free GPUs across nodes",
    "pack": "best-fit: the node or GPU share with the least room that still holds the job",
    "spread": "worst-fit: the node or GPU share with the most room",
    "topology": "smallest topology level (NVLink island, node, rack), then pack",
    "locality": "nodes whose cache holds the job's dataset first, then pack",
    "fragmentation": "least increase in free GPUs left unusable for the pending job mix, then pack",
}
"""One line per rule, for command-line help and reports."""


def get_placement_rule(name: str) -> PlacementRule:
    """The placement rule registered as ``name``; raises :class:`ConfigError` naming the known rules."""
    rule = PLACEMENT_RULES.get(name)
    if rule is None:
        raise ConfigError(f"placement rule {name!r}: unknown (known: {', '.join(PLACEMENT_RULES)})")
    return rule
