"""The policy loop: run a policy on a workload until every job has ended."""

from __future__ import annotations

from collections.abc import Sequence

from envs.core.cluster import ClusterSpec
from envs.core.dynamics import DynamicsConfig
from envs.core.errors import SimulationStalled
from envs.core.job import Job
from envs.core.joblog import JobLog
from envs.core.runtime import RuntimeConfig
from envs.sim.policy import WAIT, Action, Policy, Preempt, Start
from envs.sim.simulator import Simulator
from envs.workload.table import Workload

MIN_ACTIONS_PER_INSTANT = 100_000
ACTIONS_PER_JOB = 100
"""A policy may take at most max(MIN_ACTIONS_PER_INSTANT, ACTIONS_PER_JOB × jobs) actions at one simulated time;
more means starts and preemptions that undo each other for ever, and the run ends with SimulationStalled."""


def simulate(cluster: ClusterSpec, jobs: Workload | Sequence[Job], policy: Policy,
             runtime: RuntimeConfig | None = None, dynamics: DynamicsConfig | None = None) -> JobLog:
    """Run ``policy`` on ``jobs`` (with ``dynamics``: failures, outages) until every job has ended; return the job
    log."""
    sim = Simulator(cluster, jobs, runtime, dynamics)
    policy.reset()
    view, act = sim.view, policy.act
    limit = max(MIN_ACTIONS_PER_INSTANT, ACTIONS_PER_JOB * len(jobs))
    at, actions = sim.time_s, 0
    while not sim.done:  # ends: the clock moves on (jobs end) or the guard below stops a policy that cycles
        apply_action(sim, act(view))
        if sim.time_s != at:
            at, actions = sim.time_s, 0
        actions += 1
        if actions > limit:
            raise SimulationStalled(f"policy {getattr(policy, 'name', policy)!r} took {actions:,} actions at "
                                    f"simulated time {at:,.1f} s without the clock moving (starts and preemptions "
                                    "in a cycle?)")
    return sim.log()


def apply_action(sim: Simulator, action: Action) -> bool:
    """Carry out one of a policy's actions on ``sim``; True for a Start or a Preempt, False for a Wait (time moved
    on). A refused action raises :class:`~envs.core.errors.ActionRefused`."""
    if isinstance(action, Start):
        sim.start(action.job_id, action.gpus)
        return True
    if isinstance(action, Preempt):
        sim.preempt(action.job_id)
        return True
    sim.wait(None if action is WAIT else action.until_s)
    return False
