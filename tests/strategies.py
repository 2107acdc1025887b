"""Random cases for the property tests and soak runs: hypothesis strategies for clusters, probe jobs and workloads,
seeded generators of large scenarios, the random simulator states the placement tests ask their rules about, and
the random driver whose runs the invariant checks (:mod:`envs.sim.checks`) judge."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Iterator

import numpy as np
from hypothesis import strategies as st

from envs.core import MILLI_PER_GPU, ActionRefused, ClusterSpec, Job, JobLog, RuntimeConfig, cluster_from_dict
from envs.core.dynamics import DynamicsConfig
from envs.placement import PLACEMENT_RULES
from envs.placement.feasibility import usable_gpu_mask, usable_gpus_per_node
from envs.sim import Simulator
from envs.sim.checks import log_violations, state_violations
from envs.sim.loop import apply_action

TYPES = ["V100", "A100-40GB", "H100"]
"""GPU types of the random clusters (16, 40 and 80 GiB)."""


@st.composite
def clusters(draw) -> ClusterSpec:
    """1-3 node groups of 1-4 nodes: 1, 2, 4 or 8 GPUs of one type in even or interleaved NVLink islands, CPUs and
    RAM modelled or not, one or several racks, a dataset cache or none."""
    groups = []
    for i in range(draw(st.integers(1, 3))):
        gpus = draw(st.sampled_from([1, 2, 4, 8]))
        layouts = [{"island_size": d} for d in (1, 2, 4, 8) if gpus % d == 0]
        if gpus >= 4:  # interleaved islands: even and odd GPUs
            layouts.append({"islands": [list(range(0, gpus, 2)), list(range(1, gpus, 2))]})
        groups.append({
            "name": f"g{i}",
            "count": draw(st.integers(1, 4)),
            "gpu_type": draw(st.sampled_from(TYPES)),
            "gpus": gpus,
            **draw(st.sampled_from(layouts)),
            "cpus": draw(st.sampled_from([0, 16, 64])),
            "ram_gib": draw(st.sampled_from([0, 64, 512])),
            "racks": draw(st.sampled_from([[0], [0, 1], [1, 2, 3], [5]])),
            "cache_gib": draw(st.sampled_from([0, 30, 100])),
        })
    return cluster_from_dict({"name": "random", "node_groups": groups})


@st.composite
def jobs(draw, first_id: int, count: int, sizes: tuple[int, ...]) -> list[Job]:
    """1 to ``count`` jobs submitted at 0 with ids from ``first_id``: whole GPUs (a count from ``sizes``) or a
    fractional share, with or without type, GPU-memory, CPU, RAM and dataset needs."""
    out = []
    for job_id in range(first_id, first_id + draw(st.integers(1, count))):
        fractional = draw(st.booleans()) and draw(st.booleans())
        dataset = draw(st.sampled_from(["", "d1", "d1", "d2"]))
        out.append(Job(
            job_id=job_id, submit_time_s=0.0, runtime_s=100.0, runtime_estimate_s=100.0,
            n_gpus=1 if fractional else draw(st.sampled_from(sizes)),
            gpu_milli=draw(st.sampled_from([100, 250, 300, 500, 700])) if fractional else MILLI_PER_GPU,
            gpu_types=frozenset(draw(st.sets(st.sampled_from(TYPES), max_size=2))),
            gpu_mem_gib=draw(st.sampled_from([0.0, 0.0, 24.0])),
            cpu_milli_per_gpu=draw(st.sampled_from([0, 0, 4000, 6000, 20_000])),
            ram_mib_per_gpu=draw(st.sampled_from([0, 0, 65_536])),
            dataset_id=dataset, dataset_gib=30.0 if dataset else 0.0,
        ))
    return out


@st.composite
def workloads(draw) -> list[Job]:
    """1-20 jobs arriving over a minute: runtimes from 0 s, estimates below and above them, every kind of need."""
    out = []
    for job_id in range(draw(st.integers(1, 20))):
        fractional = draw(st.booleans()) and draw(st.booleans())
        runtime = draw(st.sampled_from([0.0, 1.0, 7.5, 30.0, 100.0]))
        out.append(Job(
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
    return out


@st.composite
def queues(draw) -> list[Job]:
    """1-14 jobs for the priority orders: submits from 0 to 50 s (ties included), estimates from 0 s, fractional
    shares, three users in two teams, priority classes 0-3."""
    out = []
    for job_id in range(draw(st.integers(1, 14))):
        fractional = draw(st.booleans())
        out.append(Job(
            job_id=job_id, submit_time_s=float(draw(st.sampled_from([0, 0, 5, 20, 50]))),
            runtime_s=float(draw(st.sampled_from([1, 10, 30]))),
            runtime_estimate_s=float(draw(st.sampled_from([0, 10, 30, 100]))),
            n_gpus=1 if fractional else draw(st.sampled_from([1, 2, 4, 8])),
            gpu_milli=draw(st.sampled_from([250, 500])) if fractional else 1000,
            user=draw(st.sampled_from("abc")), team=draw(st.sampled_from("xy")), priority=draw(st.integers(0, 3)),
        ))
    return out


@st.composite
def exact_workloads(draw) -> list[Job]:
    """2-16 whole-GPU jobs (1-6 GPUs) whose estimates are exact: runtime = requested wall time, 1-60 s."""
    out = []
    for job_id in range(draw(st.integers(2, 16))):
        est = float(draw(st.integers(1, 60)))
        out.append(Job(job_id, float(draw(st.integers(0, 80))), est, est, n_gpus=draw(st.integers(1, 6))))
    return out


def random_valid_gpus(sim: Simulator, job: Job, rng: random.Random) -> list[int] | None:
    """Random GPUs on which ``job`` may start now (any valid allocation, not a rule's), or None when none exists."""
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


def random_state(cluster: ClusterSpec, fillers: list[Job], others: list[Job], fill: float, seed: int) -> Simulator:
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


def placements_on_random_states(name: str, cluster: ClusterSpec, fillers: list[Job], probes: list[Job], fill: float,
                                seed: int) -> Iterator[tuple[Simulator, Job, np.ndarray | None]]:
    """Rule ``name`` asked about each probe not rejected at submission, on a fresh :func:`random_state`: yields
    (state, probe, the rule's GPUs) once the rule is found complete (None exactly when no valid allocation exists);
    after the caller's own checks, starts the probe there (the simulator refuses an invalid allocation)."""
    for probe in probes:
        sim = random_state(cluster, fillers, probes, fill, seed)
        if probe.job_id not in sim.view.pending:  # rejected at submission
            continue
        gpus = PLACEMENT_RULES[name](sim.view, probe)
        if probe.is_fractional:
            feasible = bool(usable_gpu_mask(sim.view, probe).any())
        else:
            feasible = int(usable_gpus_per_node(sim.view, probe).sum()) >= probe.n_gpus
        assert (gpus is not None) == feasible, name
        yield sim, probe, gpus
        if gpus is not None:
            assert gpus.dtype == np.int64 and gpus.size == probe.n_gpus and (np.diff(gpus) > 0).all()
            sim.start(probe.job_id, gpus)  # raises ActionRefused if the simulator disagrees


# ---- large scenarios, from one seed ---------------------------------------------------------------------------------
def large_cluster(rng: random.Random) -> ClusterSpec:
    """Up to 64 nodes in up to 6 groups of mixed sizes (1-8 GPUs, even or interleaved islands), types, CPU, RAM,
    racks and dataset caches."""
    groups, nodes = [], 0
    for i in range(rng.randint(1, 8)):
        count = rng.randint(1, min(16, 64 - nodes))
        nodes += count
        gpus = rng.choice([1, 2, 4, 8])
        layout = rng.choice([{"island_size": d} for d in (1, 2, 4, 8) if gpus % d == 0]
                            + ([{"islands": [list(range(0, gpus, 2)), list(range(1, gpus, 2))]}] if gpus >= 4 else []))
        groups.append({"name": f"g{i}", "count": count, "gpu_type": rng.choice(TYPES), "gpus": gpus, **layout,
                       "cpus": rng.choice([0, 16, 64]), "ram_gib": rng.choice([0, 64, 512]),
                       "racks": rng.choice([[0], [0, 1], [1, 2, 3], list(range(8))]),
                       "cache_gib": rng.choice([0, 30, 100, 1000])})
        if nodes >= 64:
            break
    return cluster_from_dict({"name": "large", "node_groups": groups})


def large_workload(rng: random.Random) -> list[Job]:
    """Up to 300 jobs over up to an hour: whole GPUs (up to 16, a few larger than any cluster) or fractional
    shares, estimates below and above the runtimes, every kind of need, datasets from a small catalogue."""
    out = []
    for job_id in range(rng.randint(1, 300)):
        fractional = rng.random() < 0.25
        runtime = rng.choice([0.0, 1.0, 7.5, 30.0, 100.0, 600.0, 3600.0])
        dataset = rng.choice(["", "", "a", "b", "c", "d"])
        out.append(Job(
            job_id=job_id,
            submit_time_s=float(rng.randint(0, 3600)),
            runtime_s=runtime,
            runtime_estimate_s=runtime * rng.choice([0.5, 1.0, 3.0]) + 1,
            n_gpus=1 if fractional else rng.choice([1, 1, 1, 2, 2, 4, 8, 16, 600]),
            gpu_milli=rng.choice([100, 250, 500, 700]) if fractional else MILLI_PER_GPU,
            gpu_types=frozenset(rng.sample(TYPES, rng.choice([0, 0, 0, 1, 2]))),
            gpu_mem_gib=rng.choice([0.0, 0.0, 0.0, 24.0]),
            cpu_milli_per_gpu=rng.choice([0, 0, 0, 4000, 20_000]),
            ram_mib_per_gpu=rng.choice([0, 0, 0, 65_536]),
            user=rng.choice(["ann", "bob", "cy"]),
            comm_sensitivity=rng.choice([0.0, 0.3, 1.0]),
            dataset_id=dataset,
            dataset_gib=rng.choice([10.0, 40.0, 200.0]) if dataset else 0.0,
            priority=rng.choice([0, 0, 1, 2]),
            preemptible=rng.random() < 0.5,
            checkpoint_interval_s=rng.choice([0.0, 0.0, 7.0, 50.0, 300.0]),
        ))
    return out


def any_dynamics(rng: random.Random, cluster: ClusterSpec) -> DynamicsConfig:
    """Random node and GPU failures (MTBF from an hour to a day per node, exponential or fixed repairs), explicit
    failures and outages, random outages, any restart overhead and retry limit; one time in four, none at all."""
    if rng.random() < 0.25:
        return DynamicsConfig(seed=rng.randrange(2**16))
    schedule = [{"node": rng.randrange(cluster.n_nodes), "fail_s": float(rng.randint(0, 3600)),
                 "repair_s": float(rng.randint(1, 900)), **({"gpu": 0} if rng.random() < 0.5 else {})}
                for _ in range(rng.randint(0, 3))]
    config = DynamicsConfig.from_dict({
        "failures": {"node_mtbf_s": rng.choice([float("inf"), 3600.0, 20_000.0, 86_400.0]),
                     "gpu_mtbf_s": rng.choice([float("inf"), float("inf"), 20_000.0, 200_000.0]),
                     "repair": rng.choice(["exponential", "fixed"]), "mttr_s": rng.choice([10.0, 300.0, 1800.0]),
                     "schedule": schedule},
        "outages": {"windows": [[float(rng.randint(0, 3600)), float(rng.randint(1, 1800))]
                                for _ in range(rng.randint(0, 2))],
                    "mtbf_s": rng.choice([float("inf"), 1800.0, 7200.0]), "mttr_s": rng.choice([30.0, 600.0])},
        "restart_overhead_s": rng.choice([0.0, 5.0, 60.0]),
        "max_failures": rng.choice([0, 1, 6]),
    }, name="random")
    return dataclasses.replace(config, seed=rng.randrange(2**16))


def any_runtime(rng: random.Random) -> RuntimeConfig:
    """A runtime model with every switch on or off, ``kill_at_walltime`` included."""
    return RuntimeConfig(use_speed=rng.random() < 0.5, use_topology=rng.random() < 0.5,
                         use_staging=rng.random() < 0.5, kill_at_walltime=rng.random() < 0.5)


# ---- the random driver ---------------------------------------------------------------------------------------------
def drive(cluster: ClusterSpec, jobs: list[Job], seed: int, runtime: RuntimeConfig | None = None,
          check: bool = True, dynamics: DynamicsConfig | None = None) -> tuple[JobLog, list[str]]:
    """Run a random policy (a random pending job on random valid GPUs, sometimes arbitrary ones, random
    preemptions, random waits, some until a time) to the end, with ``dynamics``: (the log, every invariant
    violation seen; ``check`` also checks the state after every action)."""
    rng = random.Random(seed)
    sim = Simulator(cluster, jobs, runtime or RuntimeConfig(), dynamics)
    found: list[str] = []
    while not sim.done:
        pending = list(sim.view.pending.values())
        stalled = not sim.events_left
        running = list(sim.view.running)
        if running and rng.random() < 0.05:  # a random preemption: refused unless the job is preemptible
            victim = rng.choice(running)
            try:
                sim.preempt(victim)
            except ActionRefused:
                if victim in sim.view.pending:
                    found.append(f"a refused preemption of job {victim} requeued it")
        elif pending and (stalled or rng.random() < 0.7):
            job = rng.choice(pending)
            gpus = random_valid_gpus(sim, job, rng)
            if rng.random() < 0.2:  # an arbitrary action: accepted only if valid, else refused with no effect
                gpus = [rng.randrange(-1, cluster.n_gpus + 1) for _ in range(rng.choice([job.n_gpus, 1, 3]))]
            if gpus is not None:
                before = sim.view.gpu_free_milli.copy()
                try:
                    sim.start(job.job_id, gpus)
                except ActionRefused:
                    if not (sim.view.gpu_free_milli == before).all():
                        found.append(f"a refused start of job {job.job_id} changed the free shares")
            elif stalled:
                found.append(f"job {job.job_id} cannot start on an empty cluster but was not rejected")
                break
        else:
            sim.wait(sim.time_s + rng.choice([1.0, 60.0]) if rng.random() < 0.1 else None)
        if check:
            found += state_violations(sim)
    if sim.done:
        found += log_violations(sim, jobs)
    return sim.log(), found


def run_checked(cluster: ClusterSpec, jobs: list[Job], policy_name: str, runtime: RuntimeConfig | None = None,
                check: Callable[[Simulator], list[str]] | None = None,
                dynamics: DynamicsConfig | None = None) -> list[str]:
    """Run the policy ``policy_name`` to the end (a refused start raises: a policy's action must be valid), checking
    the state invariants and ``check`` after every action, then the log's; the violations found."""
    from baselines import make  # the heuristics sit above envs: imported only by the tests that drive them

    policy = make(policy_name)
    policy.reset()
    sim = Simulator(cluster, jobs, runtime or RuntimeConfig.rigid(), dynamics)
    found: list[str] = []
    while not sim.done:
        apply_action(sim, policy.act(sim.view))
        found += state_violations(sim) + (check(sim) if check is not None else [])
    return found + log_violations(sim, jobs)
