"""Kubernetes filter-and-score (SPEC §6, :mod:`baselines.kubernetes`): kube's score formulas against hand-computed
node sets, the queue, gangs, shares, preemption and the names.

Most cases use THREE (global GPUs: node 0 = 0-3, node 1 = 4-11, node 2 = 12-15) in the state FILLED:
- node 0: 4 GPUs in islands {0, 1} {2, 3}, 32 cores, 256 GiB (262144 MiB); job 1 holds GPUs 0 and 2 with 4000 m CPU
  and 40000 MiB per GPU (8000 m, 80000 MiB in all);
- node 1: 8 GPUs in islands {4-7} {8-11}, 64 cores, RAM not modelled; job 2 holds GPUs 4-7 with 8000 m per GPU
  (32000 m);
- node 2: 4 GPUs in one island, neither CPU nor RAM modelled; job 3 holds GPUs 12 and 13.
The probe (job 100) asks for 1 GPU with 2000 m CPU and 10000 MiB RAM, so with it each node would have requested
(GPU [milli], CPU [m], RAM [MiB]): node 0 (3000/4000, 10000/32000, 90000/262144), node 1 (5000/8000,
34000/64000, -), node 2 (3000/4000, -, -). Resource weights are the defaults: GPU 3, CPU 1, memory 1. Every
expected score is worked out in the comment beside it (// is integer division).
"""

from __future__ import annotations

import numpy as np
import pytest
from strategies import run_checked

from baselines import catalogue, make
from baselines.kube_scores import balanced_allocation, broken_linear, requested_to_capacity_ratio
from baselines.kubernetes import KUBE_PROFILES, KubeScheduler, in_node
from envs.core import ConfigError, Job, RuntimeConfig
from envs.core.cluster import ClusterSpec, NodeSpec
from envs.core.dynamics import DynamicsConfig
from envs.scenario import load_cluster, scenario
from envs.sim import Simulator, simulate
from envs.sim.loop import apply_action
from envs.sim.policy import Start

RIGID = RuntimeConfig.rigid()
TINY = load_cluster("tiny")
THREE = ClusterSpec("three", (
    NodeSpec("n0", "A100-40GB", 4, ((0, 1), (2, 3)), cpu_milli=32000, ram_mib=262144),
    NodeSpec("n1", "A100-40GB", 8, ((0, 1, 2, 3), (4, 5, 6, 7)), cpu_milli=64000),
    NodeSpec("n2", "A100-40GB", 4, ((0, 1, 2, 3),)),
))
ONLY_FIT = {"balanced_weight": 0, "topology_weight": 0, "locality_weight": 0}


def job(job_id: int, submit_s: float = 0.0, runtime_s: float = 1000.0, n_gpus: int = 1, **more) -> Job:
    """A job whose requested wall time is its runtime [s]."""
    return Job(job_id, submit_s, runtime_s, runtime_s, n_gpus=n_gpus, **more)


def filled(probe: Job) -> Simulator:
    """THREE in the state FILLED (module docstring) at t = 0, ``probe`` pending."""
    fillers = [job(1, n_gpus=2, cpu_milli_per_gpu=4000, ram_mib_per_gpu=40000),
               job(2, n_gpus=4, cpu_milli_per_gpu=8000), job(3, n_gpus=2)]
    sim = Simulator(THREE, [*fillers, probe])
    for filler, gpus in zip(fillers, ([0, 2], [4, 5, 6, 7], [12, 13]), strict=True):
        sim.start(filler.job_id, gpus)
    return sim


PROBE = job(100, cpu_milli_per_gpu=2000, ram_mib_per_gpu=10000)


def scores(name: str, probe: Job = PROBE, **params) -> tuple[dict[str, list[int]], list[int]]:
    """(every plugin's score per node, the GPUs the policy starts the probe on) in FILLED."""
    sim = filled(probe)
    policy = make(name, **params)
    counts = np.full(THREE.n_nodes, probe.n_gpus)
    found = policy.rule.plugin_scores(sim.view, probe, counts, np.array([2, 4, 2]))
    action = policy.act(sim.view)
    assert isinstance(action, Start) and action.job_id == probe.job_id
    return {k: v.tolist() for k, v in found.items()}, [int(g) for g in action.gpus]


