"""Kubernetes' default scheduling cycle for GPU pods (SPEC §6): the ``k8s:`` policies.

One job is a pod asking for ``nvidia.com/gpu`` (whole GPUs; a fractional job asks for ``gpu_milli`` of one GPU),
``cpu`` (``cpu_milli_per_gpu`` per GPU [milli-cores]) and ``memory`` (``ram_mib_per_gpu`` per GPU [MiB]).

- **Queue sort** (PrioritySort): priority descending, then creation time (``submit_time_s``), then job id, as
  :meth:`View.schedulable <envs.sim.view.View.schedulable>` gives it to every scheduler (jobs a quota refuses now
  left out; partitions' priority tiers first where a cluster has them). One pod at a time and no reservation: like
  kube's activeQ, a job that cannot be scheduled is set aside and the next is tried, so the scheduler (the greedy
  mode of :class:`~baselines.backfill.Scheduler`) starts the first job in queue order that fits now, else waits.
- **Filter** (NodeResourcesFit, NodeAffinity on the GPU type, node health, node pools): a node passes when it has
  ``n_gpus`` usable whole GPUs (:func:`~envs.placement.feasibility.usable_gpus_per_node`: type, memory, health,
  CPU, RAM, partition), or, for a fractional job, a GPU that can take its share
  (:func:`~envs.placement.feasibility.usable_gpu_mask`).
- **Score**: Σ plugin weight × plugin score over the passing nodes, every plugin score an integer in 0..100
  (MaxNodeScore); the highest total wins. Kube breaks ties at random; here the lowest node index wins, so runs are
  deterministic. The plugins, in kube's integer arithmetic (kubernetes/kubernetes
  ``pkg/scheduler/framework/plugins/``), with ``req`` = what the node's pods already request + this pod's request
  and ``cap`` = the node's allocatable, per resource r with weight w_r:

  - ``NodeResourcesFit`` (``noderesources/least_allocated.go``, ``most_allocated.go``,
    ``requested_to_capacity_ratio.go``, ``helper/shape_score.go``): a resource whose ``cap`` is 0 on a node (CPU or
    RAM not modelled there) is left out of that node's sums.
    LeastAllocated: s_r = (cap − req)·100 // cap (0 when req > cap), score = Σ w_r·s_r // Σ w_r.
    MostAllocated: s_r = min(req, cap)·100 // cap, score = Σ w_r·s_r // Σ w_r.
    RequestedToCapacityRatio: u_r = req·100 // cap (100 when req > cap), s_r = f(u_r) with f the broken-linear
    shape whose scores (0..10) are multiplied by 10 (MaxNodeScore / MaxCustomPriorityScore), interpolated with Go's
    truncating division; score = round(Σ w_r·s_r / Σ w_r) over the resources with s_r > 0 only (0 if none).
  - ``NodeResourcesBalancedAllocation`` (``noderesources/balanced_allocation.go``): fractions f_r = min(req/cap, 1)
    over the resources with a positive weight and cap > 0; std = |f_1 − f_2| / 2 for two, the population standard
    deviation for more, 0 for fewer; score = int((1 − std)·100). Weights do not enter otherwise (kube's neither).
  - ``NVLinkIsland`` (our own plugin): 100 when one NVLink island of the node can hold the job's GPUs on that node
    (its whole free GPUs, capped by what the node's CPU and RAM can feed), else 0; 100 for a fractional job.
  - ``DatasetLocality`` (``imagelocality/image_locality.go``, the dataset as the image): on a node whose cache holds
    the dataset, sum = int(size·k/N) [bytes] with k the nodes caching it and N all nodes, else 0; score =
    100·(clamp(sum, min, max) − min) // (max − min), with thresholds min = 1 GiB and max = 100 GiB by default (kube:
    23 MiB and 1000 MiB for container images; our datasets are larger). 0 for a job without a dataset.

  Requests are taken as they are: kube's non-zero defaults for pods that request no CPU or memory (100 m, 200 MB)
  are not applied. A failed GPU of a healthy node has no free share, so it counts as requested.
- **Inside the chosen node** the job takes the lowest NVLink island that holds it (its lowest free GPUs), else the
  node's lowest free GPUs. A fractional job takes the usable GPU of the node with the least free share that holds
  it (ties: lowest GPU index), so partly used GPUs fill first.
- **Gang** (all or nothing, as Volcano or Kueue provide it) for a job that no single node holds: every node with
  usable GPUs is scored as if it received min(usable, n) of them; nodes in descending score (ties: lowest index)
  give all their usable GPUs until n is reached (the last gives the remainder); the job starts only if they add up.
- **Preemption** (``+preempt``): :class:`~baselines.preemption.Preemptive` (kube's DefaultPreemption) wraps the
  scheduler, with this module's scored placement as its rule.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np

from baselines.backfill import Scheduler
from baselines.kube_scores import (
    MAX_CUSTOM_PRIORITY_SCORE,
    MAX_NODE_SCORE,
    balanced_allocation,
    image_locality,
    least_allocated,
    most_allocated,
    requested_to_capacity_ratio,
)
from baselines.orders import make_order
from baselines.preemption import PREEMPT_SUFFIX, Preemptive
from envs.core.cluster import MILLI_PER_GPU
from envs.core.errors import ConfigError
from envs.core.job import Job
from envs.placement.aware import cached_nodes
from envs.placement.basic import take_in_order
from envs.placement.feasibility import NEVER, free_gpus_of_node, usable_gpu_mask, usable_or_none
from envs.sim.view import View

KUBE_PREFIX = "k8s:"
"""Prefix of the Kubernetes policies' names."""

