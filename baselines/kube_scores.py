"""kube-scheduler's node score formulas (kubernetes/kubernetes ``pkg/scheduler/framework/plugins/``), vectorized
over nodes in kube's integer arithmetic: (resource, node) arrays in, one int64 score in 0..100 per node out.

:mod:`baselines.kubernetes` composes them into the ``k8s:`` policies; its docstring states each formula.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

MAX_NODE_SCORE = 100
"""kube-scheduler's MaxNodeScore: every plugin scores a node in 0..100."""

MAX_CUSTOM_PRIORITY_SCORE = 10
"""kube's MaxCustomPriorityScore: the top of a RequestedToCapacityRatio shape's score axis."""

def least_allocated(requested: np.ndarray, allocatable: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """NodeResourcesFit LeastAllocated (least_allocated.go): Σ w·((cap − req)·100 // cap) // Σ w."""
    per = np.where(requested > allocatable, 0, (allocatable - requested) * MAX_NODE_SCORE // _positive(allocatable))
    return _weighted_floor_mean(per, allocatable > 0, weights)


def most_allocated(requested: np.ndarray, allocatable: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """NodeResourcesFit MostAllocated (most_allocated.go): Σ w·(min(req, cap)·100 // cap) // Σ w."""
    per = np.minimum(requested, allocatable) * MAX_NODE_SCORE // _positive(allocatable)
    return _weighted_floor_mean(per, allocatable > 0, weights)


def requested_to_capacity_ratio(requested: np.ndarray, allocatable: np.ndarray, weights: np.ndarray,
                                shape: Sequence[tuple[int, int]]) -> np.ndarray:
    """NodeResourcesFit RequestedToCapacityRatio (requested_to_capacity_ratio.go): round(Σ w·f(u) / Σ w) over the
    resources with f(u) > 0, u = req·100 // cap (100 when req > cap), f the shape scaled to 0..100."""
    utilization = np.where(requested >= allocatable, MAX_NODE_SCORE,
                           np.maximum(requested, 0) * MAX_NODE_SCORE // _positive(allocatable))
    scale = MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE
    per = broken_linear([(u, s * scale) for u, s in shape], utilization)
    counted = (allocatable > 0) & (per > 0)
    w = np.where(counted, weights[:, None], 0)
    total, weight_sum = (per * w).sum(axis=0), w.sum(axis=0)
    # math.Round of a non-negative quotient: half away from zero = floor(x + 1/2), exact in integers.
    return np.where(weight_sum > 0, (2 * total + weight_sum) // (2 * _positive(weight_sum)), 0)


def broken_linear(shape: Sequence[tuple[int, int]], p: np.ndarray) -> np.ndarray:
    """helper.BuildBrokenLinearFunction (helper/shape_score.go): the first score below the first point, the last
    above the last, linear in between with Go's integer division (truncating toward zero)."""
    points = np.asarray(shape, dtype=np.int64)
    u, s = points[:, 0], points[:, 1]
    i = np.searchsorted(u, p, side="left")  # the first point with utilization >= p
    lo, hi = np.clip(i - 1, 0, u.size - 1), np.clip(i, 0, u.size - 1)
    rise = (s[hi] - s[lo]) * (p - u[lo])
    run = np.where(hi > lo, u[hi] - u[lo], 1)
    inside = s[lo] + np.sign(rise) * (np.abs(rise) // run)
    return np.where(i == 0, s[0], np.where(i == u.size, s[-1], inside))


def balanced_allocation(requested: np.ndarray, allocatable: np.ndarray) -> np.ndarray:
    """NodeResourcesBalancedAllocation (balanced_allocation.go): int((1 − std)·100) of f = min(req / cap, 1) over
    the resources with cap > 0; std = |f₁ − f₂| / 2 for two of them, the population std for more, 0 for fewer."""
    present = allocatable > 0
    fraction = np.where(present, np.minimum(requested / _positive(allocatable), 1.0), 0.0)
    n = present.sum(axis=0)
    mean = fraction.sum(axis=0) / _positive(n)
    many = np.sqrt(np.where(present, (fraction - mean) ** 2, 0.0).sum(axis=0) / _positive(n))
    two = (np.where(present, fraction, -np.inf).max(axis=0) - np.where(present, fraction, np.inf).min(axis=0)) / 2
    std = np.where(n == 2, two, np.where(n > 2, many, 0.0))
    return ((1 - std) * MAX_NODE_SCORE).astype(np.int64)  # Go's int64(): truncation


def image_locality(cached: np.ndarray, size_bytes: int, min_bytes: int, max_bytes: int) -> np.ndarray:
    """ImageLocality (image_locality.go) for one image of ``size_bytes`` held by the nodes in ``cached``:
    100·(clamp(sum, min, max) − min) // (max − min), sum = int(size · k / N) on a node holding it, else 0."""
    spread = float(cached.sum()) / float(cached.size)
    total = np.where(cached, int(float(size_bytes) * spread), 0)
    return MAX_NODE_SCORE * (np.clip(total, min_bytes, max_bytes) - min_bytes) // (max_bytes - min_bytes)


def _weighted_floor_mean(per: np.ndarray, counted: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Σ w·per // Σ w over the counted resources of each node; 0 where none is counted."""
    w = np.where(counted, weights[:, None], 0)
    total, weight_sum = (per * w).sum(axis=0), w.sum(axis=0)
    return np.where(weight_sum > 0, total // _positive(weight_sum), 0)


def _positive(a: np.ndarray) -> np.ndarray:
    """``a`` with values below 1 raised to 1: a divisor for the entries a mask keeps."""
    return np.maximum(a, 1)
