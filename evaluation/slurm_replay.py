"""Slurm cases and records: a job stream for a one-node Slurm, what a live Slurm did with it, and the same stream
replayed in the simulator (``benchmarks/slurm_live.py`` records; ``tests/test_slurm_fidelity.py`` replays).

A **case** (YAML) holds::

    name: fifo-backfill
    description: one line
    node: {gpus: 8, cpus: 16, ram_mib: 16000}     # each node (slurmd) and what it offers; count: 2..4 nodes
                                                 # (default 1), all alike
    partitions:                                  # optional; default one partition "main" holding the node
      - {name: short, priority_tier: 2, max_time_min: 2, default: true}
      - {name: long}
    slurm: {...}                                 # the slurm: section of a policy config (baselines.slurm_conf),
                                                 # QOS and Accounts included (they need slurmdbd when live)
    jobs:                                        # submit offset [s], GPUs, --time [min], sleep [s], and optional
      - {id: 1, submit_s: 0, gpus: 4, time_min: 2, run_s: 50, partition: short, account: a, qos: high}
      - {id: 2, submit_s: 3, gpus: 16, nodes: 2, time_min: 2, run_s: 40}   # sbatch -N 2 --gres=gpu:8

A **record** is the case plus, per job, what Slurm did (``slurm_id``, ``submit_s``, ``start_s``, ``end_s`` in whole
seconds from slurmctld's start, ``state``, ``earlier_runs`` of a requeued job) and ``recorded`` (Slurm's version, the
date, the slurm.conf and gres.conf it ran, and ``sacct --parsable2`` output when accounting ran).

Replaying a record (:func:`replay_starts`): the recorded submits, runtimes = recorded end − start of the last run
(Slurm's own start overhead included), requested times = ``time_min`` × 60 s, user ``root@ACCOUNT`` (a Slurm
association is a user under an account) and team = the account, on a cluster of the case's nodes (rigid runtime
model: no speed or topology factors), under a policy made with the case's ``slurm`` section (a ``slurm`` policy
also gets the record's ``epoch_s`` and ``decay_s``). A job of ``nodes: N`` asks ``sbatch -N N --gres=gpu:G/N``: G/N
GPUs on each of N nodes, as the ``slurm`` policy places a job too large for one node. With accounting, partitions
bill GPUs only (``TRESBillingWeights=GRES/gpu=1``), so Slurm's fair-share usage is GPU-seconds, as ours is.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import ConfigDict, Field

from baselines.ranking import rank_jobs
from baselines.registry import make
from baselines.slurm import SLURM_PREFIX, SlurmParams, Steering, slurm_policy, slurm_policy_params
from envs.core.cluster import MAX_GPUS, ClusterSpec
from envs.core.dynamics import DynamicsConfig
from envs.core.errors import ConfigError
from envs.core.job import MAX_TIME_S, Job
from envs.core.joblog import JobLog
from envs.core.presets import cluster_from_dict
from envs.core.runtime import RuntimeConfig
from envs.core.schema import FileModel, validated
from envs.scenario import scenario
from envs.sim.loop import simulate
from envs.workload.table import Workload

Seconds = Annotated[float, Field(ge=0, le=MAX_TIME_S, description="[s]")]
Positive = Annotated[int, Field(ge=1)]


MAX_CASE_NODES = 4
"""The most slurmd a live case runs on one machine."""


class CaseNodeFile(FileModel):
    """A case's node (each of ``count`` alike)."""

    count: Annotated[int, Field(ge=1, le=MAX_CASE_NODES)] = 1
    gpus: Annotated[int, Field(ge=1, le=MAX_GPUS)] = 8
    cpus: Positive = 16
    ram_mib: Positive = 16000


class CasePartitionFile(FileModel):
    """A partition of a case's slurm.conf."""

    name: str
    priority_tier: Annotated[int, Field(ge=0, le=65_533)] | None = None
    max_time_min: Positive | None = None
    allow_accounts: str | list[str] | None = None
    default: bool | None = None