RESOURCES = ("nvidia.com/gpu", "cpu", "memory")
"""The resources scored, in this order in every (resource, node) array."""

GIB_BYTES = 2**30
"""Bytes per GiB."""

STRATEGIES = ("LeastAllocated", "MostAllocated", "RequestedToCapacityRatio")
"""NodeResourcesFit's scoring strategies."""

PLUGINS = ("fit", "balanced", "island", "locality")
"""The score plugins: NodeResourcesFit, NodeResourcesBalancedAllocation, NVLinkIsland, DatasetLocality."""


@dataclass(frozen=True)
class KubeProfile:
    """A scheduling profile: the Fit strategy and the weights of plugins and resources (integers >= 0)."""

    name: str  # profile name, as in ``k8s:NAME``
    strategy: str  # one of STRATEGIES
    fit_weight: int = 1  # NodeResourcesFit plugin weight (kube's default profile: 1)
    balanced_weight: int = 1  # NodeResourcesBalancedAllocation plugin weight (kube: 1)
    topology_weight: int = 1  # NVLinkIsland plugin weight (ours)
    locality_weight: int = 1  # DatasetLocality plugin weight (kube's ImageLocality: 1)
    gpu_weight: int = 3  # nvidia.com/gpu resource weight (kube's docs weigh extended resources 3 in their examples)
    cpu_weight: int = 1  # cpu resource weight (kube's default: 1)
    memory_weight: int = 1  # memory resource weight (kube's default: 1)
    shape: tuple[tuple[int, int], ...] = ((0, 0), (100, 10))  # (utilization [%], score 0..10): kube's bin packing
    locality_min_gib: float = 1.0  # DatasetLocality lower threshold [GiB]
    locality_max_gib: float = 100.0  # DatasetLocality upper threshold [GiB]

    def __post_init__(self) -> None:
        where = f"policy {KUBE_PREFIX}{self.name}"
        if self.strategy not in STRATEGIES:
            raise ConfigError(f"{where}: strategy: unknown {self.strategy!r} (known: {', '.join(STRATEGIES)})")
        for key in WEIGHT_KEYS:
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(f"{where}: {key}: must be an integer >= 0, got {value!r}")
        utilization = [u for u, _ in self.shape]
        if (not self.shape or any(not 0 <= u <= 100 or not 0 <= s <= MAX_CUSTOM_PRIORITY_SCORE for u, s in self.shape)
                or utilization != sorted(set(utilization))):
            raise ConfigError(f"{where}: shape: needs (utilization, score) points with utilization strictly "
                              f"increasing in 0..100 and scores in 0..{MAX_CUSTOM_PRIORITY_SCORE}, got {self.shape}")
        if not 0 <= self.locality_min_gib < self.locality_max_gib:
            raise ConfigError(f"{where}: locality_min_gib, locality_max_gib: need 0 <= min < max, got "
                              f"{self.locality_min_gib}, {self.locality_max_gib}")

    @property
    def plugin_weights(self) -> dict[str, int]:
        """Weights of :data:`PLUGINS`, by name."""
        return {"fit": self.fit_weight, "balanced": self.balanced_weight, "island": self.topology_weight,
                "locality": self.locality_weight}

    @property
    def resource_weights(self) -> np.ndarray:
        """Weights of :data:`RESOURCES`, in that order."""
        return np.array([self.gpu_weight, self.cpu_weight, self.memory_weight], dtype=np.int64)


