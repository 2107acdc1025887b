"""A policy's ranking of the pending jobs, for a scheduler that only takes priorities (the Slurm steering daemon in
``bridges/`` and its simulated twin, :class:`~baselines.slurm.SlurmScheduler`'s ``steering``).

- A policy with an order (every heuristic: ``sjf+easy``, a two-stage order, ``k8s:`` profiles) ranks by that order.
- Any other policy (a trained model, the lookahead planner, ``slurm``) ranks by what it does: reset, it runs on a
  fork of the run at this instant whose future is unknown (no arrivals; every job runs for its requested time) until
  every job pending now has started; the jobs rank in the order it started them, then any it never started in
  queue order (submit time, job id). The fork is run for at most :data:`MAX_RANKING_ACTIONS` actions, and stops
  when the clock no longer moves, so the loop ends.
"""

from __future__ import annotations

from typing import Any

from baselines.orders import Order
from envs.sim.fork import Future
from envs.sim.loop import apply_action
from envs.sim.policy import Start
from envs.sim.view import View

MAX_RANKING_ACTIONS = 100_000
"""The most actions a fork is run for when ranking by what a policy does."""


def rank_jobs(policy: Any, view: View) -> list[int]:
    """The ids of the pending jobs, the one ``policy`` would favour first (module docstring)."""
    order = policy if isinstance(policy, Order) else getattr(policy, "order", None)
    if isinstance(order, Order):
        return [job.job_id for job in order.rank(view)]
    runtimes = {j: job.runtime_estimate_s for j, job in view.pending.items()}
    runtimes.update({j: run.job.runtime_estimate_s for j, run in view.running.items()})
    fork = view.fork(Future(arrivals=(), runtimes_s=runtimes))
    policy.reset()
    waiting, first = set(view.pending), []
    for _ in range(MAX_RANKING_ACTIONS):
        if not waiting or fork.done:
            break
        action, before = policy.act(fork.view), fork.time_s
        if isinstance(action, Start) and action.job_id in waiting:
            waiting.discard(action.job_id)
            first.append(action.job_id)
        if not apply_action(fork, action) and fork.time_s == before:
            break  # a wait that moves nothing: no job will start
    return first + [j for j in view.pending if j in waiting]


def site_factors(ranking: list[int], scale: int) -> dict[int, int]:
    """Slurm site factors that put ``ranking`` in order: ``scale`` × (jobs − rank), so the first of n jobs gets
    n × ``scale`` and the last ``scale``; a job leaving the head of the ranking changes no other job's value."""
    n = len(ranking)
    return {job_id: scale * (n - rank) for rank, job_id in enumerate(ranking)}
