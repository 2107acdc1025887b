"""Placement answers shared by jobs of one shape: a scheduler that scans a long queue asks its placement rule the same
question for many jobs that differ only in id, times, user or priority (SPEC §10: no per-decision work that grows
with the queue times the cluster).

The basic rules (first-fit, pack, spread, topology) read only a job's resource shape (:func:`shape_key`), so at one
state of the resources every job of that shape gets the same GPUs, or None. :class:`ShapeMemo` remembers the answers
for one state; :class:`~baselines.backfill.Scheduler` keeps one on the live view while its holdings are unchanged
(:meth:`ShapeMemo.of_view`) and passes it on as the rule, so EASY's scan of the queue asks the rule once per shape
between two changes of the holdings and afresh at every projected state.
The other rules (locality reads the dataset, fragmentation whether the job is pending, a user's rule anything) are
asked every time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from envs.core.cluster import MILLI_PER_GPU
from envs.core.job import Job
from envs.placement import first_fit, pack, spread, topology
from envs.placement.basic import shape_key
from envs.sim.view import PlacementRule, View

SHAPE_RULES: frozenset[PlacementRule] = frozenset({first_fit, pack, spread, topology})
"""The rules whose answer depends on the state and the job's :func:`shape_key` alone."""


def shape_key_of(rule: PlacementRule) -> Callable[[Job], tuple] | None:
    """The function that gives the part of a job ``rule`` reads (jobs equal under it get one answer at one state),
    or None when the rule reads more than the shape: :func:`shape_key` for :data:`SHAPE_RULES`, or a rule object's
    own ``shape_of``."""
    return getattr(rule, "shape_of", shape_key if rule in SHAPE_RULES else None)


class ShapeMemo:
    """``rule`` at one fixed state, its answers remembered per job shape when the rule reads nothing else
    (:data:`SHAPE_RULES`; a rule object may name its own key function as ``shape_of``)."""

    __slots__ = ("_answers", "_key", "_most_free", "_version", "rule", "state")

    def __init__(self, rule: PlacementRule, state: Any) -> None:
        self.rule, self.state = rule, state
        self._key = shape_key_of(rule)
        self._answers: dict[tuple, np.ndarray | None] = {}
        self._version = -1
        self._most_free: int | None = None  # the largest free share of a GPU at the state [milli-GPU]

    @classmethod
    def of_view(cls, rule: PlacementRule, view: View) -> ShapeMemo:
        """The memo of ``rule`` at the live ``view``, kept on the view from one decision to the next while its
        holdings are unchanged (:attr:`View.version <envs.sim.view.View.version>`): a job that does not fit is not
        placed again after every arrival."""
        memo = view.kept(("shape-memo", rule), lambda: cls(rule, view))
        if memo._version != view.version:
            memo._answers.clear()
            memo._version, memo._most_free = view.version, None
        return memo

    def place(self, job: Job) -> np.ndarray | None:
        """The rule's GPUs for ``job`` at the state, or None when it does not fit: at once, without asking the rule,
        for whole GPUs beyond the state's entirely free ones, or a share (not a MIG instance) larger than any GPU's
        free share (the simulator would refuse any placement of them)."""
        if job.gpu_milli >= MILLI_PER_GPU:
            if job.n_gpus > self.state.free_gpus:
                return None
        elif not job.mig_profile:
            if self._most_free is None:
                self._most_free = int(self.state.gpu_free_milli.max(initial=0))
            if job.gpu_milli > self._most_free:
                return None
        if self._key is None:
            return self.rule(self.state, job)
        key = self._key(job)
        if key in self._answers:
            return self._answers[key]
        gpus = self._answers[key] = self.rule(self.state, job)
        return gpus

    def __call__(self, state: Any, job: Job) -> np.ndarray | None:
        """As a placement rule: remembered at the fixed state, asked afresh at any other."""
        return self.place(job) if state is self.state else self.rule(state, job)