WEIGHT_KEYS = ("fit_weight", "balanced_weight", "topology_weight", "locality_weight", "gpu_weight", "cpu_weight",
               "memory_weight")
"""The integer weights of a profile."""

KUBE_PROFILES: dict[str, KubeProfile] = {
    "leastallocated": KubeProfile("leastallocated", "LeastAllocated"),
    "mostallocated": KubeProfile("mostallocated", "MostAllocated"),
    "ratio": KubeProfile("ratio", "RequestedToCapacityRatio"),
    "balanced": KubeProfile("balanced", "LeastAllocated", fit_weight=0, topology_weight=0, locality_weight=0),
}
"""The named profiles; :func:`kube_policy` overrides their fields."""

KUBE_DOCS = {
    "leastallocated": "kube-scheduler, NodeResourcesFit LeastAllocated (spread): fit 1, balanced 1, NVLink island 1, "
                      "dataset locality 1",
    "mostallocated": "kube-scheduler, NodeResourcesFit MostAllocated (bin packing): fit 1, balanced 1, NVLink island "
                     "1, dataset locality 1",
    "ratio": "kube-scheduler, NodeResourcesFit RequestedToCapacityRatio, shape [(0, 0), (100, 10)] (bin packing): "
             "fit 1, balanced 1, NVLink island 1, dataset locality 1",
    "balanced": "kube-scheduler, NodeResourcesBalancedAllocation only (balanced 1, every other plugin 0)",
}
"""One line per ``k8s:`` name, for the catalogue."""

KUBE_PARAM_DOCS = {
    "fit_weight, balanced_weight": "plugin weights of NodeResourcesFit and NodeResourcesBalancedAllocation (int >= 0)",
    "topology_weight": "weight of the NVLink-island plugin: 100 when one island holds the job's GPUs on the node",
    "locality_weight": "weight of dataset locality (kube's ImageLocality with the cached dataset as the image)",
    "gpu_weight, cpu_weight, memory_weight": "resource weights of nvidia.com/gpu, cpu, memory (defaults 3, 1, 1)",
    "shape": "k8s:ratio only: (utilization %, score 0-10) points, piecewise linear (default ((0, 0), (100, 10)))",
    "locality_min_gib, locality_max_gib": "dataset-locality thresholds [GiB] (defaults 1 and 100)",
}
"""The parameters of ``make("k8s:NAME", **params)``, for the catalogue."""


class KubeScheduler(Scheduler):
    """kube-scheduler's cycle (module docstring): the priority order, no reservation, the scored placement."""

    def __init__(self, profile: KubeProfile) -> None:
        super().__init__(KUBE_PREFIX + profile.name, make_order("priority"), "greedy", KubePlacement(profile))
        self.profile = profile