class CaseJobFile(FileModel):
    """A submitted job (and, in a record, what the live Slurm did with it)."""

    id: Annotated[int, Field(ge=0)]
    submit_s: Seconds
    gpus: Positive
    nodes: Annotated[int, Field(ge=1, le=MAX_CASE_NODES)] | None = None  # sbatch -N; GPUs split evenly
    time_min: Positive
    run_s: Annotated[float, Field(gt=0, le=MAX_TIME_S)]
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    slurm_id: Any = None  # the rest: a record's observations
    start_s: Any = None
    end_s: Any = None
    started_by: Any = None
    state: Any = None
    node_list: Any = None
    earlier_runs: Any = None


class RecordedFile(FileModel):
    """A record's provenance; ``epoch_s`` and ``decay_s`` place the live run's clocks."""

    model_config = ConfigDict(extra="allow")
    epoch_s: Seconds = 0.0
    decay_s: Seconds = 0.0


class SteeringWriteFile(FileModel):
    """One write of a steering daemon in a record."""

    t_s: Seconds  # when [s from slurmctld's start]
    job: int  # the case's job id
    value: int


class CaseSteeringFile(FileModel):
    """A record's steering daemon (``benchmarks/slurm_live.py record --steer``)."""

    policy: str
    field: Literal["SiteFactor", "Priority"] = "SiteFactor"
    scale: Annotated[int, Field(ge=1, le=1_000_000)] = 1000
    period_s: Annotated[float, Field(gt=0, le=86_400)]
    origin_s: Seconds  # its first tick [s from slurmctld's start]
    writes: list[SteeringWriteFile] = Field(default_factory=list)


class SlurmCaseFile(FileModel):
    """A Slurm case or record (``benchmarks/slurm_cases/*.yaml``, ``tests/data/slurm/*.yaml``)."""

    name: str | None = None
    description: str | None = None
    node: CaseNodeFile | None = None
    partitions: list[CasePartitionFile] | None = None
    slurm: dict[str, Any] | None = None  # checked by baselines.slurm
    jobs: Annotated[list[CaseJobFile], Field(min_length=1)]
    recorded: RecordedFile | None = None
    steering: CaseSteeringFile | None = None
RERUN = DynamicsConfig(restart_overhead_s=0.0)
"""No failures, and a requeued job reruns its batch script from the start with no restart overhead."""
START_TOLERANCE_S = 3.0
"""How far a replayed start may lie from Slurm's [s]: Slurm logs whole seconds in jobcomp, starts a job up to a second
after its backfill cycle or its predecessor's epilog, and its main scheduler runs about a second after a
submission."""
NODE_NAME = "node"
"""The simulated node's group name (its node is ``node-0``)."""


@dataclass(frozen=True)
class SlurmCase:
    """A job stream for a Slurm of ``node_count`` alike nodes (module docstring); ``jobs`` are the case's (or
    record's) job mappings."""

    name: str
    jobs: tuple[Mapping[str, Any], ...]
    node_gpus: int = 8
    node_cpus: int = 16
    node_ram_mib: int = 16000
    partitions: tuple[Mapping[str, Any], ...] = ()
    slurm: Mapping[str, Any] = field(default_factory=dict)
    description: str = ""
    epoch_s: float = 0.0  # a record's: the Unix time of its time 0 (slurmctld's start)
    decay_s: float = 0.0  # a record's: when the decay thread (priority/multifactor) started [s]
    steering: CaseSteeringFile | None = None  # a record's steering daemon, if one ran
    node_count: int = 1

    @property
    def params(self) -> SlurmParams:
        """The parsed ``slurm`` section (slurm.conf keys, QOS, accounts)."""
        return slurm_policy_params(self.slurm, f"case {self.name}: slurm")

    @property
    def needs_accounting(self) -> bool:
        """True when the case has accounts or QOS (slurmdbd must run)."""
        params = self.params
        return bool(params.accounts or params.qos)

    @property
    def accounts(self) -> dict[str, int]:
        """Account -> raw fair-share shares."""
        return {name: int(spec["shares"]) for name, spec in self.params.accounts.items()}

    @property
    def qos(self) -> list[dict[str, Any]]:
        """QOS as sacctmgr fields: name, Priority, Preempt."""
        return [{"name": q.name, "Priority": q.priority, **({"Preempt": ",".join(sorted(q.preempts))}
                                                           if q.preempts else {})}
                for q in self.params.qos.values()]

    def as_dict(self) -> dict[str, Any]:
        """The case as YAML data."""
        data: dict[str, Any] = {"name": self.name}
        if self.description:
            data["description"] = self.description
        data["node"] = {**({"count": self.node_count} if self.node_count > 1 else {}), "gpus": self.node_gpus,
                        "cpus": self.node_cpus, "ram_mib": self.node_ram_mib}
        if self.partitions:
            data["partitions"] = [dict(p) for p in self.partitions]
        data["slurm"] = dict(self.slurm)
        data["jobs"] = [dict(j) for j in self.jobs]
        return data


