"""Hand-computed schedules on the ``tiny`` cluster under FIFO + first-fit.

tiny: node 0 = GPUs 0-3, A100-40GB (speed 1.0), NVLink islands {0,1} {2,3};
      node 1 = GPUs 4-7, V100 (speed 0.5), islands {4,5} {6,7}; one rack; 100 GiB dataset cache per node;
      32 cores and 256 GiB RAM per node.
Default runtime model: a_pcie 0.15, a_net 0.5, a_xrack 0.8, staging 1 GiB/s.
Every expected time below is worked out in the comment beside it.
"""

from __future__ import annotations

import pytest

from baselines import FifoFirstFit
from envs.core import Job, JobLog, JobRecord, JobState, RejectReason, RuntimeConfig, TopologyLevel
from envs.core.presets import cluster_from_dict
from envs.scenario import load_cluster
from envs.sim import Simulator, simulate

RIGID = RuntimeConfig.rigid()


@pytest.fixture(scope="module")
def tiny():
    return load_cluster("tiny")


def run(cluster, jobs, runtime=None) -> dict[int, JobRecord]:
    log: JobLog = simulate(cluster, jobs, FifoFirstFit(), runtime or RuntimeConfig())
    assert len(log.records) == len(jobs)
    return {r.job.job_id: r for r in log.records}


def times(record: JobRecord) -> tuple[float, float]:
    return record.start_time_s, record.finish_time_s


def test_fifo_head_of_line_blocking(tiny):
    # J1 takes 6 GPUs (0-5) for 100 s. J2 (4 GPUs) cannot fit (2 free) and blocks J3 (1 GPU) although GPU 6 is idle.
    # At t=100 J2 takes node 0 (GPUs 0-3) for 50 s, then J3 takes the first free GPU of node 1 (GPU 4) for 10 s.
    r = run(tiny, [Job(1, 0, 100, 100, n_gpus=6), Job(2, 1, 50, 50, n_gpus=4), Job(3, 2, 10, 10)], RIGID)
    assert times(r[1]) == (0, 100)
    assert times(r[2]) == (100, 150) and r[2].gpus == (0, 1, 2, 3)
    assert times(r[3]) == (100, 110) and r[3].gpus == (4,)
    assert r[3].wait_s == 98


def test_two_node_gang_job_starts_all_or_nothing(tiny):
    # J1: GPUs 0,1 for 100 s. J2 (5 GPUs): node 0 has 2 free, node 1 has 4: no node holds 5, so first-fit gangs
    # GPUs 2,3 (A100) + 4,5,6 (V100): speed 0.5, c = 0 -> 60 / 0.5 = 120 s, on 2 nodes of one rack.
    # J3 (8 GPUs) needs the whole cluster: at t=100 six GPUs are free but it starts only when J2 ends at 120,
    # on all 8 GPUs at speed 0.5: 10 / 0.5 = 20 s -> 140.
    r = run(tiny, [Job(1, 0, 100, 100, n_gpus=2), Job(2, 0, 60, 60, n_gpus=5), Job(3, 1, 10, 10, n_gpus=8)])
    assert r[2].gpus == (2, 3, 4, 5, 6) and r[2].n_nodes == 2 and r[2].topology is TopologyLevel.RACK
    assert times(r[2]) == (0, 120)
    assert times(r[3]) == (120, 140)


def test_topology_factor_across_islands_and_nodes(tiny):
    # J1: 4 GPUs with c = 1 -> node 0, islands {0,1} {2,3}: factor 1 + 1 * 0.15 = 1.15 -> 100 * 1.15 = 115 s.
    # J2: 2 GPUs with c = 1 -> node 1, GPUs 4,5 (one island): factor 1, speed 0.5 -> 200 s.
    r = run(tiny, [Job(1, 0, 100, 100, n_gpus=4, comm_sensitivity=1.0),
                   Job(2, 0, 100, 100, n_gpus=2, comm_sensitivity=1.0)])
    assert r[1].topology is TopologyLevel.NODE and r[1].topology_factor == pytest.approx(1.15)
    assert r[1].finish_time_s == pytest.approx(115)
    assert r[2].topology is TopologyLevel.ISLAND and r[2].finish_time_s == pytest.approx(200)
    # Across nodes of one rack, speed off: 6 GPUs with c = 0.5 -> 1 + 0.5 * 0.5 = 1.25 -> 125 s.
    no_speed = RuntimeConfig(use_speed=False)
    r = run(tiny, [Job(1, 0, 100, 100, n_gpus=6, comm_sensitivity=0.5)], no_speed)
    assert r[1].topology is TopologyLevel.RACK and r[1].finish_time_s == pytest.approx(125)


