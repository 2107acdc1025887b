"""The policy loop: run a policy on a workload until every job has ended."""

from __future__ import annotations

from collections.abc import Sequence

from envs.core.cluster import ClusterSpec
from envs.core.dynamics import DynamicsConfig
from envs.core.job import Job
from envs.core.joblog import JobLog
from envs.core.runtime import RuntimeConfig
from envs.sim.policy import WAIT, Action, Policy, Preempt, Start
from envs.sim.simulator import Simulator
from envs.workload.table import Workload


def simulate(cluster: ClusterSpec, jobs: Workload | Sequence[Job], policy: Policy,
             runtime: RuntimeConfig | None = None, dynamics: DynamicsConfig | None = None) -> JobLog:
    """Run ``policy`` on ``jobs`` (with ``dynamics``: failures, outages) until every job has ended; return the job
    log."""
    sim = Simulator(cluster, jobs, runtime, dynamics)
    policy.reset()
    view, act = sim.view, policy.act
    while not sim.done:
        apply_action(sim, act(view))
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