def case_from_dict(data: Any, where: str = "case") -> SlurmCase:
    """Parse and check a case (or record) mapping (:class:`SlurmCaseFile`, then the slurm section and the jobs
    against the node)."""
    file = validated(SlurmCaseFile, data, where)
    node = file.node or CaseNodeFile()
    slurm = dict(file.slurm or {})
    slurm_policy_params(slurm, f"{where}: slurm")  # checks the section
    for i, job in enumerate(file.jobs):
        nodes = job.nodes or 1
        if nodes > node.count or job.gpus % nodes or job.gpus // nodes > node.gpus:
            raise ConfigError(f"{where}: jobs[{i}]: {job.gpus} GPUs on {nodes} node(s) do not split evenly over at "
                              f"most {node.count} node(s) of {node.gpus} GPUs")
        if not job.run_s < 60 * job.time_min:
            raise ConfigError(f"{where}: jobs[{i}]: run_s must be > 0 and below time_min minutes")
    recorded = file.recorded or RecordedFile()
    return SlurmCase(file.name or where, tuple(data["jobs"]), node.gpus, node.cpus, node.ram_mib,
                     tuple(data.get("partitions") or ()), slurm, file.description or "", recorded.epoch_s,
                     recorded.decay_s, file.steering, node.count)


def case_from_workload(workload: str, n_jobs: int, scale: float, seed: int, slurm: Mapping[str, Any],
                       node_gpus: int = 8) -> SlurmCase:
    """A case from the first ``n_jobs`` jobs of a workload (preset name, YAML or FORMAT:PATH; generated with
    ``seed``): submit offsets and runtimes × ``scale`` (whole seconds, runtimes at least 5 s), GPUs capped at
    ``node_gpus``, requested times rounded up to whole minutes and kept above the runtime."""
    if not scale > 0:
        raise ConfigError(f"scale: must be > 0, got {scale!r}")
    loaded = scenario(workload, seed=seed).workload
    jobs = loaded.jobs[:n_jobs]
    if not jobs:
        raise ConfigError(f"workload {workload!r}: no jobs")
    t0 = jobs[0].submit_time_s
    out = []
    for i, job in enumerate(jobs, start=1):
        run_s = max(5, round(job.runtime_s * scale))
        limit_min = max(1, math.ceil(max(job.runtime_estimate_s * scale, run_s + 2) / 60))
        out.append({"id": i, "submit_s": round((job.submit_time_s - t0) * scale), "gpus": min(job.n_gpus, node_gpus),
                    "time_min": limit_min, "run_s": run_s})
    return SlurmCase(f"{loaded.name}-{n_jobs}", tuple(out), node_gpus, slurm=dict(slurm),
                     description=f"first {n_jobs} jobs of {workload} (seed {seed}), times x {scale}")


def node_names(case: SlurmCase, host: str) -> list[str]:
    """The slurmd node names of a live run: the host itself for one node, ``g1``..``gN`` for several."""
    return [host] if case.node_count == 1 else [f"g{i}" for i in range(1, case.node_count + 1)]


FIRST_SLURMD_PORT = 17001
"""The port of a multi-node case's first slurmd (the next ones follow)."""