def test_topology_factor_across_racks():
    # Two 2-GPU nodes in racks 0 and 1: a 4-GPU job with c = 0.5 spans racks: 1 + 0.5 * 0.8 = 1.4 -> 140 s.
    two_racks = cluster_from_dict({"name": "two-racks", "node_groups": [
        {"count": 2, "gpu_type": "A100-40GB", "gpus": 2, "racks": [0, 1]}]})
    r = run(two_racks, [Job(1, 0, 100, 100, n_gpus=4, comm_sensitivity=0.5)])
    assert r[1].topology is TopologyLevel.CROSS_RACK and r[1].finish_time_s == pytest.approx(140)


def test_mixed_type_allocation_runs_at_slowest_speed(tiny):
    # 8 GPUs = 4 A100 (1.0) + 4 V100 (0.5), c = 0: runtime 100 / 0.5 = 200 s.
    r = run(tiny, [Job(1, 0, 100, 100, n_gpus=8)])
    assert r[1].speed == 0.5 and r[1].finish_time_s == pytest.approx(200)
    # Per-job speeds (Gavel-style) override the table: V100 at 0.8 for this job -> min(1.0, 0.8) -> 125 s.
    r = run(tiny, [Job(1, 0, 100, 100, n_gpus=8, type_speeds=(("V100", 0.8),))])
    assert r[1].speed == 0.8 and r[1].finish_time_s == pytest.approx(125)


def test_staging_delay_then_cache_hit_then_lru_eviction(tiny):
    # J1 (t=0): imagenet 50 GiB not cached on node 0 -> 50 s staging + 100 s -> 150.
    # J2 (t=200): imagenet again on GPU 0 -> hit, no staging -> 300.
    # J3 (t=200, after J2): coco 60 GiB on GPU 1 (node 0) -> miss, 60 s; 50 + 60 > 100 GiB so imagenet is evicted.
    # J4 (t=400): imagenet on GPU 0 -> miss again -> 400 + 50 + 100 = 550.
    r = run(tiny, [
        Job(1, 0, 100, 100, dataset_id="imagenet", dataset_gib=50),
        Job(2, 200, 100, 100, dataset_id="imagenet", dataset_gib=50),
        Job(3, 200, 100, 100, dataset_id="coco", dataset_gib=60),
        Job(4, 400, 100, 100, dataset_id="imagenet", dataset_gib=50),
    ])
    assert r[1].staging_s == 50 and times(r[1]) == (0, 150)
    assert r[2].staging_s == 0 and times(r[2]) == (200, 300) and r[2].gpus == (0,)
    assert r[3].staging_s == 60 and times(r[3]) == (200, 360) and r[3].gpus == (1,)
    assert r[4].staging_s == 50 and times(r[4]) == (400, 550)


def test_two_fractional_jobs_share_a_gpu_while_a_third_waits(tiny):
    # J0 takes GPUs 0-6 (no node holds 7: gang over both) for 1000 / 0.5 = 2000 s; only GPU 7 (V100) is left.
    # J1 (600 milli) and J2 (400 milli) share GPU 7 at speed 0.5: J1 100 -> 200 s, J2 50 -> 100 s.
    # J3 (500 milli) waits: at t=100 only 400 milli are free; at t=200 J1 frees 600 -> 1000 free -> starts, 200 s.
    r = run(tiny, [Job(0, 0, 1000, 1000, n_gpus=7), Job(1, 0, 100, 100, gpu_milli=600),
                   Job(2, 0, 50, 50, gpu_milli=400), Job(3, 0, 100, 100, gpu_milli=500)])
    assert r[1].gpus == r[2].gpus == (7,)
    assert times(r[1]) == (0, 200) and times(r[2]) == (0, 100)
    assert times(r[3]) == (200, 400) and r[3].gpus == (7,)


def test_impossible_jobs_are_rejected_with_reason(tiny):
    jobs = [
        Job(1, 0, 10, 10, n_gpus=9),  # the cluster has 8 GPUs
        Job(2, 0, 10, 10, gpu_types=frozenset({"H100"})),  # no H100 node
        Job(3, 0, 10, 10, gpu_types=frozenset({"V100"}), gpu_mem_gib=32),  # V100 has 16 GiB
        Job(4, 0, 10, 10, n_gpus=6, gpu_types=frozenset({"A100-40GB"})),  # only 4 A100
        Job(5, 0, 10, 10, cpu_milli_per_gpu=40_000),  # 40 cores for one GPU; nodes have 32
        Job(6, 0, 10, 10, n_gpus=2),  # fine
        Job(7, 0, 10, 10, n_gpus=8, cpu_milli_per_gpu=10_000),  # 8 GPUs exist, but 32 cores feed only 3 per node
    ]
    r = run(tiny, jobs)
    assert r[1].reject_reason is RejectReason.TOO_MANY_GPUS
    assert r[2].reject_reason is RejectReason.NO_ELIGIBLE_GPU
    assert r[3].reject_reason is RejectReason.NO_ELIGIBLE_GPU
    assert r[4].reject_reason is RejectReason.TOO_MANY_GPUS
    assert r[5].reject_reason is RejectReason.CPU_RAM
    assert r[7].reject_reason is RejectReason.CPU_RAM
    assert all(r[i].state is JobState.REJECTED for i in (1, 2, 3, 4, 5, 7))
    assert r[6].state is JobState.COMPLETED and times(r[6]) == (0, 10)


