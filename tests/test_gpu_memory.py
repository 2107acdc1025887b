"""Exact per-GPU memory: fractional jobs sharing a GPU never hold more than its memory (SPEC §3, "GPU memory").

Clusters here are tiny and every expected time is worked out beside it. Memory is counted in MiB: an A100-40GB
has 40 × 1024 = 40960 MiB, a 30 GiB need is 30720 MiB, so two 30 GiB jobs (61440 MiB) never share one.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import run_checked

from baselines.registry import make
from envs.core import ActionRefused, Job, RuntimeConfig, cluster_from_dict
from envs.core.job import RefusalReason
from envs.placement import PLACEMENT_RULES
from envs.sim import Simulator, simulate
from envs.sim.checks import memory_violations

RIGID = RuntimeConfig.rigid()
A100 = 40 * 1024  # [MiB]


def a100s(n_gpus: int, nodes: int = 1):
    return cluster_from_dict({"name": "a100", "node_groups": [
        {"name": "a", "count": nodes, "gpu_type": "A100-40GB", "gpus": n_gpus}]})


def half(job_id: int, mem_gib: float = 30.0, runtime_s: float = 100.0, submit_s: float = 0.0) -> Job:
    return Job(job_id, submit_s, runtime_s, runtime_s, gpu_milli=500, gpu_mem_gib=mem_gib)


@pytest.mark.parametrize("rule", list(PLACEMENT_RULES))
def test_two_half_gpu_jobs_of_30_gib_never_share_an_a100_40gb(rule):
    # Both fit one GPU by share (500 + 500 milli) but not by memory (2 x 30720 > 40960 MiB): whatever the rule,
    # the second job goes to the other GPU, and each GPU keeps 40960 - 30720 = 10240 MiB free.
    sim = Simulator(a100s(2), [half(1), half(2)], RIGID)
    placed = []
    for job_id in (1, 2):
        gpus = PLACEMENT_RULES[rule](sim.view, sim.view.pending[job_id])
        sim.start(job_id, gpus)
        placed.append(int(gpus[0]))
    assert sorted(placed) == [0, 1]
    assert sim.view.gpu_free_mem_mib.tolist() == [A100 - 30 * 1024] * 2
    assert sim.view.gpu_free_milli.tolist() == [500, 500]


@pytest.mark.parametrize("rule", list(PLACEMENT_RULES))
def test_second_30_gib_job_waits_on_a_single_gpu(rule):
    # One A100-40GB: J1 (0.5 GPU, 30 GiB) runs 0-100; J2 (the same) has the share but not the memory, so it waits
    # until J1 ends and runs 100-200; J3 (0.5 GPU, 10 GiB) fits beside J1 (30 + 10 = 40 GiB) and runs 0-50.
    policy = make(f"fcfs+easy/{rule}")
    log = simulate(a100s(1), [half(1), half(2), half(3, mem_gib=10.0, runtime_s=50.0)], policy, RIGID)
    times = {r.job.job_id: (r.start_time_s, r.finish_time_s) for r in log.records}
    assert times == {1: (0.0, 100.0), 2: (100.0, 200.0), 3: (0.0, 50.0)}


def test_a_start_over_the_memory_is_refused_with_gpu_memory():
    sim = Simulator(a100s(1), [half(1), half(2)], RIGID)
    sim.start(1, [0])
    with pytest.raises(ActionRefused) as refused:
        sim.start(2, [0])
    assert refused.value.reason is RefusalReason.GPU_MEMORY
    assert "10240 MiB free" in str(refused.value) and "30720" in str(refused.value)
    assert sim.view.gpu_free_mem_mib[0] == 10240 and 2 in sim.view.pending  # nothing changed


def test_exactly_full_memory_is_allowed():
    # 30 + 10 GiB = 40960 MiB exactly: the integer accounting lets the second job in, leaving 0 MiB.
    sim = Simulator(a100s(1), [half(1), half(2, mem_gib=10.0)], RIGID)
    sim.start(1, [0])
    sim.start(2, [0])
    assert sim.view.gpu_free_mem_mib[0] == 0 and memory_violations(sim) == []


def test_zero_memory_need_holds_no_memory():
    # gpu_mem_gib 0 means the job's memory is not modelled: it holds none. Four 0.2-GPU jobs without a need share
    # GPU 0 with a 0.2-GPU job that needs all 40 GiB: the share is full (1000 milli) and so is the memory.
    jobs = [Job(i, 0, 10, 10, gpu_milli=200) for i in range(1, 5)] + [Job(5, 0, 10, 10, gpu_milli=200,
                                                                           gpu_mem_gib=40.0)]
    sim = Simulator(a100s(1), jobs, RIGID)
    for job_id in range(1, 6):
        sim.start(job_id, [0])
    assert sim.view.gpu_free_milli[0] == 0 and sim.view.gpu_free_mem_mib[0] == 0


def test_a_whole_gpu_job_holds_all_its_memory_and_gives_it_back():
    sim = Simulator(a100s(2), [Job(1, 0, 10, 10, n_gpus=2)], RIGID)
    sim.start(1, [0, 1])
    assert sim.view.gpu_free_mem_mib.tolist() == [0, 0]
    sim.wait()
    assert sim.done and sim.view.gpu_free_mem_mib.tolist() == [A100, A100]


def test_the_view_shows_free_memory_read_only():
    sim = Simulator(a100s(1), [half(1)], RIGID)
    sim.start(1, [0])
    assert sim.view.gpu_free_mem_mib[0] == 10240
    with pytest.raises(ValueError):
        sim.view.gpu_free_mem_mib[0] = A100


def test_easy_backfill_reserves_by_memory_too():
    # One A100-40GB. J1 (0.5 GPU, 30 GiB) runs 0-100. Head J2 (0.5 GPU, 30 GiB, t=1) lacks memory (10 GiB free):
    # reserved at J1's end, 100. J3 (0.25 GPU, 10 GiB, estimate 300, t=2) fits now, and at 100 J2 still fits
    # beside it (750 milli and 30 GiB free): backfilled, 2-302. J4 (0.2 GPU, 5 GiB, t=3) has the share (250 milli
    # free) but no memory (0 MiB free), then again none beside J2 (100-200): it starts when J2 ends, 200-210.
    jobs = [half(1), half(2, submit_s=1.0), Job(3, 2.0, 300, 300, gpu_milli=250, gpu_mem_gib=10.0),
            Job(4, 3.0, 10, 10, gpu_milli=200, gpu_mem_gib=5.0)]
    log = simulate(a100s(1), jobs, make("fcfs+easy/pack"), RIGID)
    times = {r.job.job_id: (r.start_time_s, r.finish_time_s) for r in log.records}
    assert times == {1: (0.0, 100.0), 2: (100.0, 200.0), 3: (2.0, 302.0), 4: (200.0, 210.0)}


# ---- property: random fractional workloads -------------------------------------------------------------------------
@st.composite
def fractional_workloads(draw) -> list[Job]:
    """2-16 jobs over 30 s: mostly fractional shares with memory needs that often bind on 16 and 40 GiB GPUs."""
    out = []
    for job_id in range(draw(st.integers(2, 16))):
        whole = draw(st.integers(0, 4)) == 0
        runtime = float(draw(st.sampled_from([1, 5, 20, 60])))
        out.append(Job(
            job_id, float(draw(st.integers(0, 30))), runtime, runtime * draw(st.sampled_from([1.0, 2.0])),
            n_gpus=draw(st.integers(1, 3)) if whole else 1,
            gpu_milli=1000 if whole else draw(st.sampled_from([100, 250, 400, 500])),
            gpu_mem_gib=0.0 if whole else draw(st.sampled_from([0.0, 4.0, 8.0, 12.5, 16.0, 24.0, 30.0])),
            preemptible=draw(st.booleans()), priority=draw(st.integers(0, 2)),
        ))
    return out


@st.composite
def memory_clusters(draw):
    groups = [{"name": f"g{i}", "count": draw(st.integers(1, 2)), "gpu_type": draw(st.sampled_from(
        ["V100", "A100-40GB", "H100"])), "gpus": draw(st.sampled_from([1, 2]))} for i in range(draw(st.integers(1, 2)))]
    return cluster_from_dict({"name": "mem", "node_groups": groups})


POLICIES = [f"fcfs+{b}/{r}" for b in ("none", "easy", "conservative") for r in PLACEMENT_RULES] + [
    "priority+easy/pack+preempt", "tiresias/pack", "k8s:mostallocated"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cluster=memory_clusters(), jobs=fractional_workloads(), policy=st.sampled_from(POLICIES))
def test_no_policy_ever_over_commits_gpu_memory(cluster, jobs, policy):
    assert run_checked(cluster, jobs, policy) == []