def slurm_conf_text(case: SlurmCase, host: str, folder: Path) -> str:
    """The slurm.conf of a live run of ``case`` on ``host``, state and logs under ``folder``. Several nodes are as
    many slurmd on ``host``, each with its name, port, spool, log and pid file (``slurmd -N NAME``)."""
    conf = case.params.conf
    suffix = "" if case.node_count == 1 else "-%n"
    accounting = (["AccountingStorageType=accounting_storage/slurmdbd", "AccountingStorageHost=localhost",
                   "AccountingStorageEnforce=associations,limits,qos", "AccountingStorageTRES=gres/gpu"]
                  if case.needs_accounting else ["AccountingStorageType=accounting_storage/none"])
    lines = [
        "# written by benchmarks/slurm_live.py for case " + case.name,
        "ClusterName=gpusched", f"SlurmctldHost={host}", "SlurmUser=root", "SlurmdUser=root", "AuthType=auth/munge",
        f"StateSaveLocation={folder}/state", f"SlurmdSpoolDir={folder}/spool{suffix}",
        f"SlurmctldPidFile={folder}/slurmctld.pid", f"SlurmdPidFile={folder}/slurmd{suffix}.pid",
        f"SlurmctldLogFile={folder}/slurmctld.log", f"SlurmdLogFile={folder}/slurmd{suffix}.log",
        "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "SwitchType=switch/none", "MpiDefault=none",
        "ReturnToService=2", "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core_Memory", "GresTypes=gpu",
        "JobCompType=jobcomp/filetxt", f"JobCompLoc={folder}/jobcomp.txt", "JobAcctGatherType=jobacct_gather/none",
        "SlurmdParameters=config_overrides", "JobRequeue=1", *accounting, *conf.lines(),
    ]
    names = node_names(case, host)
    for i, name in enumerate(names):
        where = "" if len(names) == 1 else f" NodeHostname={host} NodeAddr=127.0.0.1 Port={FIRST_SLURMD_PORT + i}"
        lines.append(f"NodeName={name}{where} CPUs={case.node_cpus} RealMemory={case.node_ram_mib} "
                     f"Gres=gpu:{case.node_gpus} State=UNKNOWN")
    for part in case.partitions or ({"name": "main", "default": True},):
        line = f"PartitionName={part['name']} Nodes={','.join(names)} State=UP"
        line += f" PriorityTier={part['priority_tier']}" if "priority_tier" in part else ""
        line += f" MaxTime={part['max_time_min']}" if "max_time_min" in part else " MaxTime=INFINITE"
        line += f" AllowAccounts={','.join(part['allow_accounts'])}" if "allow_accounts" in part else ""
        line += " Default=YES" if part.get("default") else ""
        line += " TRESBillingWeights=GRES/gpu=1" if case.needs_accounting else ""  # usage in GPU-seconds
        lines.append(line)
    return "\n".join(lines) + "\n"


def case_cluster(case: SlurmCase) -> ClusterSpec:
    """The case's nodes as a cluster (GPU speed 1), with its partitions."""
    data: dict[str, Any] = {"name": f"slurm-{case.name}", "node_groups": [{
        "name": NODE_NAME, "count": case.node_count, "gpu_type": "A100-80GB", "gpus": case.node_gpus,
        "cpus": case.node_cpus, "ram_gib": case.node_ram_mib / 1024}],
        "gpu_types": {"A100-80GB": {"memory_gib": 80, "speed": 1.0}}}
    if case.partitions:
        data["partitions"] = [{"name": p["name"], "groups": [NODE_NAME],
                               **({"priority_tier": p["priority_tier"]} if "priority_tier" in p else {}),
                               **({"max_wall_s": 60.0 * p["max_time_min"]} if "max_time_min" in p else {}),
                               **({"allowed_teams": list(p["allow_accounts"])} if "allow_accounts" in p else {}),
                               **({"default": True} if p.get("default") else {})} for p in case.partitions]
    return cluster_from_dict(data, f"case {case.name}")


def record_workload(case: SlurmCase) -> Workload:
    """The recorded jobs (a record's ``submit_s``, ``start_s``, ``end_s``) as a workload."""
    preemptable = {name for qos in case.params.qos.values() for name in qos.preempts}
    jobs = []
    for job in case.jobs:
        if "start_s" not in job:
            raise ConfigError(f"case {case.name}: job {job['id']} has no recorded start: not a record")
        qos = str(job.get("qos") or "")
        account = str(job.get("account") or "")
        jobs.append(Job(job_id=int(job["id"]), submit_time_s=float(job["submit_s"]),
                        runtime_s=float(job["end_s"] - job["start_s"]), runtime_estimate_s=60.0 * job["time_min"],
                        n_gpus=int(job["gpus"]), user=f"root@{account}" if account else "root",
                        team=account or "-", qos=qos, partition=str(job.get("partition") or ""),
                        preemptible=qos in preemptable))
    return Workload.from_jobs(case.name, jobs, source="slurm record")


