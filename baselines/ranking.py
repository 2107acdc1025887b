"""A policy's ranking of the pending jobs, for a scheduler that only takes priorities (the Slurm steering daemon in
``bridges/`` and its simulated twin, :class:`~baselines.slurm.SlurmScheduler`'s ``steering``).

- A policy with an order (every heuristic: ``sjf+easy``, a two-stage order, ``k8s:`` profiles) ranks by that order.
- Any other policy (a trained model, the lookahead planner, ``slurm``) ranks by what it does: on a fork of the
  run at this instant (the view's own future unknown: no arrivals, runtimes as requested), the jobs it starts one
  after the other until it waits come first, in that order, then the rest in queue order (submit time, job id).
  At most :data:`MAX_RANKED_STARTS` starts are asked for, so the loop ends.
"""

from __future__ import annotations

from typing import Any

from baselines.orders import Order
from envs.sim.fork import Future
from envs.sim.policy import Start
from envs.sim.view import View

MAX_RANKED_STARTS = 10_000
"""The most starts a fork is asked for when ranking by what a policy does."""


def rank_jobs(policy: Any, view: View) -> list[int]:
    """The ids of the pending jobs, the one ``policy`` would favour first (module docstring)."""
    order = policy if isinstance(policy, Order) else getattr(policy, "order", None)
    if isinstance(order, Order):
        return [job.job_id for job in order.rank(view)]
    fork = view.fork(Future(arrivals=(), runtimes_s={j: job.runtime_estimate_s for j, job in view.pending.items()}))
    first: list[int] = []
    for _ in range(MAX_RANKED_STARTS):
        action = policy.act(fork.view)
        if not isinstance(action, Start):
            break
        fork.start(action.job_id, action.gpus)
        first.append(action.job_id)
    chosen = set(first)
    return first + [j for j in view.pending if j not in chosen]


def site_factors(ranking: list[int], scale: int) -> dict[int, int]:
    """Slurm site factors that put ``ranking`` in order: ``scale`` × (jobs − rank), so the first of n jobs gets
    n × ``scale`` and the last ``scale``; a job leaving the head of the ranking changes no other job's value."""
    n = len(ranking)
    return {job_id: scale * (n - rank) for rank, job_id in enumerate(ranking)}
