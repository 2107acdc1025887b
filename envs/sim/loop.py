"""The policy loop: run a policy on a workload until every job has ended."""

from __future__ import annotations

from collections.abc import Sequence

from envs.core.cluster import ClusterSpec
from envs.core.dynamics import DynamicsConfig
from envs.core.job import Job
from envs.core.joblog import JobLog
from envs.core.runtime import RuntimeConfig
from envs.sim.policy import WAIT, Policy, Preempt, Start
from envs.sim.simulator import Simulator
from envs.workload.table import Workload


def simulate(cluster: ClusterSpec, jobs: Workload | Sequence[Job], policy: Policy,
             runtime: RuntimeConfig | None = None, dynamics: DynamicsConfig | None = None) -> JobLog:
    """Run ``policy`` on ``jobs`` (with ``dynamics``: failures, outages) until every job has ended; return the job
    log."""
    sim = Simulator(cluster, jobs, runtime, dynamics)
    policy.reset()
    view, act, wait, start = sim.view, policy.act, sim.wait, sim.start
    while not sim.done:
        action = act(view)
        if isinstance(action, Start):
            start(action.job_id, action.gpus)
        elif action is WAIT:
            wait()
        elif isinstance(action, Preempt):
            sim.preempt(action.job_id)
        else:
            wait(action.until_s)
    return sim.log()