@dataclass(frozen=True)
class Comparison:
    """Per job (Slurm's start, the simulator's start) [s], and the start-order inversions."""

    starts: Mapping[int, tuple[float, float]]
    inversions: int

    @property
    def diffs(self) -> np.ndarray:
        """|simulated − recorded start| per job [s]."""
        return np.array([abs(sim - real) for real, sim in self.starts.values()])

    @property
    def max_diff_s(self) -> float:
        """The largest |start difference| [s]."""
        return float(self.diffs.max())

    def within(self, tolerance_s: float) -> int:
        """How many jobs started within ``tolerance_s`` of Slurm's start."""
        return int((self.diffs <= tolerance_s).sum())


SAME_INSTANT_S = 1e-6
"""Starts closer than this are one instant [s]: the simulator's starts are rebuilt as end − runtime, which leaves
rounding noise of about 1e-15 s between jobs started together."""


def inversions(starts: Mapping[int, tuple[float, float]]) -> int:
    """Pairs of jobs that Slurm started in one order and the simulator in the other (starts within
    :data:`SAME_INSTANT_S` of each other are ties, not an order)."""
    def order(a: float, b: float) -> int:
        return 0 if abs(a - b) < SAME_INSTANT_S else (1 if a > b else -1)
    pairs = list(starts.values())
    return sum(1 for i, (a_real, a_sim) in enumerate(pairs) for b_real, b_sim in pairs[i + 1:]
               if order(a_real, b_real) * order(a_sim, b_sim) < 0)


def replay(case: SlurmCase, policy_name: str) -> JobLog:
    """The job log of the recorded stream replayed under ``policy_name``, with the case's ``slurm`` section (and
    the record's clocks and steering daemon) as a slurm policy's parameters."""
    if policy_name.strip().lower().partition("/")[0] == SLURM_PREFIX:
        policy = slurm_policy(policy_name, case.slurm, epoch_s=case.epoch_s, calc_origin_s=case.decay_s,
                              steering=twin_steering(case))
    else:  # the other presets take nothing from the section
        policy = make(policy_name)
    return simulate(case_cluster(case), record_workload(case), policy, RuntimeConfig.rigid(), RERUN)


def replay_starts(case: SlurmCase, policy_name: str) -> dict[int, float]:
    """Each job's (last) start [s] when the recorded stream is replayed under ``policy_name`` (:func:`replay`)."""
    return {r.job.job_id: r.finish_time_s - r.job.runtime_s for r in replay(case, policy_name).records}


def replay_nodes(case: SlurmCase, policy_name: str) -> dict[int, list[str]]:
    """Each job's nodes (of its last run) in the replay, named as the live run names them (:func:`node_names`)."""
    names = node_names(case, "node")
    cluster = case_cluster(case)
    return {r.job.job_id: [names[int(n)] for n in np.unique(cluster.gpu_node[r.gpus.index])]
            for r in replay(case, policy_name).records}


def twin_steering(case: SlurmCase) -> Steering | None:
    """The simulated twin of a record's steering daemon (its policy, field, scale, period and first tick), or None
    when no daemon ran: the simulator ranks with the policy itself, it does not replay the recorded writes."""
    if case.steering is None:
        return None
    ranker = make(case.steering.policy)
    return Steering(lambda view: rank_jobs(ranker, view), case.steering.period_s, case.steering.origin_s,
                    case.steering.scale, case.steering.field)


def compare(record: Mapping[str, Any] | SlurmCase, policy_name: str) -> Comparison:
    """The record's Slurm starts against ``policy_name``'s in the simulator."""
    case = record if isinstance(record, SlurmCase) else case_from_dict(record, "record")
    simulated = replay_starts(case, policy_name)
    starts = {int(j["id"]): (float(j["start_s"]), simulated[int(j["id"])]) for j in case.jobs}
    return Comparison(starts, inversions(starts))