# ---- the formulas, on FILLED ------------------------------------------------------------------------------------
def test_least_allocated_scores_and_choice():
    # node 0: GPU (4000-3000)·100//4000 = 25, CPU 22000·100//32000 = 68, RAM 172144·100//262144 = 65;
    #         (3·25 + 68 + 65) // 5 = 208 // 5 = 41.
    # node 1: GPU 3000·100//8000 = 37, CPU 30000·100//64000 = 46, RAM left out; (3·37 + 46) // 4 = 157 // 4 = 39.
    # node 2: GPU 25 only; 75 // 3 = 25.  Highest: node 0, whose lowest free GPU is 1.
    found, gpus = scores("k8s:leastallocated", **ONLY_FIT)
    assert found["fit"] == [41, 39, 25]
    assert gpus == [1]


def test_most_allocated_scores_and_choice():
    # node 0: GPU 3000·100//4000 = 75, CPU 10000·100//32000 = 31, RAM 90000·100//262144 = 34; 290 // 5 = 58.
    # node 1: GPU 5000·100//8000 = 62, CPU 34000·100//64000 = 53; (186 + 53) // 4 = 239 // 4 = 59.
    # node 2: 75.  Highest: node 2, lowest free GPU 14.
    found, gpus = scores("k8s:mostallocated", **ONLY_FIT)
    assert found["fit"] == [58, 59, 75]
    assert gpus == [14]


def test_requested_to_capacity_ratio_scores_interpolate_with_go_truncation():
    # Shape (0, 0), (50, 10), (100, 2), scaled ×10: (0, 0), (50, 100), (100, 20). Utilization u = req·100 // cap.
    # node 0: u = 75, 31, 34: f(75) = 100 + (−80·25)/50 = 60, f(31) = 100·31/50 = 3100/50 = 62, f(34) = 68;
    #         round((3·60 + 62 + 68) / 5) = round(62.0) = 62.
    # node 1: u = 62, 53: f(62) = 100 + trunc(−960/50 = −19.2) = 81 (flooring would give 80), f(53) = 100 +
    #         trunc(−240/50 = −4.8) = 96; round((3·81 + 96) / 4) = round(84.75) = 85.
    # node 2: u = 75: 60.  Highest: node 1, lowest free GPU 8.
    found, gpus = scores("k8s:ratio", shape=[(0, 0), (50, 10), (100, 2)], **ONLY_FIT)
    assert found["fit"] == [62, 85, 60]
    assert gpus == [8]


def test_requested_to_capacity_ratio_leaves_out_resources_scoring_zero():
    # Default shape: f(u) = u. GPU 2000/4000: u = 50; CPU 0/1000: f(0) = 0, left out of both sums (kube's
    # `if resourceScore > 0`), so round(3·50 / 3) = 50, not round(150 / 4) = 38.
    score = requested_to_capacity_ratio(np.array([[2000], [0]]), np.array([[4000], [1000]]), np.array([3, 1]),
                                        [(0, 0), (100, 10)])
    assert score.tolist() == [50]
    # At and beyond the end points: the first and last scores.
    assert broken_linear([(20, 30), (80, 90)], np.array([0, 20, 50, 80, 100])).tolist() == [30, 30, 60, 90, 90]


def test_balanced_allocation_scores_and_choice():
    # node 0: fractions 0.75, 0.3125, 0.34332; mean 0.46861, population std 0.19937; int(80.06) = 80.
    # node 1: two fractions 0.625, 0.53125: std = |0.625 − 0.53125| / 2 = 0.046875; int(95.3125) = 95.
    # node 2: one fraction: std 0, 100.  k8s:balanced has every other plugin at weight 0: node 2, GPU 14.
    found, gpus = scores("k8s:balanced")
    assert found["balanced"] == [80, 95, 100]
    assert gpus == [14]
    # int() truncates: fractions 0.1 and 0.8 give std 0.35, (1 − 0.35)·100 = 64.99999999999999 -> 64.
    assert balanced_allocation(np.array([[1], [8]]), np.array([[10], [10]])).tolist() == [64]


def test_island_plugin_and_lowest_index_tie_break():
    # A 2-GPU probe: node 0's islands have one free GPU each (0); node 1's island {8-11} has 4 (100); node 2's
    # island has 2 free (100). Nodes 1 and 2 tie at 100: the lowest index, node 1, takes island {8-11}'s lowest.
    probe = job(100, n_gpus=2)
    sim = filled(probe)
    policy = make("k8s:leastallocated", fit_weight=0, balanced_weight=0, locality_weight=0)
    assert policy.rule.plugin_scores(sim.view, probe, np.full(3, 2), np.array([2, 4, 2]))["island"].tolist() \
        == [0, 100, 100]
    assert [int(g) for g in policy.act(sim.view).gpus] == [8, 9]


