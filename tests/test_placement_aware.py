"""Locality- and fragmentation-aware placement (SPEC §6): hand-computed choices and completeness.

States are built by starting jobs by hand on a :class:`Simulator` (the default runtime model stages datasets, so a
started job with a dataset fills its nodes' caches); the rule is then asked about a pending probe job. GPU
numbering is global, node by node. Expected allocations are worked out in the comment beside each case.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import clusters, jobs, placements_on_random_states

from envs.core import Job
from envs.core.presets import cluster_from_dict
from envs.placement import PLACEMENT_DOCS, PLACEMENT_RULES, pack
from envs.placement.aware import DEFAULT_MIX, fragmentation, locality
from envs.placement.feasibility import usable_gpus_per_node
from envs.scenario import load_cluster
from envs.sim import Simulator

PROBE = 100  # job id of the job a rule is asked about
IMAGENET = {"dataset_id": "imagenet", "dataset_gib": 50.0}


def state(cluster, held: dict[int, tuple[list[int], Job]], pending: list[Job]) -> Simulator:
    """A simulator at t=0 where job ``i`` (``held[i][1]``) holds GPUs ``held[i][0]``; ``pending`` waits."""
    sim = Simulator(cluster, [job for _, job in held.values()] + pending)
    for i, (gpus, _) in held.items():
        sim.start(i, gpus)
    return sim


def filler(job_id: int, n_gpus: int = 1, **kw) -> Job:
    return Job(job_id, 0, 1000, 1000, n_gpus=n_gpus, **kw)


def test_registry_lists_the_new_rules():
    assert list(PLACEMENT_RULES)[-2:] == ["locality", "fragmentation"]
    assert PLACEMENT_RULES["locality"] is locality and PLACEMENT_RULES["fragmentation"] is fragmentation
    assert PLACEMENT_DOCS["locality"] and PLACEMENT_DOCS["fragmentation"]


# ---- locality --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("probe", "expected_locality", "expected_pack"),
    [
        # tiny: job 1 (imagenet) on GPU 4 caches imagenet on node 1; job 2 holds GPUs 0, 1. Free: node 0 = GPUs 2, 3
        # (2 free), node 1 = GPUs 5, 6, 7 (3 free). Pack takes the tighter node 0; locality the caching node 1.
        (Job(PROBE, 0, 10, 10, **IMAGENET), [5], [2]),
        (Job(PROBE, 0, 10, 10, n_gpus=2, **IMAGENET), [5, 6], [2, 3]),
        # 3 GPUs: only node 1 holds it: both rules agree.
        (Job(PROBE, 0, 10, 10, n_gpus=3, **IMAGENET), [5, 6, 7], [5, 6, 7]),
        # Not cached anywhere, or no dataset at all: plain pack.
        (Job(PROBE, 0, 10, 10, dataset_id="coco", dataset_gib=60.0), [2], [2]),
        (Job(PROBE, 0, 10, 10), [2], [2]),
        # A half-GPU share: the least free share on a caching node (GPUs 5-7 tie at 1000: lowest) vs pack's GPU 2.
        (Job(PROBE, 0, 10, 10, gpu_milli=500, **IMAGENET), [5], [2]),
    ],
)
def test_locality_prefers_the_node_that_caches_the_dataset(probe, expected_locality, expected_pack):
    def build() -> Simulator:
        return state(load_cluster("tiny"), {1: ([4], filler(1, **IMAGENET)), 2: ([0, 1], filler(2, 2))}, [probe])

    sim = build()
    job = sim.view.pending[PROBE]
    assert locality(sim.view, job).tolist() == expected_locality
    assert pack(sim.view, job).tolist() == expected_pack
    if job.dataset_id == "imagenet":
        # The outcome: on the caching node the probe runs without staging; pack's node 0 pays 50 GiB / 1 GiB/s.
        for rule, staging_s in ((locality, 0.0), (pack, 50.0 if expected_pack != expected_locality else 0.0)):
            sim = build()
            sim.start(PROBE, rule(sim.view, job))
            while not sim.done:
                sim.wait()
            record = next(r for r in sim.log().records if r.job.job_id == PROBE)
            assert record.staging_s == staging_s, rule.__name__


THREE_CACHING = {"name": "three", "node_groups": [{"count": 3, "gpu_type": "A100-40GB", "gpus": 4, "cache_gib": 100}]}


@pytest.mark.parametrize(
    ("n_gpus", "expected_locality", "expected_pack"),
    [
        # Nodes 0 (GPUs 0-3) and 1 (4-7) cache imagenet, each with GPU 0 / GPU 4 busy: 3 + 3 free; node 2 (8-11)
        # is empty and uncached: 4 free. 6 GPUs fit on no node. The caching nodes hold 3 + 3 = 6: locality gangs
        # them (no staging); pack's gang rule takes node 2 (4) then node 0 (2).
        (6, [1, 2, 3, 5, 6, 7], [1, 2, 8, 9, 10, 11]),
        # 7 GPUs: the caching nodes hold only 6, so node 2 must join and staging is paid anyway: plain gang.
        (7, [1, 2, 3, 8, 9, 10, 11], [1, 2, 3, 8, 9, 10, 11]),
    ],
)
def test_locality_gangs_over_caching_nodes_when_they_suffice(n_gpus, expected_locality, expected_pack):
    probe = Job(PROBE, 0, 10, 10, n_gpus=n_gpus, **IMAGENET)
    sim = state(cluster_from_dict(THREE_CACHING), {1: ([0], filler(1, **IMAGENET)), 2: ([4], filler(2, **IMAGENET))},
                [probe])
    assert locality(sim.view, probe).tolist() == expected_locality
    assert pack(sim.view, probe).tolist() == expected_pack
    sim.start(PROBE, locality(sim.view, probe))  # accepted


# ---- fragmentation ---------------------------------------------------------------------------------------------
TWO_EIGHTS = {"name": "two-eights", "node_groups": [{"count": 2, "gpu_type": "A100-40GB", "gpus": 8}]}


@pytest.mark.parametrize(
    ("other", "expected"),
    [
        # Job 1 holds GPUs 0-2: node 0 has 5 free, node 1 (GPUs 8-15) 8 free. Probe: 3 GPUs. Pack: node 0 -> 3, 4, 5.
        # Score of a node with f free = Σ_k w_k × f × [f < min(k, 8)] over the mix of the other pending jobs.
        # Other job of 4 GPUs (mix {4: 1}): node 0: f 5 -> 2: 0 -> 2 (2 < 4): +2; node 1: f 8 -> 5: 0 -> 0: +0.
        #   Fragmentation keeps node 0's 5 free GPUs usable by the 4-GPU job: node 1.
        (4, [8, 9, 10]),
        # Other job of 2 GPUs: node 0: 5 -> 2 (2 >= 2): +0; node 1: +0. Tie -> pack: node 0.
        (2, [3, 4, 5]),
        # Other job of 8 GPUs: node 0: 5 -> 2: 5 -> 2: -3; node 1: 8 -> 5: 0 -> 5: +5: node 0 (node 1 stays whole).
        (8, [3, 4, 5]),
        # No other pending job: the default mix 1:5, 2:2, 4:2, 8:1. Node 0: before f = 5: only k = 8 strands:
        #   1 × 5 = 5; after f = 2: k = 4 (2 × 2) and k = 8 (1 × 2) = 6: +1. Node 1: before 0; after f = 5: k = 8:
        #   1 × 5 = 5: +5. Node 0.
        (None, [3, 4, 5]),
    ],
)
def test_fragmentation_and_pack_choose_differently_when_the_mix_needs_room(other, expected):
    pending = [Job(PROBE, 0, 10, 10, n_gpus=3)] + ([] if other is None else [Job(50, 0, 10, 10, n_gpus=other)])
    sim = state(cluster_from_dict(TWO_EIGHTS), {1: ([0, 1, 2], filler(1, 3))}, pending)
    job = sim.view.pending[PROBE]
    assert pack(sim.view, job).tolist() == [3, 4, 5]
    assert fragmentation(sim.view, job).tolist() == expected
    sim.start(PROBE, fragmentation(sim.view, job))  # accepted


@pytest.mark.parametrize(
    ("other_milli", "expected"),
    [
        # tiny: job 1 holds 400 milli of GPU 0 (600 free); every other GPU free except GPUs 4-7 (job 2).
        # Probe 500 milli. Pack: the least free share that holds it: GPU 0 (leaves 100).
        # Another pending share of 200 milli: 100 left on GPU 0 would be too small for it; GPU 1 leaves 500 >= 200.
        (200, [1]),
        # Another pending share of 100 milli: GPU 0's 100 left still serves it: pack's GPU 0.
        (100, [0]),
        # None pending: the smallest request is the probe's own 500: GPU 0 would leave 100 < 500: GPU 1.
        (None, [1]),
    ],
)
def test_fragmentation_keeps_usable_shares_for_fractional_jobs(other_milli, expected):
    pending = [Job(PROBE, 0, 10, 10, gpu_milli=500)]
    if other_milli is not None:
        pending.append(Job(50, 0, 10, 10, gpu_milli=other_milli))
    sim = state(load_cluster("tiny"), {1: ([0], filler(1, gpu_milli=400)), 2: ([4, 5, 6, 7], filler(2, 4))},
                pending)
    job = sim.view.pending[PROBE]
    assert pack(sim.view, job).tolist() == [0]
    assert fragmentation(sim.view, job).tolist() == expected


def test_fragmentation_gang_is_packs_gang():
    # Node 0: 5 free (GPUs 3-7), node 1: 8 free. 10 GPUs fit on no node: the gang rule: node 1 (8) + node 0 (2).
    probe = Job(PROBE, 0, 10, 10, n_gpus=10)
    sim = state(cluster_from_dict(TWO_EIGHTS), {1: ([0, 1, 2], filler(1, 3))}, [probe])
    assert fragmentation(sim.view, probe).tolist() == pack(sim.view, probe).tolist() == [3, 4, *range(8, 16)]


# ---- completeness and exact choices over random states --------------------------------------------------------


def reference(name: str, sim: Simulator, job: Job) -> list[int] | None:
    """The documented choices for a job that one node can hold, as plain loops (else None: checked elsewhere)."""
    view, c = sim.view, sim.cluster
    usable = usable_gpus_per_node(view, job).tolist()
    fits = [i for i in range(c.n_nodes) if usable[i] >= job.n_gpus]
    if job.is_fractional or not fits:
        return None

    def lowest_free(node: int) -> list[int]:
        first, last = c.node_first_gpu[node], c.node_first_gpu[node + 1]
        return [g for g in range(first, last) if view.gpu_whole_free[g]][: job.n_gpus]

    if name == "locality":
        near = [i for i in fits if job.dataset_id and view.has_dataset(i, job.dataset_id)]
        return lowest_free(min(near or fits, key=lambda i: (usable[i], i)))
    others = [j.n_gpus for j in view.pending.values() if j.job_id != job.job_id]
    mix = {k: others.count(k) for k in set(others)} if others else dict(DEFAULT_MIX)

    def stranded(node: int, free: int) -> int:
        return sum(w * free for k, w in mix.items() if free < min(k, c.nodes[node].n_gpus))

    def increase(i: int) -> int:
        free = int(view.node_free_gpus[i])
        return stranded(i, free - job.n_gpus) - stranded(i, free)

    return lowest_free(min(fits, key=lambda i: (increase(i), usable[i], i)))


@pytest.mark.parametrize("name", ["locality", "fragmentation"])
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cluster=clusters(), fillers=jobs(0, 12, (1, 1, 2, 4)), probes=jobs(100, 3, (1, 2, 3, 4, 6, 8, 12)),
       fill=st.sampled_from([0.3, 0.7]), seed=st.integers(0, 2**16))
def test_aware_rules_are_complete_exact_and_accepted_by_the_simulator(name, cluster, fillers, probes, fill, seed):
    for sim, probe, gpus in placements_on_random_states(name, cluster, fillers, probes, fill, seed):
        expected = reference(name, sim, probe)
        if expected is not None:
            assert gpus.tolist() == expected, name
