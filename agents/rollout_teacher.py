"""A lookahead teacher for imitation in the peer-mode env: one step of the rollout algorithm over a base order.

At a decision, each candidate job is scored by a rollout: the episode so far is replayed (the engine is
deterministic, so replaying its choices restores its state), the candidate is committed, and the base order
(SJF by default) schedules every later decision. The teacher commits the candidate whose rollout ends with the
lowest average bounded slowdown. One step of rollout is never worse than its base order on the jobs it sees
(Bertsekas, *Rollout algorithms*): on the peer's 10 test windows of lublin_256 with the peer's backfill, three
candidates by SJF and three by F1 and a horizon of 64 arrivals give 40.8 against SJF's 73.3
(``benchmarks/rollout_teacher.py``).

The rollouts see the jobs that arrive later (up to ``horizon`` arrivals past the newest one), so the teacher is
clairvoyant: a training-time label source only, never a policy to evaluate. The agent that imitates it sees
only its observation.
"""

from __future__ import annotations

from collections.abc import Sequence

from baselines.rls import f1_key, rls_policy, sjf_key
from envs.errors import ConfigError
from envs.peer_env import PeerSchedEnv
from envs.peer_rls import Choose, run_sequence
from envs.workload.swf_peer import PeerJob

ROLLOUT_PREFIX = "rollout"
"""Teacher names ``rollout`` or ``rollout:BASE`` (an ``rls:`` order; default ``sjf``)."""


class RolloutTeacher:
    """One-step rollout over ``base`` in the peer-mode env; see the module docstring."""

    def __init__(self, base: str = "sjf", candidates: int = 3, horizon: int = 64) -> None:
        if candidates < 1 or horizon < 0:
            raise ConfigError(f"rollout teacher: candidates >= 1 and horizon >= 0 needed, got {candidates}, {horizon}")
        self.name = f"{ROLLOUT_PREFIX}:{base}"
        self.base: Choose = rls_policy(base)[0]
        self.candidates = candidates
        self.horizon = horizon

    def __call__(self, env: PeerSchedEnv) -> int:
        queue = env.visible_jobs
        if len(queue) == 1:
            return 0
        known = env.jobs[: min(len(env.jobs), env.arrived + self.horizon)]
        scores = {c: self.rollout(known, env, c) for c in self.shortlist(queue)}
        return min(scores, key=scores.__getitem__)

    def shortlist(self, queue: Sequence[PeerJob]) -> list[int]:
        """Queue indices of the ``candidates`` first jobs by SJF's key, then by F1's (ties by queue order)."""
        picks: dict[int, None] = {}
        for key in (sjf_key, f1_key):
            ranked = sorted(range(len(queue)), key=lambda i: (key(queue[i]), i))
            picks |= dict.fromkeys(ranked[: self.candidates])
        return list(picks)

    def rollout(self, known: Sequence[PeerJob], env: PeerSchedEnv, candidate: int) -> float:
        """Average bounded slowdown of ``known`` when the episode's choices so far are replayed, ``candidate`` is
        committed next and the base order takes every later decision."""
        replay = [*env.choices, candidate]
        step = 0

        def choose(queue: Sequence[PeerJob], now: int) -> int:
            nonlocal step
            step += 1
            return replay[step - 1] if step <= len(replay) else self.base(queue, now)

        return run_sequence(known, env.trace.machine, choose, env.config.backfill).avg_bsld