def test_inside_a_node_the_lowest_island_that_holds_the_job_else_the_lowest_free_gpus():
    # Node 0 has GPUs 1 (island {0, 1}) and 3 (island {2, 3}) free: no island holds 2, so its lowest free GPUs
    # 1, 3. Node 1 has island {8-11} entirely free: 8, 9.
    sim = filled(job(100, n_gpus=2))
    assert in_node(sim.view, 0, 2).tolist() == [1, 3]
    assert in_node(sim.view, 1, 2).tolist() == [8, 9]


def test_dataset_locality_is_image_locality_with_gib_thresholds():
    # tiny: job 1 (1 GPU, dataset d of 40 GiB) started on GPU 0 caches d on node 0. The probe reads d: k = 1 of
    # N = 2 nodes, so node 0's sum is int(40 GiB · 1/2) = 20 GiB; score 100·(20 − 1) GiB // (100 − 1) GiB = 19;
    # node 1: sum 0 -> clamped to 1 GiB -> 0.
    d = {"dataset_id": "d", "dataset_gib": 40.0}
    probe = job(100, **d)
    sim = Simulator(TINY, [job(1, **d), probe])
    sim.start(1, [0])
    policy = make("k8s:leastallocated")
    found = policy.rule.plugin_scores(sim.view, probe, np.ones(2, dtype=np.int64), np.array([3, 4]))
    assert found["locality"].tolist() == [19, 0]


# ---- the cycle --------------------------------------------------------------------------------------------------
def test_queue_sorts_by_priority_then_creation_time():
    # Job 1 holds all 8 GPUs until t = 100. Then jobs of 8 GPUs start one after another (10 s each) in the order
    # priority descending, then submit time: 3 (prio 5, submit 2) at 100, 4 (prio 5, submit 3) at 110,
    # 2 (prio 0, submit 1) at 120.
    jobs = [job(1, 0, 100, 8), job(2, 1, 10, 8), job(3, 2, 10, 8, priority=5), job(4, 3, 10, 8, priority=5)]
    log = simulate(TINY, jobs, make("k8s:mostallocated"), RIGID)
    starts = {r.job.job_id: r.start_time_s for r in log.records}
    assert starts == {1: 0.0, 3: 100.0, 4: 110.0, 2: 120.0}


def test_a_job_that_does_not_fit_does_not_block_later_ones():
    # Job 1 holds 6 GPUs until t = 100. Job 2 (8 GPUs, priority 9) cannot start before then; job 3 (1 GPU,
    # priority 0) starts at its submit time, 2: kube sets an unschedulable pod aside, it reserves nothing.
    jobs = [job(1, 0, 100, 6), job(2, 1, 10, 8, priority=9), job(3, 2, 10, 1)]
    log = simulate(TINY, jobs, make("k8s:leastallocated"), RIGID)
    starts = {r.job.job_id: r.start_time_s for r in log.records}
    assert starts == {1: 0.0, 2: 100.0, 3: 2.0}


@pytest.mark.parametrize(("params", "expected"), [
    # Job 1 holds GPU 0 (node 0: 3 usable), job 2 holds GPUs 4, 5 (node 1: 2 usable, island {6, 7} free). The
    # 4-GPU probe fits no node. Each node is scored for min(usable, 4) GPUs: MostAllocated 3·100 // 5 = 60 on both
    # (GPUs full, no CPU or RAM asked for), balanced 52 on both (fractions 1, 0, 0: std √(2/9) = 0.471), island:
    # node 0 cannot hold 3 in one island (0), node 1 holds 2 in {6, 7} (100). So node 1 gives 6, 7 first and node 0
    # the remaining 2: GPUs 1, 2.
    ({}, [1, 2, 6, 7]),
    # Without the island plugin the nodes tie: node 0 first gives 3 (1, 2, 3), node 1 the last one (6).
    ({"topology_weight": 0}, [1, 2, 3, 6]),
])
def test_gang_across_nodes_in_descending_score(params, expected):
    probe = job(100, n_gpus=4)
    sim = Simulator(TINY, [job(1), job(2, n_gpus=2), probe])
    sim.start(1, [0])
    sim.start(2, [4, 5])
    action = make("k8s:mostallocated", **params).act(sim.view)
    assert isinstance(action, Start) and action.job_id == 100
    assert [int(g) for g in action.gpus] == expected
    sim.start(action.job_id, action.gpus)  # the simulator accepts it


