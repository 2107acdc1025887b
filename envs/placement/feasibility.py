"""Feasibility queries shared by the placement rules: which GPUs and nodes a job could use now, and how to take them.

Every function takes a :class:`~envs.sim.view.View` (or a projected state of :mod:`envs.sim.profile`) and a job,
and is vectorized over nodes: no Python loop over GPUs.

A fractional job may share a GPU only when the GPU has its share, its memory (``gpu_mem_mib``; none needed when 0)
and holds no MIG slice; a MIG job only where its type offers the profile, a valid position of it is free, and the GPU
is empty or already holds slices (a GPU in full mode with fractional jobs on it cannot switch to MIG mode). A
whole-GPU job (a ``7g`` MIG instance included) needs entirely free GPUs, whose memory is all free.
"""

from __future__ import annotations

import numpy as np

from envs.core.job import Job
from envs.core.mig import FREE_SLICES
from envs.sim.view import View

NEVER = np.iinfo(np.int64).max
"""A key no candidate reaches: masks out nodes and GPUs in an argmin."""


def eligible_free_gpus(view: View, job: Job) -> np.ndarray:
    """Fully free GPUs per node, counting only nodes whose GPU type, memory and health suit ``job``.

    CPU and RAM are not checked here: see :func:`usable_gpus_per_node` and :func:`node_has_cpu_ram`.
    """
    if not (job.gpu_types or job.gpu_mem_gib or job.partition or job.mig_profile
            or view.cluster.governance.partitions) and view.all_nodes_up:
        return view.node_free_gpus
    eligible = view.cluster.eligible_nodes(job.gpu_types, job.gpu_mem_gib, job.partition, job.mig_profile) \
        & view.node_up
    return np.where(eligible, view.node_free_gpus, 0)


def eligible_gpu_mask(view: View, job: Job) -> np.ndarray:
    """Per GPU: True when its node suits ``job`` (type, memory, health) and it could take the job's share now: the
    free share, memory and mode of an ordinary fractional job, a free valid position of a MIG job's profile (module
    docstring)."""
    c = view.cluster
    node_ok = c.eligible_nodes(job.gpu_types, job.gpu_mem_gib, job.partition, job.mig_profile) & view.node_up
    mask = node_ok[c.gpu_node] & (view.gpu_free_milli >= job.gpu_milli)
    if job.mig_profile:
        used = view.gpu_mig_used
        fits = c.mig_table("lowest", job.mig_profile)[c.gpu_mig_geometry, used] >= 0
        return mask & fits & (view.gpu_whole_free | (used != 0))
    if c.has_mig:
        mask &= view.gpu_mig_used == 0
    need = job.gpu_mem_mib
    if need:
        mask &= view.gpu_free_mem_mib >= need
    return mask


def share_room(view: View, job: Job) -> np.ndarray:
    """Per GPU, the room a fractional job's rules compare (less room first for pack): the free share [milli-GPU]
    of an ordinary fractional job; for a MIG job 2 × free memory slices, + 1 on a GPU in full mode (which the job
    would have to switch), so that among equally free GPUs those already in MIG mode come first."""
    if not job.mig_profile:
        return view.gpu_free_milli
    return 2 * FREE_SLICES[view.gpu_mig_used] + ~view.gpu_mig_mode


def usable_gpus_per_node(view: View, job: Job) -> np.ndarray:
    """How many fully free GPUs of each node ``job`` could use now (type, memory, health, CPU and RAM).

    Read-only, and memoized on the view per state: jobs of one shape share it until the holdings change.
    """
    if not (job.cpu_milli_per_gpu or job.ram_mib_per_gpu):
        return eligible_free_gpus(view, job)
    key = ("usable", job.gpu_types, job.gpu_mem_gib, job.partition, job.mig_profile, job.cpu_milli_per_gpu,
           job.ram_mib_per_gpu)
    return view.memoized(key, lambda: cap_by_cpu_ram(view, job, eligible_free_gpus(view, job)))


def usable_gpu_mask(view: View, job: Job) -> np.ndarray:
    """Per GPU: True when a fractional ``job`` could take its share of that GPU now (CPU and RAM included)."""
    c = view.cluster
    node_ok = cap_by_cpu_ram(view, job, np.ones(c.n_nodes, dtype=np.int64)) > 0
    return eligible_gpu_mask(view, job) & node_ok[c.gpu_node]


def node_has_cpu_ram(view: View, job: Job, node: int, n_gpus: int) -> bool:
    """True when ``node`` has the free CPU and RAM for ``n_gpus`` of the job's GPUs."""
    c = view.cluster
    cpu, ram = job.cpu_milli_per_gpu, job.ram_mib_per_gpu
    if cpu and c.cpu_modelled[node] and view.node_free_cpu_milli[node] < n_gpus * cpu:
        return False
    return not (ram and c.ram_modelled[node] and view.node_free_ram_mib[node] < n_gpus * ram)


def cap_by_cpu_ram(view: View, job: Job, per_node: np.ndarray) -> np.ndarray:
    """``per_node`` GPU counts capped by what each node's free CPU and RAM can feed (where they are modelled)."""
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
    taken = counts > 0  # skipped in numpy: a gang's prefix of nodes is mostly nodes with nothing free
    parts = [free_gpus_of_node(view, int(n), int(k)) for n, k in zip(nodes[taken], counts[taken], strict=True)]
    return np.concatenate(parts)



def usable_or_none(view: View, job: Job) -> np.ndarray | None:
    """Usable free GPUs per node, or None when they cannot add up to the job."""
    if view.free_gpus < job.n_gpus:
        return None
    usable = usable_gpus_per_node(view, job)
    return usable if usable.sum() >= job.n_gpus else None


