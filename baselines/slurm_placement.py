"""How the ``slurm`` policy places a job on nodes as ``select/cons_tres`` does (:mod:`baselines.slurm`, **Nodes**):
``--gres=gpu:G`` counts per node, a job larger than a node asks ``-N N --gres=gpu:G/N``; and whether a start that
backfill planned earlier in the instant can still be made."""

from __future__ import annotations

import math

import numpy as np

from baselines.shapes import shape_key_of
from envs.core.job import Job
from envs.placement.feasibility import gather, usable_gpus_per_node
from envs.sim.view import PlacementRule, View


def still_free(view: View, job: Job, gpus: np.ndarray) -> bool:
    """Whether ``gpus``, planned for ``job`` earlier in the instant, can still take it: whole GPUs entirely free, or
    a fractional job's share and memory [MiB] free on its GPU."""
    if job.is_fractional:
        return bool(np.all((view.gpu_free_milli[gpus] >= job.gpu_milli)
                           & (view.gpu_free_mem_mib[gpus] >= job.gpu_mem_mib)))
    return bool(np.all(view.gpu_whole_free[gpus]))


def nodes_needed(biggest_node: int, job: Job) -> tuple[int, int] | None:
    """(whole free GPUs needed on each node, nodes) of a whole-GPU ``job`` as :func:`whole_node_gang` places it:
    (G, 1) for a job that fits the largest node, (G/N, N) for one split evenly over N nodes; None for a fractional
    job or one whose GPUs do not split evenly (the rule alone decides those). ``biggest_node``: the GPUs of the
    cluster's largest node."""
    if job.is_fractional:
        return None
    n_nodes = math.ceil(job.n_gpus / biggest_node)
    return None if job.n_gpus % n_nodes else (job.n_gpus // n_nodes, n_nodes)


def whole_node_gang(rule: PlacementRule) -> PlacementRule:
    """``rule`` on one node for a job that fits one (``--gres=gpu:G`` counts per node: such a job never spans
    nodes; None while no node has room), and for a job larger than the cluster's largest node N nodes with G/N free
    GPUs each, as ``sbatch -N N --gres=gpu:G/N`` asks (module docstring); None while fewer than N nodes have them."""
    def place(view: View, job: Job) -> np.ndarray | None:
        c = view.cluster
        need = nodes_needed(int(c.node_n_gpus.max()), job)
        if job.is_fractional or (need is not None and need[1] == 1):
            gpus = rule(view, job)
            if gpus is None:
                return None
            gpus = np.asarray(gpus)  # nodes hold ascending runs of GPU indices: one node iff its ends agree
            return gpus if c.gpu_node[gpus.min()] == c.gpu_node[gpus.max()] else None
        if need is None:  # GPUs that do not split evenly over the nodes: the rule alone decides
            return rule(view, job)
        per_node, n_nodes = need
        nodes = np.flatnonzero(usable_gpus_per_node(view, job) >= per_node)[:n_nodes]
        return gather(view, nodes, np.full(n_nodes, per_node)) if len(nodes) == n_nodes else None
    place.shape_of = shape_key_of(rule)  # it reads no more of a job than the rule does: answers shared by shape
    return place