def test_a_gang_that_cannot_reach_its_size_waits():
    # 7 GPUs free of 8 (GPU 0 held): an 8-GPU job does not start.
    sim = Simulator(TINY, [job(1), job(2, n_gpus=8)])
    sim.start(1, [0])
    assert make("k8s:mostallocated").rule(sim.view, sim.view.pending[2]) is None


def test_fractional_share_goes_to_the_fullest_usable_gpu_of_the_chosen_node():
    # Job 1 holds 500 milli of GPU 0. A 250-milli probe: MostAllocated GPU 750·100//4000 = 18 on node 0 against
    # 250·100//4000 = 6 on node 1 (no CPU or RAM asked for: 3·18 // 5 = 10 and 3·6 // 5 = 3), so node 0, and
    # there the usable GPU with the least free share that holds it: GPU 0 (500 free).
    probe = job(100, gpu_milli=250)
    sim = Simulator(TINY, [job(1, gpu_milli=500), probe])
    sim.start(1, [0])
    action = make("k8s:mostallocated").act(sim.view)
    assert isinstance(action, Start) and [int(g) for g in action.gpus] == [0]


def test_preempt_variant_evicts_a_lower_priority_preemptible_job():
    # At t = 0 job 2 (priority 1) is placed first, on node 0 (the nodes tie: lowest index), then job 1 (priority
    # 0) on node 1. At t = 10 job 3 (priority 10, 4 GPUs) fits nowhere; DefaultPreemption picks the candidate whose
    # most important victim has the lowest priority: job 1 on node 1. Job 3 starts there at once.
    jobs = [job(1, n_gpus=4, preemptible=True), job(2, n_gpus=4, priority=1, preemptible=True),
            job(3, 10, 100, 4, priority=10)]
    sim = Simulator(TINY, jobs, RIGID, DynamicsConfig())
    policy = make("k8s:mostallocated+preempt")
    actions = []
    while not sim.done and sim.time_s <= 10:
        action = policy.act(sim.view)
        if not apply_action(sim, action):
            continue
        actions.append((sim.time_s, type(action).__name__, action.job_id, tuple(getattr(action, "gpus", ()))))
    assert [a[:3] for a in actions[:2]] == [(0.0, "Start", 2), (0.0, "Start", 1)]
    assert actions[2:4] == [(10.0, "Preempt", 1, ()), (10.0, "Start", 3, (4, 5, 6, 7))]
    assert policy.name == "k8s:mostallocated+preempt"


# ---- names and parameters ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(KUBE_PROFILES))
def test_every_profile_is_made_by_name_and_listed(name):
    policy = make(f"K8S:{name.upper()}")
    assert isinstance(policy, KubeScheduler) and policy.name == f"k8s:{name}"
    assert name in catalogue().split("Kubernetes filter-and-score")[1]


@pytest.mark.parametrize("name", [*(f"k8s:{n}" for n in sorted(KUBE_PROFILES)), "k8s:mostallocated+preempt"])
def test_runs_stay_valid_on_a_generated_workload_with_failures(name):
    # The small generated workload (fractional shares, gangs, datasets, priorities) on tiny, with node failures:
    # no action is refused, no resource is over-allocated, every job ends exactly once.
    world = scenario("small", "tiny", seed=3, dynamics="flaky")
    assert run_checked(world.cluster, list(world.workload.jobs), name, world.runtime, dynamics=world.dynamics) == []


@pytest.mark.parametrize(("name", "params", "message"), [
    ("k8s:mostallocated", {"weight": 2}, "accepted: fit_weight"),
    ("k8s:nosuch", {}, "known: leastallocated"),
    ("k8s:mostallocated", {"shape": [(0, 0), (100, 10)]}, "only k8s:ratio"),
    ("k8s:ratio", {"shape": [(50, 0), (20, 10)]}, "strictly increasing"),
    ("k8s:ratio", {"shape": [(0, 0.5)]}, "integer pairs"),
    ("k8s:leastallocated", {"gpu_weight": -1}, "gpu_weight: must be an integer >= 0"),
    ("k8s:leastallocated", {"locality_min_gib": 5, "locality_max_gib": 5}, "min < max"),
])
def test_bad_names_and_parameters_are_config_errors(name, params, message):
    with pytest.raises(ConfigError, match=message):
        make(name, **params)
