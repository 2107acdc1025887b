"""Placement rules: functions (view, job) -> GPUs to start the job on now, or None when it does not fit.

They live with the world model because both the heuristics (``baselines/``) and the Gymnasium env's action
decoder use them, so a learned agent chooses among exactly the placements the heuristics make. This module holds
the shared feasibility query and the minimal rule, first-fit; the other rules arrive with the baselines.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from envs.job import Job
from envs.view import View

PlacementRule = Callable[[View, Job], "np.ndarray | None"]
"""The type of a placement rule: the ascending global GPU indices to start the job on, or None."""


def usable_gpus_per_node(view: View, job: Job) -> np.ndarray:
    """How many fully free GPUs of each node ``job`` could use now (type, memory, health, CPU and RAM)."""
    c = view.cluster
    unconstrained = not (job.gpu_types or job.gpu_mem_gib or job.cpu_milli_per_gpu or job.ram_mib_per_gpu)
    if unconstrained and view.all_nodes_up:
        return view.node_free_gpus
    eligible = c.eligible_nodes(job.gpu_types, job.gpu_mem_gib) & view.node_up
    usable = np.where(eligible, view.node_free_gpus, 0)
    return _cap_by_cpu_ram(view, job, usable)


def usable_gpu_mask(view: View, job: Job) -> np.ndarray:
    """Per GPU: True when a fractional ``job`` could take its share of that GPU now."""
    c = view.cluster
    node_ok = c.eligible_nodes(job.gpu_types, job.gpu_mem_gib) & view.node_up
    node_ok &= _cap_by_cpu_ram(view, job, np.ones(c.n_nodes, dtype=np.int64)) > 0
    return node_ok[c.gpu_node] & (view.gpu_free_milli >= job.gpu_milli)


def _cap_by_cpu_ram(view: View, job: Job, per_node: np.ndarray) -> np.ndarray:
    c = view.cluster
    if job.cpu_milli_per_gpu:
        by_cpu = view.node_free_cpu_milli // job.cpu_milli_per_gpu
        per_node = np.where(c.node_cpu_milli > 0, np.minimum(per_node, by_cpu), per_node)
    if job.ram_mib_per_gpu:
        by_ram = view.node_free_ram_mib // job.ram_mib_per_gpu
        per_node = np.where(c.node_ram_mib > 0, np.minimum(per_node, by_ram), per_node)
    return per_node


def free_gpus_of_node(view: View, node: int, count: int) -> np.ndarray:
    """The first ``count`` fully free GPUs of ``node`` (global indices, ascending)."""
    first, last = view.cluster.node_first_gpu[node], view.cluster.node_first_gpu[node + 1]
    return view.gpu_whole_free[first:last].nonzero()[0][:count] + first


def gather(view: View, nodes: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Take ``counts[i]`` free GPUs from each ``nodes[i]`` (nodes ascending), lowest indices first."""
    parts = [free_gpus_of_node(view, int(n), int(k)) for n, k in zip(nodes, counts, strict=True) if k > 0]
    return np.concatenate(parts)


def first_fit(view: View, job: Job) -> np.ndarray | None:
    """The first node (in index order) that can host the whole job; if none can, the first free GPUs across nodes.

    A fractional job takes the first GPU with enough free share.
    """
    if job.is_fractional:
        candidates = np.flatnonzero(usable_gpu_mask(view, job))
        return candidates[:1] if candidates.size else None
    n = job.n_gpus
    if view.free_gpus < n:
        return None
    usable = usable_gpus_per_node(view, job)
    whole = (usable >= n).nonzero()[0]
    if whole.size:
        return free_gpus_of_node(view, int(whole[0]), n)
    cumulative = np.cumsum(usable)
    if cumulative[-1] < n:
        return None
    last = int(np.searchsorted(cumulative, n))
    counts = usable[: last + 1].copy()
    counts[last] -= cumulative[last] - n
    return gather(view, np.arange(last + 1), counts)
