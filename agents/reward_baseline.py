"""A heuristic's score on the same sequence as a reward baseline for peer-mode training (a control variate).

The return of a :class:`envs.peer_env.PeerSchedEnv` episode is minus the sequence's average bounded slowdown
(divided by ``reward_scale``), and that varies tenfold between sequences, whatever the agent does: early decisions
see little of the jobs still to come, so their advantage estimates are mostly the sequence's luck.
:class:`HeuristicBaseline` adds, on an episode's last step, the average bounded slowdown a heuristic order (e.g.
SJF) reaches on the very same sequence under the same backfill mode, so the return becomes
``-(agent - heuristic) / reward_scale``: positive when the agent beats the heuristic.

The added term depends only on the sequence, which the agent's actions cannot change, so the policy gradient keeps
its expectation (a baseline in the REINFORCE sense; like the greedy-rollout baseline of Kool et al., 2019) while
its variance falls with the correlation between the agent's score and the heuristic's. Per-step rewards are
unchanged; ``info["episode_metrics"]`` still reports the agent's own score, so evaluation is unaffected.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from baselines.rls import rls_policy
from envs.errors import ConfigError
from envs.peer_env import PeerSchedEnv
from envs.peer_rls import run_sequence


class HeuristicBaseline(gym.Wrapper):
    """Adds ``order``'s average bounded slowdown on the episode's sequence / ``reward_scale`` to its last reward.

    ``order`` is a peer order name (``sjf``, ``f1``, ... see :mod:`baselines.rls`) without a backfill suffix: the
    heuristic runs with the env's own backfill setting. The heuristic's score of the current episode is
    ``info["baseline_avg_bsld"]`` at reset.
    """

    def __init__(self, env: gym.Env, order: str) -> None:
        super().__init__(env)
        if not isinstance(env.unwrapped, PeerSchedEnv):
            raise ConfigError(f"reward_baseline {order!r}: only for the peer-mode env, not "
                              f"{type(env.unwrapped).__name__}")
        if "+" in order:
            raise ConfigError(f"reward_baseline {order!r}: give an order without a suffix (e.g. 'sjf'); the env's "
                              "backfill setting applies")
        self.choose = rls_policy(order)[0]
        self.baseline = 0.0

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        peer: PeerSchedEnv = self.env.unwrapped
        self.baseline = run_sequence(peer.jobs, peer.trace.machine, self.choose, peer.config.backfill).avg_bsld
        return obs, {**info, "baseline_avg_bsld": self.baseline}

    def step(self, action: int) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        if terminated:
            reward += self.baseline / self.env.unwrapped.config.reward_scale
        return obs, reward, terminated, truncated, info
