"""A heuristic's schedule of the same sequence as a reward baseline for peer-mode training (a control variate).

A :class:`envs.peer_env.PeerSchedEnv` episode earns minus each started job's bounded slowdown / n, so its return is
minus the sequence's average bounded slowdown, and that varies tenfold between sequences whatever the agent does:
a decision sees little of the jobs still to come, so its advantage estimate is mostly the sequence's luck.
:class:`HeuristicBaseline` first schedules the sequence with a heuristic order (e.g. SJF, under the env's backfill
mode); then, whenever a job starts, it adds back that job's bounded slowdown / n *in the heuristic's schedule*. A
job's reward becomes ``-(agent's bsld - heuristic's bsld) / n / reward_scale``, and an episode's return
``-(agent - heuristic) / reward_scale``: positive when the agent beats the heuristic.

The term added from any decision on is the heuristic's slowdowns of the jobs not started yet, which the decision
cannot change (they all start some time), so the policy gradient keeps its expectation (a baseline in the
REINFORCE sense, like the greedy-rollout baseline of Kool et al., 2019), while the variance falls with the
correlation between a job's slowdown under the agent and under the heuristic, which both follow the load around
the job's arrival. ``info["episode_metrics"]`` still reports the agent's own score, so evaluation is unaffected.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from baselines.rls import rls_policy
from envs.errors import ConfigError
from envs.peer_env import PeerSchedEnv
from envs.peer_rls import bounded_slowdown, run_sequence


class HeuristicBaseline(gym.Wrapper):
    """Adds each started job's bounded slowdown in ``order``'s schedule / n / ``reward_scale`` to its reward.

    ``order`` is a peer order name (``sjf``, ``f1``, ... see :mod:`baselines.rls`) without a backfill suffix: the
    heuristic runs with the env's own backfill setting. At reset, ``info["skipped_reward"]`` (the jobs started
    before the first decision) is shifted the same way and ``info["baseline_avg_bsld"]`` is the heuristic's score.
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
        self.peer: PeerSchedEnv = env.unwrapped
        self.credit = np.zeros(0)  # per job of the sequence: its heuristic bsld / n / reward_scale

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        jobs = self.peer.jobs
        schedule = run_sequence(jobs, self.peer.trace.machine, self.choose, self.peer.config.backfill)
        self.credit = np.array([bounded_slowdown(start, job.submit, job.run)
                                for start, job in zip(schedule.start_times, jobs, strict=True)])
        self.credit /= len(jobs) * self.peer.config.reward_scale
        skipped = info["skipped_reward"] + self.credit[list(self.peer.started)].sum()
        return obs, {**info, "skipped_reward": skipped, "baseline_avg_bsld": schedule.avg_bsld}

    def step(self, action: int) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        before = len(self.peer.started)
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward + self.credit[list(self.peer.started[before:])].sum(), terminated, truncated, info
