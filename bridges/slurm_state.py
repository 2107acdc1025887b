"""A running Slurm's state as a simulator view: ``squeue --json`` and ``sinfo --json`` of Slurm 22.05 (OpenAPI
v0.0.38 field names), read into jobs and a cluster, and a mirror simulator at the present instant on which any
gpusched policy can rank the pending jobs.

What is read, per job: ``job_id``, ``job_state``, ``priority``, ``submit_time`` and ``start_time`` [Unix s],
``time_limit`` [min; above 2**31 unlimited], GPUs from ``tres_per_node`` (``gres:gpu:8`` × ``node_count``) else
``tres_per_job`` (``gres:gpu:16``), ``partition``, ``account``, ``user_name``, ``qos``, and for a running job its
GPUs per node from ``job_resources.allocated_nodes[].nodename`` with ``gres_detail`` (``gpu:8(IDX:0-7)``, one entry
per allocated node, in that order). Per node (:func:`~envs.workload.operators.slurm_nodes.read_sinfo_json`): name,
CPUs, memory, gres and partitions.

The mirror (:func:`mirror`): the GPU nodes as a cluster; every pending or running job that holds or asks for GPUs as
a job (user ``USER@ACCOUNT``, team the account, as :mod:`evaluation.slurm_replay` names Slurm associations), time 0
at the earliest submission; the clock is advanced to now, then each running job starts on the GPUs Slurm gave it,
running until its time limit (its true end is unknown); pending jobs run for their time limit too. Jobs without GPUs
are left out and counted (``Snapshot.skipped``): the daemon never writes to them. What the mirror cannot know: the
usage history behind Slurm's fair share (orders that read history see only the jobs present) and reservations.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from envs.core.cluster import ClusterSpec
from envs.core.errors import ConfigError
from envs.core.job import Job
from envs.sim.simulator import Simulator
from envs.workload.operators.slurm_nodes import expand_hostlist, parse_gres, read_sinfo_json

PENDING, RUNNING = "PENDING", "RUNNING"
UNLIMITED_MIN = 2**31
"""A ``time_limit`` at or above this many minutes is Slurm's INFINITE (NO_VAL is 2**32 - 2)."""
UNLIMITED_S = 365 * 86_400.0
"""The time limit a mirror gives a job without one [s]."""
_IDX = re.compile(r"\(IDX:([0-9,\-]*)\)$")


class SlurmOutputError(ConfigError):
    """Slurm printed something this module cannot read (one line: the command and what is wrong)."""


@dataclass(frozen=True)
class LiveJob:
    """One job of ``squeue --json``."""

    slurm_id: int
    state: str
    priority: int
    submit_s: float  # [Unix s]
    start_s: float  # [Unix s]; 0 while pending
    time_limit_s: float  # [s]
    gpus: int  # in all, over its nodes
    partition: str
    account: str
    user: str
    qos: str
    allocated: Mapping[str, tuple[int, ...]] = field(default_factory=dict)  # running: node -> GPU indices


@dataclass
class Snapshot:
    """What one read of Slurm saw: its jobs and GPU nodes (a cluster), and the jobs left out by reason."""

    jobs: list[LiveJob]
    cluster: ClusterSpec
    skipped: dict[str, int] = field(default_factory=dict)

    @property
    def pending(self) -> list[LiveJob]:
        """The pending jobs that ask for GPUs."""
        return [j for j in self.jobs if j.state == PENDING]


def _int(job: Mapping[str, Any], key: str, where: str) -> int:
    value = job.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise SlurmOutputError(f"{where}: {key} must be a whole number >= 0, got {value!r}")
    return value


def _str(job: Mapping[str, Any], key: str, where: str) -> str:
    value = job.get(key) or ""
    if not isinstance(value, str):
        raise SlurmOutputError(f"{where}: {key} must be a string, got {value!r}")
    return value


def _gpus(text: str, where: str) -> int:
    """GPUs of a TRES string such as ``gres:gpu:8`` or ``gres:gpu:a100:2,gres:shard:4``."""
    entries = [e.removeprefix("gres:").removeprefix("gres/") for e in text.split(",") if e]
    try:
        return parse_gres(",".join(entries), where, 1)[1] if entries else 0
    except ConfigError as exc:
        raise SlurmOutputError(f"{where}: {exc}") from None


def _allocated(job: Mapping[str, Any], where: str) -> dict[str, tuple[int, ...]]:
    """Node -> GPU indices of a running job, from ``job_resources`` and ``gres_detail``."""
    resources = job.get("job_resources") or {}
    nodes = resources.get("allocated_nodes") if isinstance(resources, dict) else None
    if not isinstance(nodes, list):
        nodes = [{"nodename": n} for n in expand_hostlist(_str(job, "nodes", where), where, 1)]
    detail = job.get("gres_detail") or []
    if not isinstance(detail, list) or not all(isinstance(d, str) for d in detail):
        raise SlurmOutputError(f"{where}: gres_detail must be a list of strings")
    out: dict[str, tuple[int, ...]] = {}
    for i, node in enumerate(nodes):
        name = node.get("nodename") if isinstance(node, dict) else None
        if not isinstance(name, str) or not name:
            raise SlurmOutputError(f"{where}: job_resources.allocated_nodes[{i}] has no nodename")
        match = _IDX.search(detail[i]) if i < len(detail) else None
        out[name] = tuple(index for part in (match.group(1).split(",") if match else []) if part
                          for index in _index_range(part, where))
    return out


