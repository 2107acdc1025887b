"""Invariants of the simulator over random clusters, workloads and random (valid and invalid) actions (SPEC §11)."""

from __future__ import annotations

import random

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from envs.core import MILLI_PER_GPU, ActionRefused, Job, JobLog, JobState, RuntimeConfig
from envs.core.presets import cluster_from_dict
from envs.placement.feasibility import usable_gpu_mask, usable_gpus_per_node
from envs.sim import Simulator

TYPES = ["V100", "A100-40GB", "H100"]


@st.composite
def clusters(draw):
    groups = []
    for i in range(draw(st.integers(1, 3))):
        gpus = draw(st.sampled_from([1, 2, 4, 8]))
        groups.append({
            "name": f"g{i}",
            "count": draw(st.integers(1, 3)),
            "gpu_type": draw(st.sampled_from(TYPES)),
            "gpus": gpus,
            "island_size": draw(st.sampled_from([d for d in (1, 2, 4, 8) if gpus % d == 0])),
            "cpus": draw(st.sampled_from([0, 16, 64])),
            "ram_gib": draw(st.sampled_from([0, 64, 512])),
            "racks": draw(st.sampled_from([[0], [0, 1], [1, 2, 3]])),
            "cache_gib": draw(st.sampled_from([0, 30, 100])),
        })
    return cluster_from_dict({"name": "random", "node_groups": groups})


@st.composite
def workloads(draw):
    jobs = []
    for job_id in range(draw(st.integers(1, 20))):
        fractional = draw(st.booleans()) and draw(st.booleans())
        runtime = draw(st.sampled_from([0.0, 1.0, 7.5, 30.0, 100.0]))
        jobs.append(Job(
            job_id=job_id,
            submit_time_s=float(draw(st.integers(0, 60))),
            runtime_s=runtime,
            runtime_estimate_s=runtime * draw(st.sampled_from([0.5, 1.0, 3.0])) + 1,
            n_gpus=1 if fractional else draw(st.integers(1, 12)),
            gpu_milli=draw(st.sampled_from([100, 250, 500, 700])) if fractional else MILLI_PER_GPU,
            gpu_types=frozenset(draw(st.sets(st.sampled_from(TYPES), max_size=2))),
            gpu_mem_gib=draw(st.sampled_from([0.0, 0.0, 24.0])),
            cpu_milli_per_gpu=draw(st.sampled_from([0, 0, 4000, 20_000])),
            ram_mib_per_gpu=draw(st.sampled_from([0, 0, 65_536])),
            user=draw(st.sampled_from(["ann", "bob"])),
            comm_sensitivity=draw(st.sampled_from([0.0, 0.3, 1.0])),
            dataset_id=(ds := draw(st.sampled_from(["", "a", "b", "c"]))),
            dataset_gib=draw(st.sampled_from([10.0, 40.0, 200.0])) if ds else 0.0,
        ))
    return jobs


def random_valid_gpus(sim: Simulator, job: Job, rng: random.Random) -> list[int] | None:
    view = sim.view
    if job.is_fractional:
        candidates = np.flatnonzero(usable_gpu_mask(view, job)).tolist()
        return [rng.choice(candidates)] if candidates else None
    usable = usable_gpus_per_node(view, job)
    c = view.cluster
    candidates = []
    for node in np.flatnonzero(usable):
        first = c.node_first_gpu[node]
        free = np.flatnonzero(view.gpu_free_milli[first : c.node_first_gpu[node + 1]] == MILLI_PER_GPU) + first
        candidates.extend(free[: usable[node]].tolist())
    return rng.sample(candidates, job.n_gpus) if len(candidates) >= job.n_gpus else None


def random_state(cluster, fillers: list[Job], others: list[Job], fill: float, seed: int) -> Simulator:
    """A simulator at t=0 in which a share ``fill`` of ``fillers`` were started on random valid GPUs.

    The same arguments always build the same state (placement tests rebuild it once per rule).
    """
    rng = random.Random(seed)
    sim = Simulator(cluster, fillers + others)
    for job in fillers:
        if job.job_id in sim.view.pending and rng.random() < fill:
            gpus = random_valid_gpus(sim, job, rng)
            if gpus is not None:
                sim.start(job.job_id, gpus)
    return sim


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
