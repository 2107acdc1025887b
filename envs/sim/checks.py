"""The simulator's invariants as checks that report rather than raise: for the property tests, soak runs
(``benchmarks/soak.py``) and anyone debugging a policy. Each returns the list of what is violated (empty: all
hold)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from envs.core.cluster import MILLI_PER_GPU
from envs.core.job import Job, JobState
from envs.core.mig import MEMORY_SLICES, MIG_GEOMETRIES
from envs.sim.simulator import Simulator

TOLERANCE = 1e-9
"""Relative tolerance of the integral checks (sums of floats in another order) [dimensionless]."""


def state_violations(sim: Simulator) -> list[str]:
    """No GPU, milli-share, GPU memory, CPU or RAM is over-allocated; a failed GPU holds nothing and has no free
    share; the derived counters agree with the per-GPU state; the queue is in (submit time, job id) order; MIG
    geometry is valid (:func:`mig_violations`)."""
    c, view = sim.cluster, sim.view
    found = []
    free = view.gpu_free_milli
    if not ((free >= 0) & (free <= MILLI_PER_GPU)).all():
        found.append("a GPU's free share is outside 0..1000 milli-GPU")
    whole = free == MILLI_PER_GPU
    if not (np.bincount(c.gpu_node[whole], minlength=c.n_nodes) == view.node_free_gpus).all():
        found.append("free GPUs per node disagree with the per-GPU state")
    if view.free_gpus != int(whole.sum()):
        found.append("the free-GPU count disagrees with the per-GPU state")
    if (view.node_free_cpu_milli < 0).any() or (view.node_free_ram_mib < 0).any():
        found.append("a node's CPU or RAM is over-allocated")
    if (view.node_free_cpu_milli > c.node_cpu_milli).any() or (view.node_free_ram_mib > c.node_ram_mib).any():
        found.append("a node has more free CPU or RAM than it holds")
    queue = [(j.submit_time_s, j.job_id) for j in view.pending.values()]
    if queue != sorted(queue):
        found.append("the queue is not in (submit time, job id) order")
    held = np.where(view.gpu_up, MILLI_PER_GPU, 0)
    for running in view.running.values():
        held[running.gpus.index] -= running.job.gpu_milli
        if not view.gpu_up[running.gpus.index].all():
            found.append(f"job {running.job.job_id} runs on a failed GPU")
    if not (held == free).all():
        found.append("the running jobs' shares disagree with the free shares")
    if view.down_gpus != int((~view.gpu_up).sum()):
        found.append("the failed-GPU count disagrees with the per-GPU health")
    return found + memory_violations(sim) + mig_violations(sim)


def memory_violations(sim: Simulator) -> list[str]:
    """No GPU's memory is over-committed: free memory is in 0..capacity and is the capacity (0 for a failed GPU)
    less what the running jobs hold (all of it for whole GPUs, ``gpu_mem_mib`` for a fractional share, the memory
    slices' part for a MIG instance)."""
    c, view = sim.cluster, sim.view
    found = []
    free = view.gpu_free_mem_mib
    if not ((free >= 0) & (free <= c.gpu_memory_mib)).all():
        found.append("a GPU's free memory is outside 0..its capacity")
    held = np.where(view.gpu_up, c.gpu_memory_mib, 0)
    for running in view.running.values():
        job, index = running.job, running.gpus.index
        if not job.is_fractional:
            held[index] -= c.gpu_memory_mib[index]
        elif job.mig_profile:
            g, mask = view.mig_slices.get(job.job_id, (int(index[0]), 0))
            held[g] -= int(c.gpu_memory_mib[g]) * mask.bit_count() // MEMORY_SLICES
        else:
            held[index] -= job.gpu_mem_mib
    if not (held == free).all():
        found.append("the running jobs' memory disagrees with the free memory (over-committed or lost)")
    return found


def mig_violations(sim: Simulator) -> list[str]:
    """MIG geometry is valid: every running MIG job holds one instance of its profile at a valid position of its
    GPU's type, instances on one GPU do not overlap and make up its occupancy mask, a GPU holding instances is in
    MIG mode and holds no other job, a GPU holding an ordinary job is in full mode."""
    c, view = sim.cluster, sim.view
    found = []
    mig_jobs = {j for j, r in view.running.items() if r.job.mig_profile}
    if set(view.mig_slices) != mig_jobs:
        found.append("the MIG instances held disagree with the running MIG jobs")
    occupancy = np.zeros(c.n_gpus, dtype=np.int64)
    for job_id, (g, mask) in view.mig_slices.items():
        running = view.running.get(job_id)
        if running is None:
            continue
        geometry = MIG_GEOMETRIES.get(c.nodes[int(c.gpu_node[g])].gpu_type)
        profile = geometry.profile(running.job.mig_profile) if geometry is not None else None
        if profile is None or mask not in profile.masks:
            found.append(f"job {job_id}: MIG slices {mask:08b} on GPU {g} are not a valid position of "
                         f"{running.job.mig_profile}")
        if list(running.gpus.index) != [g]:
            found.append(f"job {job_id}: its MIG instance is not on the GPU it holds")
        if occupancy[g] & mask:
            found.append(f"GPU {g}: MIG instances overlap")
        occupancy[g] |= mask
    if not (occupancy == view.gpu_mig_used).all():
        found.append("the MIG occupancy masks disagree with the instances held")
    sliced = occupancy != 0
    if (sliced & ~view.gpu_mig_mode).any():
        found.append("a GPU holds MIG instances in full mode")
    for running in view.running.values():
        if not running.job.mig_profile:
            index = running.gpus.index
            if sliced[index].any():
                found.append(f"job {running.job.job_id} shares a GPU holding MIG instances")
            if view.gpu_mig_mode[index].any():
                found.append(f"job {running.job.job_id} runs on a GPU in MIG mode")
    return found


def log_violations(sim: Simulator, jobs: Sequence[Job]) -> list[str]:
    """Of a finished run of ``jobs``: every job ends exactly once, with consistent times and allocation, FAILED
    only past the retry limit; GPU-seconds are conserved (the integral of allocated GPUs is the time the jobs held
    them, and under the rigid model a completed job's held time minus its lost work and restart overhead is its
    runtime); fragmentation is at most the idle time; the wait integral is the total time jobs were queued; with
    ``kill_at_walltime`` no job that ran once runs past its requested wall time."""
    log = sim.log()
    found = []
    if sorted(r.job.job_id for r in log.records) != sorted(j.job_id for j in jobs):
        found.append("not every job ended exactly once")
    rigid = not (sim.runtime.use_speed or sim.runtime.use_topology or sim.runtime.use_staging
                 or sim.runtime.kill_at_walltime)
    reconfig_s = sim.mig_reconfig_paid_s
    for r in log.records:
        i = r.interruptions
        if r.state is JobState.REJECTED:
            if r.reject_reason is None:
                found.append(f"job {r.job.job_id}: rejected without a reason")
            continue
        if not (r.start_time_s >= r.job.submit_time_s and r.finish_time_s >= r.start_time_s):
            found.append(f"job {r.job.job_id}: start before submit or finish before start")
        if len(r.gpus) != r.job.n_gpus:
            found.append(f"job {r.job.job_id}: {len(r.gpus)} GPUs for {r.job.n_gpus} asked")
        if r.state is JobState.FAILED:
            if i is None or i.failures <= sim.dynamics.max_failures:
                found.append(f"job {r.job.job_id}: FAILED within the retry limit")
            continue
        if i is None and sim.runtime.kill_at_walltime and r.run_s > r.job.runtime_estimate_s * (1 + TOLERANCE):
            found.append(f"job {r.job.job_id}: ran past its requested wall time")
        if i is not None and rigid:
            share = r.job.gpu_share
            work = (r.run_s - (i.lost_failure_gpu_s + i.lost_preemption_gpu_s + i.overhead_gpu_s) / share
                    - reconfig_s.get(r.job.job_id, 0.0))
            if abs(work - r.job.runtime_s) > TOLERANCE * max(1.0, r.run_s) * (2 + i.failures + i.preemptions):
                found.append(f"job {r.job.job_id}: held {r.run_s} s, lost and overhead leave {work} s of work for "
                             f"a runtime of {r.job.runtime_s} s")
    ran = log.ran()
    held = sum(r.job.gpu_share * r.run_s for r in ran)
    if abs(log.busy_gpu_s - held) > TOLERANCE * max(1.0, held):
        found.append(f"GPU-seconds not conserved: integral {log.busy_gpu_s} against {held} held")
    if not 0 <= log.fragmented_gpu_s <= log.idle_gpu_s_while_pending * (1 + TOLERANCE) + TOLERANCE:
        found.append("fragmented GPU-seconds outside 0..idle GPU-seconds")
    total_wait = sum(r.wait_s if r.interruptions is None else r.finish_time_s - r.job.submit_time_s - r.run_s
                     for r in ran)
    if abs(sim.pending_job_s - total_wait) > TOLERANCE * max(1.0, total_wait):
        found.append(f"the wait integral {sim.pending_job_s} is not the total wait {total_wait}")
    return found