def test_type_restricted_job_waits_while_other_types_are_free(tiny):
    # J1 holds all four A100s for 100 s. J2 wants an A100: it waits although the four V100s are idle, and blocks
    # J3 (any type) behind it. At t=100 J2 takes GPU 0 (10 s) and J3 the next free GPU of node 0, GPU 1 (10 s).
    r = run(tiny, [Job(1, 0, 100, 100, n_gpus=4), Job(2, 1, 10, 10, gpu_types=frozenset({"A100-40GB"})),
                   Job(3, 2, 10, 10)])
    assert times(r[2]) == (100, 110) and r[2].gpus == (0,)
    assert times(r[3]) == (100, 110) and r[3].gpus == (1,)


def test_kill_at_walltime_ends_job_at_its_limit(tiny):
    # Runtime 100 s but requested 50 s: with the Slurm time limit on, it is killed at 50; off, it runs 100.
    killed = run(tiny, [Job(1, 0, 100, 50)], RuntimeConfig(kill_at_walltime=True))
    assert times(killed[1]) == (0, 50) and killed[1].timed_out
    free = run(tiny, [Job(1, 0, 100, 50)])
    assert times(free[1]) == (0, 100) and not free[1].timed_out


def test_cpu_limit_of_a_node_blocks_a_second_job(tiny):
    # Each node has 32 cores. J1 takes 1 GPU of node 0 with 24 cores; J2 (1 GPU, 24 cores) cannot share node 0,
    # so first-fit puts it on node 1 (GPU 4), where it runs at V100 speed: 10 / 0.5 = 20 s.
    r = run(tiny, [Job(1, 0, 100, 100, cpu_milli_per_gpu=24_000), Job(2, 0, 10, 10, cpu_milli_per_gpu=24_000)])
    assert r[1].gpus == (0,) and r[2].gpus == (4,) and times(r[2]) == (0, 20)


def test_interleaved_islands_are_detected():
    # One 4-GPU node whose NVLink islands are {0, 2} and {1, 3}: GPUs 0 and 2 share an island (factor 1),
    # GPUs 0, 1, 2 span both (PCIe: 1 + 1.0 * 0.15 = 1.15 -> 115 s).
    cluster = cluster_from_dict({"name": "interleaved", "node_groups": [
        {"count": 1, "gpu_type": "A100-40GB", "gpus": 4, "islands": [[0, 2], [1, 3]]}]})
    sim = Simulator(cluster, [Job(1, 0, 100, 100, n_gpus=2, comm_sensitivity=1.0),
                              Job(2, 0, 100, 100, n_gpus=3, comm_sensitivity=1.0)])
    sim.start(1, [0, 2])
    sim.wait()
    sim.start(2, [0, 1, 2])
    while not sim.done:
        sim.wait()
    r = {rec.job.job_id: rec for rec in sim.log().records}
    assert r[1].topology is TopologyLevel.ISLAND and r[1].finish_time_s == pytest.approx(100)
    assert r[2].topology is TopologyLevel.NODE and r[2].finish_time_s == pytest.approx(100 + 115)


def test_fragmentation_integral_follows_the_smallest_pending_job(tiny):
    # J1 (5 GPUs) gangs over GPUs 0-4 for 100 s, leaving GPUs 5, 6, 7 of node 1 idle. J2 (4 GPUs) waits from t=0:
    # node 1 holds 3 < min(4, 4) free GPUs, so all 3 idle GPUs are stranded. At t=50 J3 (1 GPU) queues behind J2
    # (FIFO): the smallest pending request is now 1 GPU, which node 1 could host: nothing is stranded.
    # Idle while pending: 3 GPUs x 100 s = 300 GPU-s; fragmented: 3 x 50 = 150 GPU-s.
    log = simulate(tiny, [Job(1, 0, 100, 100, n_gpus=5), Job(2, 0, 10, 10, n_gpus=4), Job(3, 50, 10, 10)],
                   FifoFirstFit(), RIGID)
    assert log.idle_gpu_s_while_pending == pytest.approx(300)
    assert log.fragmented_gpu_s == pytest.approx(150)
    assert log.busy_gpu_s == pytest.approx(5 * 100 + 4 * 10 + 1 * 10)
