"""The basic placement rules (SPEC §6): first-fit, pack (best-fit), spread (worst-fit) and topology-aware.

Every rule is complete: it returns None only when no valid allocation exists now, i.e. when
``usable_gpus_per_node(view, job).sum() < job.n_gpus`` (whole GPUs) or ``usable_gpu_mask(view, job)`` is all
False (a fractional share). A job that fits on no single node is placed by the same gang rule (:func:`gang`) in
pack, spread and topology's last step: nodes in descending order of usable GPUs (ties: lowest index), all of each
node's usable GPUs until the last node gives the remainder, so the job spans the fewest nodes. GPUs inside a node
are its lowest free indices. Rules are vectorized over nodes (and islands): no Python loop over GPUs.

A MIG job (one instance of a profile on one GPU) is a fractional share whose room is counted in free memory slices
(:func:`~envs.placement.feasibility.share_room`): first-fit takes the first GPU where the profile fits, pack (and
topology) the fitting GPU with the fewest free slices, spread the one with the most; ties go to a GPU already in MIG
mode (no switch), then the lowest index. The simulator puts the instance at the lowest free valid position of that
GPU. A ``7g`` instance takes a whole GPU and is placed as a whole-GPU job.
"""

from __future__ import annotations

import weakref
from typing import NamedTuple

import numpy as np

from envs.core.cluster import ClusterSpec
from envs.core.job import Job
from envs.core.mig import FREE_SLICES
from envs.placement.feasibility import (
    NEVER,
    eligible_free_gpus,
    eligible_gpu_mask,
    free_gpus_of_node,
    gather,
    node_has_cpu_ram,
    share_room,
    usable_gpu_mask,
    usable_gpus_per_node,
    usable_or_none,
)
from envs.sim.view import View


def shape_key(job: Job) -> tuple:
    """What the basic rules (first-fit, pack, spread, topology) read of a job: GPUs, share, types, memory, CPU and
    RAM per GPU, partition and MIG profile. At one state, jobs of one shape get the same GPUs from each of them."""
    return (job.n_gpus, job.gpu_milli, job.gpu_types, job.gpu_mem_gib, job.cpu_milli_per_gpu, job.ram_mib_per_gpu,
            job.partition, job.mig_profile)


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



def pack(view: View, job: Job) -> np.ndarray | None:
    """Best-fit: leave the least room behind, so that large holes stay whole for large jobs.

    Whole GPUs: the node with the fewest usable free GPUs that still holds the job (ties: lowest node index);
    when no node does, the gang rule (module docstring). A fractional share: the usable GPU with the least free
    share that still holds it, so partly used GPUs fill first (ties: lowest GPU index).
    """
    if job.is_fractional:
        return fractional_share(view, job, most_free=False)
    usable = usable_or_none(view, job)
    if usable is None:
        return None
    node = int(np.where(usable >= job.n_gpus, usable, NEVER).argmin())
    if usable[node] >= job.n_gpus:
        return free_gpus_of_node(view, node, job.n_gpus)
    return gang(view, usable, job.n_gpus)


def spread(view: View, job: Job) -> np.ndarray | None:
    """Worst-fit: put the job where the most room is, to even out load (and leave partly used GPUs alone).

    Whole GPUs: the node with the most usable free GPUs (ties: lowest node index) when it holds the job; else the
    same gang as pack, on purpose: a gang spread over more nodes than needed would only add communication.
    A fractional share: the usable GPU with the most free share (ties: lowest GPU index).
    """
    if job.is_fractional:
        return fractional_share(view, job, most_free=True)
    usable = usable_or_none(view, job)
    if usable is None:
        return None
    node = int(usable.argmax())
    if usable[node] >= job.n_gpus:
        return free_gpus_of_node(view, node, job.n_gpus)
    return gang(view, usable, job.n_gpus)


def topology(view: View, job: Job) -> np.ndarray | None:
    """Topology-aware: the smallest topology level (NVLink island, node, rack) that holds the job now, then pack.

    In order: (1) one NVLink island: the island with the fewest usable free GPUs that holds the job (ties: lowest
    island id, i.e. node order, then the node's island order), its lowest free GPUs; an island's usable count is
    capped by its node's CPU/RAM. (2) One node: plain pack among the nodes that hold the job. The runtime model
    charges the same factor for every placement that spans two or more islands of a node, so choosing the node
    (or GPUs) that span the fewest islands would buy nothing and is not done. (3) One rack: among racks whose
    usable GPUs add up to the job, the one with the fewest (ties: lowest rack id), and the gang rule inside it.
    (4) The gang rule across racks. A fractional share sits on one GPU, always inside one island: as pack.
    """
    if job.is_fractional:
        return fractional_share(view, job, most_free=False)
    usable = usable_or_none(view, job)
    if usable is None:
        return None
    n = job.n_gpus
    node = int(np.where(usable >= n, usable, NEVER).argmin())
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
            return gang(view, np.where(shape.node_rack == rack, usable, 0), n)
    return gang(view, usable, n)



def gang(view: View, usable: np.ndarray, n: int) -> np.ndarray:
    """The gang rule: nodes by descending ``usable`` (ties: lowest index), all their GPUs until ``n`` is reached.

    ``usable.sum() >= n`` is the caller's promise.
    """
    return take_in_order(view, usable, np.argsort(-usable, kind="stable"), n)


def take_in_order(view: View, usable: np.ndarray, order: np.ndarray, n: int) -> np.ndarray:
    """All the ``usable`` GPUs of the nodes in ``order``, one node after the other, until ``n`` are taken (the last
    node gives the remainder); ascending. ``usable[order].sum() >= n`` is the caller's promise."""
    cumulative = np.cumsum(usable[order])
    last = int(np.searchsorted(cumulative, n))
    nodes = order[: last + 1]
    counts = usable[nodes]  # a copy (fancy indexing)
    counts[last] -= cumulative[last] - n
    ascending = np.argsort(nodes)
    return gather(view, nodes[ascending], counts[ascending])



def fractional_share(view: View, job: Job, most_free: bool) -> np.ndarray | None:
    """The usable GPU with the most (or least) free share (free slices for a MIG job); ties: lowest GPU index (for a
    MIG job, first a GPU already in MIG mode)."""
    mask = usable_gpu_mask(view, job)
    if most_free:
        free = 2 * FREE_SLICES[view.gpu_mig_used] + view.gpu_mig_mode if job.mig_profile else view.gpu_free_milli
        g = int(np.where(mask, free, -1).argmax())
    else:
        g = int(np.where(mask, share_room(view, job), NEVER).argmin())
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
    island = int(np.where(island_usable >= n, island_usable, NEVER).argmin())
    if island_usable[island] < n:
        return None
    lo, hi = shape.island_bounds[island], shape.island_bounds[island + 1]
    return shape.island_gpus[lo:hi][whole_free[lo:hi]][:n]


