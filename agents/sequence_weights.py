"""Training sequences drawn by how hard a heuristic finds them, for peer-mode training.

A :class:`envs.peer_env.PeerSchedEnv` draws its training sequences uniformly, and they differ tenfold in how hard
they are: on ``lublin_256.swf`` with the peer's backfill, SJF's average bounded slowdown over the 256-job sequences
has median 47.5, mean 65.7 and a tail to 370. The hard ones dominate both the test metric (the peer's protocol
averages ten 1024-job sequences) and the variance of PPO's returns. :class:`HeuristicWeightedStarts` scores every
sequence the env may draw with a heuristic (under the env's backfill mode) and draws the first job of each training
sequence with probability proportional to ``score ** power`` among the sequences scored at most the
``max_quantile`` quantile: ``power=1`` plays congested sequences as often as they weigh in the metric;
``power=0, max_quantile=0.9`` drops the hardest tenth, as RLScheduler's trajectory filtering drops the sequences a
heuristic finds extreme. It changes which sequences are played, never the rewards, the observations or the
evaluation (a reset with ``options={"start": ...}`` passes through untouched).
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
    """Draws each training sequence's first job with probability proportional to ``order``'s score ** ``power``,
    among the sequences whose score is at most its ``max_quantile`` quantile.

    ``order`` is a peer order name (``sjf``, ``f1``, ... see :mod:`baselines.rls`) without a backfill suffix: the
    heuristic runs with the env's own backfill setting; the score is its average bounded slowdown. Scores are
    computed for every start the env may draw (:func:`envs.peer_env.training_starts`) at the first sampled reset
    (about 20 s for the 9,487 starts of ``lublin_256.swf``) and kept: :attr:`starts`, :attr:`scores`,
    :attr:`probabilities`. Draws use the env's seeded ``np_random``, so a seeded reset gives the same sequence.
    """

    def __init__(self, env: gym.Env, order: str, power: float = 1.0, max_quantile: float = 1.0) -> None:
        super().__init__(env)
        where = f"sequence_weight {order!r}"
        if not isinstance(env.unwrapped, PeerSchedEnv):
            raise ConfigError(f"{where}: only for the peer-mode env, not {type(env.unwrapped).__name__}")
        if "+" in order:
            raise ConfigError(f"{where}: give an order without a suffix (e.g. 'sjf'); the env's backfill setting "
                              "applies")
        if not 0.0 < max_quantile <= 1.0:
            raise ConfigError(f"{where}: max_quantile must be in (0, 1], got {max_quantile}")
        self.choose = rls_policy(order)[0]
        self.power, self.max_quantile = float(power), float(max_quantile)
        self.starts: np.ndarray | None = None
        self.scores: np.ndarray | None = None
        self.probabilities: np.ndarray | None = None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        options = dict(options or {})
        if "start" not in options:
            if seed is not None:  # seed first, so that the draw below is reproducible
                self.unwrapped.np_random = seeding.np_random(seed)[0]
                seed = None
            if self.starts is None:
                self._weigh()
            options["start"] = int(self.np_random.choice(self.starts, p=self.probabilities))
        return self.env.reset(seed=seed, options=options)

    def _weigh(self) -> None:
        """Score every start the env may draw; the probabilities from the scores."""
        peer: PeerSchedEnv = self.env.unwrapped
        jobs, length = peer.trace.jobs, peer.config.sequence_jobs
        self.starts = training_starts(len(jobs), peer.config)
        self.scores = np.array([run_sequence(jobs[s : s + length], peer.trace.machine, self.choose,
                                             peer.config.backfill).avg_bsld for s in self.starts])
        weights = np.where(self.scores <= np.quantile(self.scores, self.max_quantile), self.scores ** self.power, 0.0)
        self.probabilities = weights / weights.sum()