def _index_range(part: str, where: str) -> range:
    low, _, high = part.partition("-")
    if not low.isdigit() or not (high or low).isdigit() or int(high or low) < int(low) or int(high or low) > 4096:
        raise SlurmOutputError(f"{where}: gres_detail index {part!r} is not N or N-M")
    return range(int(low), int(high or low) + 1)


def read_squeue(data: Any, where: str = "squeue --json") -> list[LiveJob]:
    """The pending and running jobs of ``squeue --json`` output (module docstring); other states are left out."""
    jobs = data.get("jobs") if isinstance(data, dict) else None
    if not isinstance(jobs, list):
        raise SlurmOutputError(f"{where}: expected an object with a jobs list")
    out = []
    for index, job in enumerate(jobs):
        if not isinstance(job, dict):
            raise SlurmOutputError(f"{where}: jobs[{index}] is not an object")
        here = f"{where}: job {job.get('job_id', f'#{index}')}"
        state = _str(job, "job_state", here)
        if state not in (PENDING, RUNNING):
            continue
        limit = _int(job, "time_limit", here)
        node_count = max(1, _int(job, "node_count", here)) if "node_count" in job else 1
        per_node = _gpus(_str(job, "tres_per_node", here), here)
        out.append(LiveJob(
            slurm_id=_int(job, "job_id", here), state=state, priority=_int(job, "priority", here),
            submit_s=float(_int(job, "submit_time", here)), start_s=float(_int(job, "start_time", here)),
            time_limit_s=UNLIMITED_S if limit >= UNLIMITED_MIN or limit == 0 else 60.0 * limit,
            gpus=per_node * node_count if per_node else _gpus(_str(job, "tres_per_job", here), here),
            partition=_str(job, "partition", here), account=_str(job, "account", here),
            user=_str(job, "user_name", here) or "-", qos=_str(job, "qos", here),
            allocated=_allocated(job, here) if state == RUNNING else {}))
    return out


def snapshot(squeue: Any, sinfo: Any) -> Snapshot:
    """Jobs and cluster from the parsed JSON of ``squeue --json`` and ``sinfo --json``."""
    try:
        cluster = read_sinfo_json(sinfo, "sinfo --json").cluster()
    except ConfigError as exc:
        raise SlurmOutputError(str(exc)) from None
    jobs, skipped = [], {}
    for job in read_squeue(squeue):
        if job.gpus == 0:
            skipped["no_gpus"] = skipped.get("no_gpus", 0) + 1
        else:
            jobs.append(job)
    return Snapshot(jobs, cluster, skipped)


def _job(live: LiveJob, t0: float) -> Job:
    account = live.account
    return Job(job_id=live.slurm_id, submit_time_s=max(0.0, live.submit_s - t0), runtime_s=live.time_limit_s,
               runtime_estimate_s=live.time_limit_s, n_gpus=live.gpus,
               user=f"{live.user}@{account}" if account else live.user, team=account or "-", qos=live.qos,
               partition=live.partition)


def mirror(snap: Snapshot, now_s: float) -> Simulator:
    """A simulator at the present instant ``now_s`` [Unix s] holding the snapshot's jobs (module docstring); its
    time 0 is the earliest submission. A running job on a node the snapshot lacks, or on GPU indices it does not
    have, is a :class:`SlurmOutputError`."""
    t0 = min([j.submit_s for j in snap.jobs], default=now_s)
    now = max(0.0, now_s - t0)
    jobs = []
    for live in snap.jobs:
        job = _job(live, t0)
        if live.state == RUNNING:  # runs from now until its time limit
            left = live.time_limit_s - max(0.0, now_s - live.start_s) if live.start_s else live.time_limit_s
            job = dataclasses.replace(job, submit_time_s=min(job.submit_time_s, now), runtime_s=max(1.0, left))
        jobs.append(job)
    sim = Simulator(snap.cluster, jobs)
    while sim.time_s < now:  # ends: each wait moves the clock on (to an arrival or to now), else the loop stops
        before = sim.time_s
        sim.wait(now)
        if sim.time_s == before:
            break
    node_index = {node.name: i for i, node in enumerate(snap.cluster.nodes)}
    first_gpu = snap.cluster.node_first_gpu
    for live in snap.jobs:
        if live.state != RUNNING:
            continue
        gpus = []
        for node, indices in live.allocated.items():
            if node not in node_index:
                raise SlurmOutputError(f"squeue --json: job {live.slurm_id} runs on node {node!r}, which sinfo "
                                       "--json does not list with GPUs")
            i = node_index[node]
            if any(x >= snap.cluster.nodes[i].n_gpus for x in indices):
                raise SlurmOutputError(f"squeue --json: job {live.slurm_id} holds GPU {max(indices)} of node {node!r}, "
                                       f"which has {snap.cluster.nodes[i].n_gpus}")
            gpus += [int(first_gpu[i]) + x for x in indices]
        if len(gpus) != live.gpus:
            raise SlurmOutputError(f"squeue --json: job {live.slurm_id} asks for {live.gpus} GPUs but gres_detail "
                                   f"gives {len(gpus)}")
        sim.start(live.slurm_id, gpus)
    return sim