class KubePlacement:
    """The filter-and-score placement rule of a :class:`KubeProfile` (a :data:`~envs.sim.view.PlacementRule`)."""

    def __init__(self, profile: KubeProfile) -> None:
        self.profile = profile

    def __call__(self, view: View, job: Job) -> np.ndarray | None:
        """The GPUs to start ``job`` on now, ascending, or None when no node or gang fits."""
        if job.is_fractional:
            return self._place_share(view, job)
        usable = usable_or_none(view, job)
        if usable is None:
            return None
        n = job.n_gpus
        fits = usable >= n
        if fits.any():
            if np.count_nonzero(fits) == 1:  # the one node that fits wins whatever its score (scores are >= 0)
                return in_node(view, int(fits.argmax()), n)
            totals = self.totals(view, job, np.full(usable.size, n, dtype=np.int64), usable)
            return in_node(view, int(np.where(fits, totals, -1).argmax()), n)
        counts = np.minimum(usable, n)
        return gang_by_score(view, usable, self.totals(view, job, counts, usable), n)

    def totals(self, view: View, job: Job, counts: np.ndarray, usable: np.ndarray | None) -> np.ndarray:
        """Σ plugin weight × plugin score per node, for ``counts[i]`` of the job's GPUs on node i."""
        weights = self.profile.plugin_weights
        found = self.plugin_scores(view, job, counts, usable, [name for name, w in weights.items() if w])
        total = np.zeros(view.cluster.n_nodes, dtype=np.int64)
        for name, score in found.items():
            total += weights[name] * score
        return total

    def plugin_scores(self, view: View, job: Job, counts: np.ndarray, usable: np.ndarray | None,
                      names: Sequence[str] = PLUGINS) -> dict[str, np.ndarray]:
        """The scores (0..100 per node, unweighted) of the plugins ``names`` (:data:`PLUGINS`), for ``counts[i]``
        of the job's GPUs on node i; ``usable`` is the whole free GPUs per node the job could use (None for a
        share)."""
        p = self.profile
        requested, allocatable = node_requests(view, job, counts)
        weights = p.resource_weights
        scorers = {
            "fit": lambda: self._fit(requested, allocatable),
            "balanced": lambda: balanced_allocation(requested, allocatable * (weights > 0)[:, None]),
            "island": lambda: island_fit(view, counts, usable),
            "locality": lambda: self._locality(view, job),
        }
        return {name: scorers[name]() for name in names}

    def _fit(self, requested: np.ndarray, allocatable: np.ndarray) -> np.ndarray:
        p = self.profile
        if p.strategy == "LeastAllocated":
            return least_allocated(requested, allocatable, p.resource_weights)
        if p.strategy == "MostAllocated":
            return most_allocated(requested, allocatable, p.resource_weights)
        return requested_to_capacity_ratio(requested, allocatable, p.resource_weights, p.shape)

    def _locality(self, view: View, job: Job) -> np.ndarray:
        if not job.dataset_id or job.dataset_gib <= 0:
            return np.zeros(view.cluster.n_nodes, dtype=np.int64)
        p = self.profile
        return image_locality(cached_nodes(view, job.dataset_id), int(job.dataset_gib * GIB_BYTES),
                              int(p.locality_min_gib * GIB_BYTES), int(p.locality_max_gib * GIB_BYTES))

    def _place_share(self, view: View, job: Job) -> np.ndarray | None:
        """A fractional job: the best-scored node with a usable GPU, then its usable GPU with the least free share."""
        mask = usable_gpu_mask(view, job)
        if not mask.any():
            return None
        c = view.cluster
        ok = np.bincount(c.gpu_node[mask], minlength=c.n_nodes) > 0
        if np.count_nonzero(ok) == 1:  # the one node with a usable GPU wins whatever its score (scores are >= 0)
            node = int(ok.argmax())
        else:
            node = int(np.where(ok, self.totals(view, job, np.ones(c.n_nodes, dtype=np.int64), None), -1).argmax())
        first, last = int(c.node_first_gpu[node]), int(c.node_first_gpu[node + 1])
        local = np.where(mask[first:last], view.gpu_free_milli[first:last], NEVER)
        return np.array([first + int(local.argmin())], dtype=np.int64)

    def __repr__(self) -> str:
        return f"KubePlacement({self.profile!r})"


