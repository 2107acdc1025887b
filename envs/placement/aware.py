"""The aware placement rules (SPEC §6): they weigh more than free room, namely data locality and fragmentation.

Like the basic rules (:mod:`envs.placement.basic`) they are complete (None only when no valid allocation exists
now), take a node's lowest free GPUs, and fall back to :func:`~envs.placement.basic.pack` and its gang rule.

**locality** — a job with a dataset runs without staging on a node whose cache holds it (``view.has_dataset``).
(1) Among the nodes that hold the whole job and cache its dataset: pack (fewest usable free GPUs, ties lowest
index). (2) Else, if some node holds the whole job: plain pack. (3) A gang (no node holds it): if the caching nodes'
usable GPUs add up to the job, the gang rule among the caching nodes only; else the plain gang rule: the runtime
model stages the dataset whenever any node of the allocation misses it, so a gang that includes one uncached node
gains nothing by preferring cached ones. A fractional share: the usable GPU with the least free share on a
caching node, else pack. A job without a dataset: pack.

**fragmentation** — keep free GPUs usable by the jobs that are likely to come. The *job mix* is the GPU counts of
the other pending jobs, each job weighing 1 (a fractional job counts as 1 GPU); when no other job is pending, the
illustrative default :data:`DEFAULT_MIX` (1, 2, 4, 8 GPUs weighing 5 : 2 : 2 : 1, majority single-GPU as in
published GPU traces). A node with f free GPUs strands them for a request of k GPUs when
f < min(k, node size): a node smaller than k can join a gang only when entirely free, the measure the simulator
integrates as fragmentation (SPEC §7). Score of a node = Σ_k weight_k × f × [f < min(k, size)], the (unnormalized)
expected stranded free GPUs. A whole-GPU job goes to the node that holds it whose score increases least when f
becomes f − n; ties: pack. A gang: pack's gang rule. A fractional share of m milli-GPU: like pack (least free share,
ties lowest index), but among the usable GPUs whose free share after placement is 0 or still at least the smallest
fractional request of the other pending jobs (their own share m when none is pending), when any is.
Scores use integer weights, so ties are exact. Types, CPU and health are ignored by the score (cluster shape only).
A MIG job: the usable GPU where taking the instance (at the lowest free valid position, where the simulator puts it)
removes the fewest possible instances, counted over every (profile, valid position) of the GPU's type that is still
free (unweighted: any profile may come); ties: pack's order (fewest free slices, MIG mode first), then lowest index.
Locality places a MIG job like a fractional share, comparing free slices.
"""

from __future__ import annotations

import numpy as np

from envs.core.cluster import MILLI_PER_GPU
from envs.core.job import Job
from envs.placement.basic import fractional_share, gang, pack
from envs.placement.feasibility import NEVER, free_gpus_of_node, share_room, usable_gpu_mask, usable_or_none
from envs.sim.view import View

DEFAULT_MIX = ((1, 5), (2, 2), (4, 2), (8, 1))
"""(GPUs, integer weight) of the job mix assumed when no other job is pending: illustrative, single-GPU heavy."""

Mix = tuple[np.ndarray, np.ndarray]
"""Distinct request sizes and their integer weights."""


# ---- locality ---------------------------------------------------------------------------------------------------
def locality(view: View, job: Job) -> np.ndarray | None:
    """Locality-aware: nodes whose dataset cache holds the job's dataset first, then pack.

    The exact steps are in the module docstring.
    """
    if not job.dataset_id:
        return pack(view, job)
    cached = cached_nodes(view, job.dataset_id)
    if job.is_fractional:
        mask = usable_gpu_mask(view, job) & cached[view.cluster.gpu_node]
        if not mask.any():
            return pack(view, job)
        return np.array([int(np.where(mask, share_room(view, job), NEVER).argmin())], dtype=np.int64)
    usable = usable_or_none(view, job)
    if usable is None:
        return None
    n = job.n_gpus
    near = np.where(cached, usable, 0)
    node = int(np.where(near >= n, near, NEVER).argmin())
    if near[node] >= n:
        return free_gpus_of_node(view, node, n)
    if (usable >= n).any():
        return pack(view, job)
    return gang(view, near if near.sum() >= n else usable, n)


def cached_nodes(view: View, dataset_id: str) -> np.ndarray:
    """Per node: True when its cache holds ``dataset_id`` (memoized per state: caches change only on a start)."""
    n_nodes = view.cluster.n_nodes
    return view.memoized(("cached", dataset_id), lambda: np.fromiter(
        (view.has_dataset(i, dataset_id) for i in range(n_nodes)), dtype=bool, count=n_nodes))


