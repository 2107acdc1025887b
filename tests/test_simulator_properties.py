"""Invariants of the simulator over random clusters, workloads and random (valid and invalid) actions (SPEC §11)."""

from __future__ import annotations

import random

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import clusters, random_valid_gpus, workloads

from envs.core import MILLI_PER_GPU, ActionRefused, JobLog, JobState, RuntimeConfig
from envs.sim import Simulator


def check_state(sim: Simulator) -> None:
    """No GPU, milli-share, CPU or RAM is over-allocated, and the derived counters agree with the per-GPU state."""
    c = sim.cluster
    free = sim.view.gpu_free_milli
    assert ((free >= 0) & (free <= MILLI_PER_GPU)).all()
    whole = free == MILLI_PER_GPU
    assert (np.bincount(c.gpu_node[whole], minlength=c.n_nodes) == sim.view.node_free_gpus).all()
    assert sim.view.free_gpus == whole.sum()
    assert (sim.view.node_free_cpu_milli >= 0).all() and (sim.view.node_free_ram_mib >= 0).all()
    assert (sim.view.node_free_cpu_milli <= c.node_cpu_milli).all()
    queue = [(j.submit_time_s, j.job_id) for j in sim.view.pending.values()]
    assert queue == sorted(queue)  # the queue order orders rely on: submit time, then job id
    held = np.full(c.n_gpus, MILLI_PER_GPU)
    for running in sim.view.running.values():
        held[running.gpus.index] -= running.job.gpu_milli
    assert (held == free).all()


def drive(cluster, jobs, seed: int, check: bool = True) -> JobLog:
    """Run a random policy: random pending job, random valid (sometimes invalid) GPUs, random waits."""
    rng = random.Random(seed)
    sim = Simulator(cluster, jobs, RuntimeConfig())
    while not sim.done:
        pending = list(sim.view.pending.values())
        stalled = not sim.events_left
        if pending and (stalled or rng.random() < 0.7):
            job = rng.choice(pending)
            gpus = random_valid_gpus(sim, job, rng)
            if rng.random() < 0.2:  # an arbitrary action: accepted only if valid, else refused with no effect
                gpus = [rng.randrange(-1, cluster.n_gpus + 1) for _ in range(rng.choice([job.n_gpus, 1, 3]))]
            if gpus is not None:
                before = sim.view.gpu_free_milli.copy()
                try:
                    sim.start(job.job_id, gpus)
                except ActionRefused:
                    assert (sim.view.gpu_free_milli == before).all()
            elif stalled:
                raise AssertionError(f"job {job.job_id} cannot start on an empty cluster but was not rejected")
        else:
            sim.wait()
        if check:
            check_state(sim)
    log = sim.log()
    # the wait integral the env's reward telescopes to: ∫ pending jobs dt = Σ wait
    total_wait = sum(r.wait_s for r in log.completed())
    assert abs(sim.pending_job_s - total_wait) <= 1e-9 * max(1.0, total_wait)
    return log


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cluster=clusters(), jobs=workloads(), seed=st.integers(0, 2**16))
def test_random_actions_keep_every_invariant(cluster, jobs, seed):
    log = drive(cluster, jobs, seed)
    # every job ends exactly once
    ended = [r.job.job_id for r in log.records]
    assert sorted(ended) == sorted(j.job_id for j in jobs)
    for r in log.records:
        if r.state is JobState.COMPLETED:
            assert r.start_time_s >= r.job.submit_time_s and r.finish_time_s >= r.start_time_s
            assert len(r.gpus) == r.job.n_gpus
        else:
            assert r.state is JobState.REJECTED and r.reject_reason is not None
    # GPU-seconds conserved: the simulator's integral of allocated GPUs = Σ share × held time of the jobs
    held = sum(r.job.gpu_share * r.run_s for r in log.completed())
    assert abs(log.busy_gpu_s - held) <= 1e-9 * max(1.0, held)
    assert 0 <= log.fragmented_gpu_s <= log.idle_gpu_s_while_pending + 1e-9


@settings(max_examples=40, deadline=None)
@given(cluster=clusters(), jobs=workloads(), seed=st.integers(0, 2**16))
def test_same_seed_gives_same_log(cluster, jobs, seed):
    assert drive(cluster, jobs, seed, check=False) == drive(cluster, jobs, seed, check=False)
