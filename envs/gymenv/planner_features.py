"""Features a planner reads: where GPUs free up soon, which gang jobs wait and how long, which nodes are broken
into, and which whole nodes a start would break.

They extend the env's observation when ``EnvConfig.planner_features`` is on (and always in the heuristic-selection
env of :mod:`agents.selection_env`):

- four columns appended to each ``cluster`` row (:data:`HORIZON_FEATURES`): the group's GPU share free now or held
  by running jobs expected (start + requested time) to end within 15 minutes, 1 hour and 4 hours, and the share of
  its nodes with some but not all GPUs free;
- ten values appended to ``global`` (:data:`GANG_FEATURES`): per gang size class (1, 2, 3-4, 5-8 and more than 8
  GPUs) the pending jobs of that size over ``max_queue_obs`` and the age of the oldest, log-scaled as ``wait``;
- one column appended to each ``placements`` row (:data:`BREAK_FEATURE`): of the nodes an allocation uses, the
  share that are entirely free now and that it leaves partly free.

Every value is in [0, 1]. Expected ends use requested times (what a scheduler knows), never true runtimes.
"""

from __future__ import annotations

import math

import numpy as np

from envs.core.cluster import MILLI_PER_GPU, ClusterSpec
from envs.sim.view import View

HORIZONS_S = (900.0, 3600.0, 14400.0)
"""The horizons of the ``free_within`` columns [s]: 15 minutes, 1 hour, 4 hours."""
HORIZON_FEATURES = ("free_within_15m", "free_within_1h", "free_within_4h", "partial_nodes")
GANG_BOUNDS = (1, 2, 4, 8)
"""Upper bounds of the gang size classes [GPUs]: 1, 2, 3-4, 5-8, then everything larger."""
GANG_FEATURES = tuple(f"{what}_{label}" for label in ("1", "2", "3to4", "5to8", "over8")
                      for what in ("gangs", "oldest"))
BREAK_FEATURE = "breaks_nodes"


def gang_class(n_gpus: int) -> int:
    """The size class (0..4) of a job of ``n_gpus`` whole GPUs (a fractional job counts as 1)."""
    return int(np.searchsorted(GANG_BOUNDS, n_gpus))


def horizon_columns(view: View, node_group: np.ndarray, n_groups: int) -> np.ndarray:
    """(groups, 4): :data:`HORIZON_FEATURES` of each node group (``node_group``: the group of each node)."""
    cluster = view.cluster
    now = view.time_s
    gpu_group = node_group[cluster.gpu_node]
    capacity = np.bincount(gpu_group, minlength=n_groups) * float(MILLI_PER_GPU)
    free_now = np.bincount(gpu_group, weights=view.gpu_free_milli, minlength=n_groups)
    out = np.zeros((n_groups, len(HORIZON_FEATURES)), dtype=np.float64)
    freed = np.zeros((len(HORIZONS_S), n_groups))
    for run in view.running.values():
        left_s = run.expected_end_s - now
        if left_s > HORIZONS_S[-1]:
            continue
        by_group = np.bincount(gpu_group[np.asarray(run.gpus)], minlength=n_groups) * float(run.job.gpu_milli)
        for h, horizon_s in enumerate(HORIZONS_S):
            if left_s <= horizon_s:
                freed[h] += by_group
    out[:, :3] = (free_now[None, :] + freed).T / capacity[:, None]
    node_free, node_size = view.node_free_gpus, cluster.node_n_gpus
    partial = (node_free > 0) & (node_free < node_size)
    out[:, 3] = np.bincount(node_group, weights=partial, minlength=n_groups) / np.bincount(node_group,
                                                                                          minlength=n_groups)
    return np.clip(out, 0.0, 1.0).astype(np.float32)


def gang_values(view: View, max_queue_obs: int, max_wait_obs_s: float) -> np.ndarray:
    """(10,): :data:`GANG_FEATURES`, the pending jobs per size class and the oldest one's age."""
    counts = np.zeros(len(GANG_BOUNDS) + 1)
    oldest = np.zeros(len(GANG_BOUNDS) + 1)
    now = view.time_s
    for job in view.pending.values():
        k = gang_class(job.n_gpus)
        counts[k] += 1
        oldest[k] = max(oldest[k], now - job.submit_time_s)
    out = np.empty(2 * len(counts), dtype=np.float32)
    out[0::2] = np.minimum(1.0, counts / max_queue_obs)
    out[1::2] = np.minimum(1.0, np.log1p(oldest) / math.log1p(max_wait_obs_s))
    return out


def breaks_nodes(view: View, cluster: ClusterSpec, gpus: np.ndarray, fractional: bool) -> float:
    """Of the nodes the allocation ``gpus`` uses, the share that are entirely free now and that it leaves partly
    free (a fractional job always leaves its node partly free)."""
    nodes, taken = np.unique(cluster.gpu_node[np.asarray(gpus)], return_counts=True)
    size = cluster.node_n_gpus[nodes]
    whole = view.node_free_gpus[nodes] == size
    broken = whole & ((taken < size) | fractional)
    return float(broken.sum()) / len(nodes)