# ---- fragmentation ------------------------------------------------------------------------------------------------
def fragmentation(view: View, job: Job) -> np.ndarray | None:
    """Fragmentation-aware: the node whose free GPUs left unusable for the pending job mix grow least.

    The score and its ties are in the module docstring.
    """
    if job.is_fractional:
        return _mig_keeping_geometry(view, job) if job.mig_profile else _fractional_keeping_room(view, job)
    usable = usable_or_none(view, job)
    if usable is None:
        return None
    n = job.n_gpus
    candidates = (usable >= n).nonzero()[0]
    if candidates.size == 0:
        return gang(view, usable, n)
    sizes, weights = job_mix(view, job)
    free = view.node_free_gpus[candidates]
    limits = np.minimum(sizes[None, :], view.cluster.node_n_gpus[candidates, None])
    increase = stranded_score(free - n, limits, weights) - stranded_score(free, limits, weights)
    best = np.lexsort((candidates, usable[candidates], increase))[0]  # least increase, then pack, then index
    return free_gpus_of_node(view, int(candidates[best]), n)


def stranded_score(free: np.ndarray, limits: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Per node: Σ_k weights[k] × free × [free < limits[:, k]] (integer: expected stranded GPUs × total weight)."""
    return free * ((free[:, None] < limits) @ weights)


def job_mix(view: View, job: Job) -> Mix:
    """(distinct GPU counts, integer weights) of the pending jobs other than ``job``; :data:`DEFAULT_MIX` if none."""
    return _others(_pending_histogram(view, 0), job.n_gpus if job.job_id in view.pending else None, DEFAULT_MIX)


def _pending_histogram(view: View, column: int) -> np.ndarray:
    """Distinct values and counts (shape (2, K)) of the pending jobs' GPU counts (column 0) or fractional shares
    (column 1, ordinary fractional jobs only: MIG instances cannot share a GPU in full mode), memoized per state
    and time: arrivals change pending without a new state."""
    def compute() -> np.ndarray:
        if column == 0:
            values = [j.n_gpus for j in view.pending.values()]
        else:
            values = [j.gpu_milli for j in view.pending.values() if j.gpu_milli < MILLI_PER_GPU and not j.mig_profile]
        return np.array(np.unique(np.array(values, dtype=np.int64), return_counts=True), dtype=np.int64)
    return view.memoized(("pending_histogram", column, view.time_s), compute)


def _others(histogram: np.ndarray, own: int | None, default: tuple[tuple[int, int], ...]) -> Mix:
    """The histogram less one job of value ``own`` (None: the job is not pending), or ``default`` when empty."""
    values, counts = histogram
    if own is not None:
        counts = counts.copy()
        counts[np.searchsorted(values, own)] -= 1
        keep = counts > 0
        values, counts = values[keep], counts[keep]
    if values.size == 0:
        return np.array([v for v, _ in default], dtype=np.int64), np.array([w for _, w in default], dtype=np.int64)
    return values, counts


def _fractional_keeping_room(view: View, job: Job) -> np.ndarray | None:
    mask = usable_gpu_mask(view, job)
    if not mask.any():
        return None
    own = job.gpu_milli if job.job_id in view.pending else None
    shares, _ = _others(_pending_histogram(view, 1), own, ((job.gpu_milli, 1),))
    smallest = int(shares[0])
    left = view.gpu_free_milli - job.gpu_milli
    good = mask & ((left == 0) | (left >= smallest))
    if not good.any():
        return fractional_share(view, job, most_free=False)
    return np.array([int(np.where(good, view.gpu_free_milli, NEVER).argmin())], dtype=np.int64)


def _mig_keeping_geometry(view: View, job: Job) -> np.ndarray | None:
    mask = usable_gpu_mask(view, job)
    candidates = mask.nonzero()[0]
    if candidates.size == 0:
        return None
    c = view.cluster
    used = view.gpu_mig_used[candidates]
    geometry = c.gpu_mig_geometry[candidates]
    after = used | c.mig_table("mask", job.mig_profile)[geometry, used]
    placements = c.mig_table("placements", "")
    loss = placements[geometry, used] - placements[geometry, after]
    room = share_room(view, job)[candidates]
    best = np.lexsort((candidates, room, loss))[0]  # fewest instances lost, then pack, then index
    return np.array([int(candidates[best])], dtype=np.int64)
