"""Schedule digests: a job log reduced to one SHA-256, so that a change meant to be a pure speed-up can be shown to
leave every schedule identical to the last bit (``tests/test_schedule_digests.py``, ``benchmarks/schedule_digests.py``).

A digest covers, per job in log order: its id, state, reject reason, start and finish [s] as ``float.hex`` (exact),
its GPUs (global indices) and its interruptions count. Two runs with equal digests made the same schedule.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

from baselines.registry import make
from envs.core.joblog import JobLog
from envs.scenario import scenario
from envs.sim.loop import simulate
from envs.workload.table import Workload


def schedule_digest(log: JobLog) -> str:
    """The SHA-256 (hex) of the schedule in ``log`` (module docstring)."""
    rows = [[r.job.job_id, r.state.name, r.reject_reason.name if r.reject_reason else "",
             float(r.start_time_s).hex(), float(r.finish_time_s).hex(), [int(g) for g in r.gpus],
             r.interruptions.preemptions if r.interruptions else 0] for r in log.records]
    return hashlib.sha256(json.dumps(rows, separators=(",", ":")).encode()).hexdigest()


def run_digest(policy: str, run: Mapping[str, Any]) -> str:
    """The digest of ``policy`` on one run: the first ``jobs`` jobs of ``workload`` generated with ``seed`` on
    ``cluster`` (preset names)."""
    world = scenario(run["workload"], cluster=run["cluster"], seed=run["seed"])
    jobs = Workload.from_jobs(f"{run['workload']}-{run['jobs']}", world.workload.jobs[: run["jobs"]])
    return schedule_digest(simulate(world.cluster, jobs, make(policy), world.runtime))


def digests(policies: Iterable[str], runs: Iterable[Mapping[str, Any]]) -> dict[str, list[str]]:
    """Policy -> the digest of each run, in order."""
    runs = list(runs)
    return {policy: [run_digest(policy, run) for run in runs] for policy in policies}
