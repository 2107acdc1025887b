"""Choosing among heuristics: at each decision point several candidate heuristics propose an action; where they
disagree (a *contested* decision) a chooser picks whose proposal is carried out.

:class:`Selection` is the rule shared by the heuristic-selection env (:mod:`agents.selection_env`), where the agent
chooses, and by trained selection models run as policies (:mod:`agents.selection_policy`), so both act alike:

- at a decision point every candidate proposes (``act(view)`` on the same view); if every proposal is the same,
  it is carried out and no one is asked; otherwise the chooser picks a candidate;
- the choice holds until the next contested decision (``commit_s`` = 0: every contested decision is asked), or
  for ``commit_s`` seconds of simulated time, during which the chosen candidate decides alone, contested or not;
- candidates proposing the same action are *aliases*: choosing any of them does the same thing, and masks offer
  the first of each.

A constant choice k therefore replays heuristic k exactly (at an uncontested decision every candidate, k too,
proposes the same). Candidates must keep no state between decisions (every heuristic of
:data:`evaluation.learning.CANDIDATES` qualifies): they are asked at decisions whose outcome another decides.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from envs.core.errors import ConfigError
from envs.sim import Action, Policy, Start, View, Wait
from envs.sim.policy import Preempt

DEFAULT_CANDIDATES = ("sjf+greedy/topology", "saf+easy/topology", "unicep+greedy/topology", "saf+greedy/pack")
"""The default candidates: the three best heuristics on the learning suite's whole-gpu@1.5 validation seeds
(docs/results/2026-12-02-headroom.md; the first is that case's reference), then ``saf+greedy/pack`` (the tenth
there; the earlier agents' imitation teacher), so that one candidate places with ``pack``."""


def same_action(a: Action, b: Action) -> bool:
    """Whether two actions do the same thing (a Start of the same job on the same GPUs, ...)."""
    if isinstance(a, Start) and isinstance(b, Start):
        return a.job_id == b.job_id and np.array_equal(np.asarray(a.gpus), np.asarray(b.gpus))
    if isinstance(a, Preempt) and isinstance(b, Preempt):
        return a.job_id == b.job_id
    if isinstance(a, Wait) and isinstance(b, Wait):
        return a.until_s == b.until_s
    return False


def alias_of(proposals: Sequence[Action]) -> list[int]:
    """For each proposal, the index of the first proposal doing the same thing (its own index if none before)."""
    first: list[int] = []
    for i, action in enumerate(proposals):
        first.append(next(j for j in range(i + 1) if j == i or same_action(proposals[j], action)))
    return first


def alias_mask(proposals: Sequence[Action]) -> np.ndarray:
    """The choices to offer: the first candidate of each group proposing the same action."""
    return np.array([a == i for i, a in enumerate(alias_of(proposals))], dtype=bool)


class Selection:
    """Candidate heuristics and the commitment to the last choice (module docstring)."""

    def __init__(self, candidates: Sequence[str], make_policy: Callable[[str], Policy], commit_s: float = 0.0) -> None:
        if len(candidates) < 2:
            raise ConfigError(f"candidates: a selection needs at least 2 heuristics, got {list(candidates)}")
        if len(set(candidates)) < len(candidates):
            raise ConfigError(f"candidates: each heuristic once, got {list(candidates)}")
        if not commit_s >= 0 or np.isinf(commit_s):
            raise ConfigError(f"commit_s: must be a finite number >= 0, got {commit_s!r}")
        self.names = tuple(candidates)
        self.commit_s = float(commit_s)
        self._make = make_policy
        self.policies: list[Policy] = []
        self.reset()  # makes the candidates: an unknown name fails here

    def reset(self) -> None:
        """A fresh run: fresh candidates, no commitment."""
        self.policies = [self._make(name) for name in self.names]
        for policy in self.policies:
            policy.reset()
        self.committed: int | None = None
        self.until_s = -np.inf
        self.contested = 0  # contested decisions so far [count]

    def decide(self, view: View) -> tuple[Action | None, list[Action]]:
        """``(action, [])`` when no choice is needed now (all agree, or a commitment holds), else ``(None,
        proposals)``: the candidates' proposals, one to choose with :meth:`choose`."""
        if self.committed is not None and view.time_s < self.until_s:
            return self.policies[self.committed].act(view), []
        proposals = [policy.act(view) for policy in self.policies]
        if all(same_action(proposals[0], other) for other in proposals[1:]):
            return proposals[0], []
        return None, proposals

    def choose(self, index: int, view: View, proposals: Sequence[Action]) -> Action:
        """Record the choice of candidate ``index`` at a contested decision; its proposal, to carry out."""
        self.contested += 1
        if self.commit_s > 0:
            self.committed, self.until_s = index, view.time_s + self.commit_s
        return proposals[index]