# ---- the resources a node would have requested ------------------------------------------------------------------
def node_requests(view: View, job: Job, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(requested, allocatable), each of shape (3, n_nodes) over :data:`RESOURCES` [milli-GPU, milli-cores, MiB]:
    what node i's running jobs hold plus ``counts[i]`` of ``job``'s GPUs with their CPU and RAM, and the node's
    capacity (0 where CPU or RAM is not modelled; the requested amount is then 0 too)."""
    c = view.cluster
    allocatable = np.stack([c.node_n_gpus * MILLI_PER_GPU, c.node_cpu_milli, c.node_ram_mib]).astype(np.int64)
    free = np.stack([_node_free_milli(view), view.node_free_cpu_milli, view.node_free_ram_mib])
    pod = np.outer([job.gpu_milli, job.cpu_milli_per_gpu, job.ram_mib_per_gpu], counts)
    return np.where(allocatable > 0, allocatable - free + pod, 0), allocatable


def _node_free_milli(view: View) -> np.ndarray:
    """Free GPU share per node [milli-GPU] (memoized per state)."""
    first = view.cluster.node_first_gpu[:-1]
    return view.memoized(("k8s-free-milli",), lambda: np.add.reduceat(view.gpu_free_milli.astype(np.int64), first))


# ---- NVLink islands ---------------------------------------------------------------------------------------------
def island_fit(view: View, counts: np.ndarray, usable: np.ndarray | None) -> np.ndarray:
    """The NVLinkIsland plugin: 100 where one island holds ``counts[i]`` usable GPUs of node i (always for a share).

    ``usable`` (whole free GPUs per node the job could use; None for a share) caps each island's free GPUs.
    """
    if usable is None:
        return np.full(view.cluster.n_nodes, MAX_NODE_SCORE, dtype=np.int64)
    best = np.minimum(_largest_free_island(view), usable)
    return np.where(best >= counts, MAX_NODE_SCORE, 0).astype(np.int64)


def _largest_free_island(view: View) -> np.ndarray:
    """Per node: the most whole free GPUs any one of its NVLink islands has (memoized per state)."""
    def compute() -> np.ndarray:
        c = view.cluster
        per_island = np.bincount(c.gpu_island, weights=view.gpu_whole_free).astype(np.int64)
        island_node = np.zeros(per_island.size, dtype=np.int64)
        island_node[c.gpu_island] = c.gpu_node
        best = np.zeros(c.n_nodes, dtype=np.int64)
        np.maximum.at(best, island_node, per_island)
        return best
    return view.memoized(("k8s-largest-island",), compute)


def in_node(view: View, node: int, n: int) -> np.ndarray:
    """``n`` free GPUs of ``node``: the lowest free GPUs of its lowest island that holds ``n``, else its lowest."""
    c = view.cluster
    first, last = int(c.node_first_gpu[node]), int(c.node_first_gpu[node + 1])
    free = view.gpu_whole_free[first:last]
    island = c.gpu_island[first:last]
    base = int(island.min())
    holding = (np.bincount(island - base, weights=free) >= n).nonzero()[0]
    if holding.size == 0:
        return free_gpus_of_node(view, node, n)
    return (free & (island == base + holding[0])).nonzero()[0][:n] + first


def gang_by_score(view: View, usable: np.ndarray, totals: np.ndarray, n: int) -> np.ndarray:
    """The gang rule: nodes by descending ``totals`` (ties: lowest index), all their ``usable`` GPUs until ``n``.

    ``usable.sum() >= n`` is the caller's promise.
    """
    order = np.lexsort((np.arange(usable.size), -totals))
    return take_in_order(view, usable, order[usable[order] > 0], n)


# ---- names ------------------------------------------------------------------------------------------------------
def kube_policy(name: str, **params: Any) -> KubeScheduler | Preemptive:
    """The policy ``k8s:NAME[+preempt]`` (case-insensitive) with ``params`` overriding the profile's fields
    (:data:`KUBE_PARAM_DOCS`); unknown names or parameters raise :class:`ConfigError` naming the accepted ones."""
    text = name.strip().lower()
    key = text.removeprefix(KUBE_PREFIX).removesuffix(PREEMPT_SUFFIX)
    base = KUBE_PROFILES.get(key)
    if base is None:
        raise ConfigError(f"policy {name!r}: unknown Kubernetes profile {key!r} (known: {', '.join(KUBE_PROFILES)})")
    accepted = [f.name for f in fields(KubeProfile) if f.name not in ("name", "strategy")]
    unknown = sorted(set(params) - set(accepted))
    if unknown:
        raise ConfigError(f"policy {name!r}: unknown parameter(s) {', '.join(unknown)} (accepted: "
                          f"{', '.join(accepted)})")
    if "shape" in params:
        if base.strategy != "RequestedToCapacityRatio":
            raise ConfigError(f"policy {name!r}: shape: only {KUBE_PREFIX}ratio (RequestedToCapacityRatio) has one")
        params["shape"] = _shape(name, params["shape"])
    scheduler = KubeScheduler(replace(base, **params))
    return Preemptive(scheduler) if text.endswith(PREEMPT_SUFFIX) else scheduler


def _shape(name: str, points: Sequence[Sequence[int]] | Mapping[int, int]) -> tuple[tuple[int, int], ...]:
    """A shape given as (utilization, score) pairs (or a mapping utilization -> score) as a tuple of int pairs."""
    pairs = points.items() if isinstance(points, Mapping) else points
    try:
        return tuple((_integer(u), _integer(s)) for u, s in pairs)
    except (TypeError, ValueError) as error:
        raise ConfigError(f"policy {name!r}: shape: needs (utilization, score) integer pairs, got {points!r}") \
            from error


def _integer(value: Any) -> int:
    if isinstance(value, bool) or int(value) != value:
        raise ValueError(value)
    return int(value)
