"""Training sequences drawn in proportion to how hard a heuristic finds them, for peer-mode training.

A :class:`envs.peer_env.PeerSchedEnv` draws its training sequences uniformly, and most of them are light: on
``lublin_256.swf`` with the peer's backfill, SJF's average bounded slowdown over the 256-job sequences has median
47.5 and mean 65.7, with a tail to 370. The peer's test protocol averages ten 1024-job sequences, and its mean is
set by the congested ones, where a backlog builds and one decision can delay hundreds of jobs.
:class:`HeuristicWeightedStarts` draws the first job of each training sequence with probability proportional to a
heuristic's average bounded slowdown on that sequence (under the env's backfill mode), so congested states are seen
as often as they weigh in that metric. It changes which sequences are played, never the rewards, the observations
or the evaluation (a reset with ``options={"start": ...}`` passes through untouched).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.utils import seeding

from baselines.rls import rls_policy
from envs.errors import ConfigError
from envs.peer_env import PeerSchedEnv, training_starts
from envs.peer_rls import run_sequence


class HeuristicWeightedStarts(gym.Wrapper):
    """Draws each training sequence's first job with probability proportional to ``order``'s score on it.

    ``order`` is a peer order name (``sjf``, ``f1``, ... see :mod:`baselines.rls`) without a backfill suffix: the
    heuristic runs with the env's own backfill setting. Scores are computed for every start the env may draw
    (:func:`envs.peer_env.training_starts`) at the first sampled reset (about 25 s for the 9,487 starts of
    ``lublin_256.swf``), and kept: :attr:`starts` and :attr:`probabilities`. Draws use the env's seeded
    ``np_random``, so a seeded reset gives the same sequence every time.
    """

    def __init__(self, env: gym.Env, order: str) -> None:
        super().__init__(env)
        if not isinstance(env.unwrapped, PeerSchedEnv):
            raise ConfigError(f"sequence_weight {order!r}: only for the peer-mode env, not "
                              f"{type(env.unwrapped).__name__}")
        if "+" in order:
            raise ConfigError(f"sequence_weight {order!r}: give an order without a suffix (e.g. 'sjf'); the env's "
                              "backfill setting applies")
        self.choose = rls_policy(order)[0]
        self.starts: np.ndarray | None = None
        self.probabilities: np.ndarray | None = None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        options = dict(options or {})
        if "start" not in options:
            if seed is not None:  # seed first, so that the draw below is reproducible
                self.unwrapped.np_random = seeding.np_random(seed)[0]
                seed = None
            if self.starts is None:
                self.starts, self.probabilities = self._weights()
            options["start"] = int(self.np_random.choice(self.starts, p=self.probabilities))
        return self.env.reset(seed=seed, options=options)

    def _weights(self) -> tuple[np.ndarray, np.ndarray]:
        """Every start the env may draw and its probability (the heuristic's avg bounded slowdown, normalised)."""
        peer: PeerSchedEnv = self.env.unwrapped
        jobs, length = peer.trace.jobs, peer.config.sequence_jobs
        starts = training_starts(len(jobs), peer.config)
        scores = np.array([run_sequence(jobs[s : s + length], peer.trace.machine, self.choose,
                                        peer.config.backfill).avg_bsld for s in starts])
        return starts, scores / scores.sum()
