"""A pool of episode workloads as padded job tables on one device, and the check that they are inside the batched
engine's supported subset.

Jobs are kept in queue order (submit time, then job id). Jobs that could never run on the cluster are left out
here, as the event simulator rejects them at submission (they are counted in :attr:`WorkloadPool.rejected`). Each
job belongs to a placement class: its GPU count and its set of eligible nodes (GPU type and memory), which is all
the placement rules read of a whole-GPU job, so the rules are evaluated once per class and not once per job.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from envs.core.admission import capacity_reject_reason, partition_reject_reason
from envs.core.cluster import ClusterSpec
from envs.core.errors import ConfigError
from envs.core.job import Job
from envs.core.runtime import RuntimeConfig
from envs.gymenv.config import EnvConfig
from envs.gymenv.observation import JOB_FEATURES, ObservationEncoder
from envs.workload.table import Workload

SUPPORTED = """\
The batched engine simulates exactly (the same job log as the event simulator for the same actions): whole-GPU jobs
of any size (gangs across nodes and racks), heterogeneous GPU types and speeds, type and memory constraints, NVLink
islands, racks, partitions (their node sets; tiers order only the heuristics), the placement rules pack, spread and
topology, the "full" runtime model without dataset staging (no job reads a dataset) or the "rigid" one, CPU and RAM
needs that never bind (every node can feed all its GPUs) with one CPU need per GPU for all jobs, nodes of up to 16
GPUs, and the free or work-conserving Wait of GPUClusterEnv. Outside it (quotas, fractional GPUs, datasets with
staging, binding CPU or RAM, failures and outages, preemption, backfill_assist, per-job type speeds, MIG instances
and GPUs that start in MIG mode, other placement rules) it raises ConfigError."""

VEC_RULES = ("pack", "spread", "topology")
"""The placement rules the batched engine vectorizes."""


def check_config(config: EnvConfig) -> None:
    """Raise :class:`ConfigError` naming the first setting of ``config`` outside the supported subset."""
    outside = [rule for rule in config.placement_rules if rule not in VEC_RULES]
    if outside:
        raise ConfigError(f"env.placement_rules: the batched engine supports {', '.join(VEC_RULES)}, not "
                          f"{outside[0]!r}")
    if config.preemption:
        raise ConfigError("env.preemption: the batched engine does not simulate preemption")
    if config.backfill_assist:
        raise ConfigError("env.backfill_assist: the batched engine does not simulate backfill_assist")
    for key in ("planner_features", "mask_aliases"):
        if getattr(config, key):
            raise ConfigError(f"env.{key}: outside the batched engine's subset (the event env has it)")
    if config.dynamics.active:
        raise ConfigError(f"env.scenario: {config.scenario!r} has failures or outages, which the batched engine "
                          "does not simulate (use scenario: none)")


def check_job(job: Job, cluster: ClusterSpec, runtime: RuntimeConfig, where: str) -> None:
    """Raise :class:`ConfigError` when ``job`` is outside the supported subset (``where`` names its workload)."""
    what = None
    if job.mig_profile:
        what = f"asks for a MIG instance ({job.mig_profile})"
    elif job.is_fractional:
        what = f"takes {job.gpu_milli} milli-GPU (fractional GPUs)"
    elif runtime.use_staging and job.dataset_gib > 0:
        what = "reads a dataset, whose staging the batched engine does not simulate (use the rigid runtime model)"
    elif job.type_speeds:
        what = "has speeds of its own per GPU type"
    else:
        sizes = cluster.node_n_gpus
        short_cpu = cluster.cpu_modelled & (sizes * job.cpu_milli_per_gpu > cluster.node_cpu_milli)
        short_ram = cluster.ram_modelled & (sizes * job.ram_mib_per_gpu > cluster.node_ram_mib)
        if short_cpu.any() or short_ram.any():
            what = f"needs more {'CPU' if short_cpu.any() else 'RAM'} than some node has for all its GPUs (binding)"
    if what is not None:
        raise ConfigError(f"{where}: job {job.job_id} {what}: outside the batched engine's subset")


class WorkloadPool:
    """W workloads as (W, M) tensors, M the longest workload's job count (shorter ones are padded)."""

    def __init__(self, workloads: Sequence[Workload], cluster: ClusterSpec, config: EnvConfig,
                 runtime: RuntimeConfig, encoder: ObservationEncoder, device: torch.device) -> None:
        if not workloads:
            raise ConfigError("batched engine: the workload pool is empty")
        if cluster.governance.quotas.active:
            raise ConfigError(f"cluster {cluster.name!r}: quotas are outside the batched engine's subset")
        if cluster.gpu_mig_initial.any() and cluster.mig_reconfig_s > 0:
            raise ConfigError(f"cluster {cluster.name!r}: GPUs in MIG mode (whose switch to full mode costs "
                              "mig_reconfig_s) are outside the batched engine's subset")
        tables: list[list[Job]] = []
        reject_times: list[list[float]] = [[] for _ in workloads]  # submit times of the jobs rejected at submission
        eligible_sets: dict[tuple[frozenset[str], float, str], int] = {}
        masks: list[np.ndarray] = []
        classes: dict[tuple[int, int], int] = {}
        cpu_needs: set[int] = set()
        job_class: list[list[int]] = []
        for w, workload in enumerate(workloads):
            jobs = []
            for job in sorted(workload.jobs, key=lambda j: (j.submit_time_s, j.job_id)):
                check_job(job, cluster, runtime, f"workload {workload.name!r}")
                if (partition_reject_reason(cluster.governance, job) is not None
                        or capacity_reject_reason(cluster, job) is not None):
                    reject_times[w].append(job.submit_time_s)  # the simulator rejects it at submission
                    continue
                key = (job.gpu_types, job.gpu_mem_gib, job.partition)
                if key not in eligible_sets:
                    mask = cluster.eligible_nodes(*key)
                    found = next((i for i, m in enumerate(masks) if np.array_equal(m, mask)), None)
                    if found is None:
                        found = len(masks)
                        masks.append(mask)
                    eligible_sets[key] = found
                jobs.append(job)
                cpu_needs.add(job.cpu_milli_per_gpu)
            if not jobs:
                raise ConfigError(f"batched engine: workload {workload.name!r} has no job that can run on "
                                  f"cluster {cluster.name!r}")
            tables.append(jobs)
            job_class.append([classes.setdefault((j.n_gpus, eligible_sets[(j.gpu_types, j.gpu_mem_gib, j.partition)]),
                                                 len(classes)) for j in jobs])
        if len(cpu_needs) > 1 and cluster.cpu_modelled.any():
            raise ConfigError(f"batched engine: jobs need {len(cpu_needs)} different CPU amounts per GPU; the free_cpu "
                              "feature needs one for all jobs")
        self.cpu_milli_per_gpu = int(next(iter(cpu_needs), 0))
        m = max(max(len(t) for t in tables), 1)
        w_count = len(tables)
        submit = np.full((w_count, m + 1), np.inf)
        runtime_s = np.zeros((w_count, m + 1))
        estimate = np.zeros((w_count, m + 1))
        comm = np.zeros((w_count, m + 1))
        n_gpus = np.zeros((w_count, m + 1), dtype=np.int64)
        klass = np.zeros((w_count, m + 1), dtype=np.int64)
        group_end = np.zeros((w_count, m + 1), dtype=np.int64)
        static = np.zeros((w_count, m + 1, len(JOB_FEATURES)), dtype=np.float32)
        job_id = np.full((w_count, m + 1), -1, dtype=np.int64)
        for w, jobs in enumerate(tables):
            encoder.start_episode()
            for i, job in enumerate(jobs):
                submit[w, i], runtime_s[w, i], estimate[w, i] = job.submit_time_s, job.runtime_s, job.runtime_estimate_s
                comm[w, i], n_gpus[w, i], klass[w, i], job_id[w, i] = (job.comm_sensitivity, job.n_gpus,
                                                                       job_class[w][i], job.job_id)
                static[w, i] = encoder.static_features(job)
            times = submit[w, :len(jobs)]
            # the last job arriving at the same instant as job i: arrivals of one instant come in together
            group_end[w, :len(jobs)] = np.searchsorted(times, times, side="right") - 1
        t = lambda a, dtype=None: torch.as_tensor(a, dtype=dtype, device=device)  # noqa: E731
        self.rejected = np.array([len(times) for times in reject_times], dtype=np.int64)  # (W,) jobs rejected
        # a rejected job's arrival is still an event of the event simulator (a decision point if a job is pending)
        width = max(int(self.rejected.max()), 0) + 1
        rejects = np.full((len(tables), width), np.inf)
        for w, times in enumerate(reject_times):
            rejects[w, :len(times)] = times
        self.reject_submit = t(rejects)  # (W, R + 1) submit times of the rejected jobs, +inf padded [s]
        # the last rejected job of the same instant as rejected job i
        self.reject_group_end = t(np.stack([np.searchsorted(row, row, side="right") - 1 for row in rejects]))
        self.n_workloads, self.max_jobs = w_count, m
        self.n_jobs = t(np.array([len(jobs) for jobs in tables]))  # (W,) jobs that enter the queue
        self.submit = t(submit)  # (W, M + 1) [s]; the padding column is +inf
        self.runtime_s = t(runtime_s)  # (W, M + 1) base runtime at speed 1 [s]
        self.estimate_s = t(estimate)  # (W, M + 1) requested wall time [s]
        self.comm = t(comm)  # (W, M + 1) communication sensitivity
        self.n_gpus = t(n_gpus)  # (W, M + 1)
        self.job_class = t(klass)  # (W, M + 1) placement class
        self.group_end = t(group_end)  # (W, M + 1) index of the last job submitted at the same instant
        self.static = t(static)  # (W, M + 1, job features) the observation's per-job constants
        self.job_id = job_id  # (W, M + 1) numpy: the jobs' ids, for job logs
        self.eligible = t(np.array(masks))  # (E, nodes) bool: the eligible node sets
        self.class_gpus = t(np.array([n for n, _ in classes], dtype=np.int64))  # (C,)
        self.class_eligible = t(np.array([e for _, e in classes], dtype=np.int64))  # (C,)
        sizes = sorted({n for n, _ in classes})
        self.sizes = t(np.array(sizes, dtype=np.int64))  # (Z,) the distinct GPU counts
        self.class_size = t(np.array([sizes.index(n) for n, _ in classes], dtype=np.int64))  # (C,) index into sizes
