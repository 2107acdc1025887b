"""MIG: NVIDIA's instance geometry on A100/H100, GPU modes and their switching cost (SPEC §3, "GPU memory and MIG").

An A100-40GB has 8 memory slices; masks below are written with slice 0 as the lowest bit (0b0000_1111: slices
0-3). Positions (``nvidia-smi mig -lgipp``): 1g.5gb {0..6}:1, 1g.10gb {0,2,4,6}:2, 2g.10gb {0,2,4}:2,
3g.20gb {0,4}:4, 4g.20gb {0}:4, 7g.40gb {0}:8. The simulator takes the lowest free valid position.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import drive, run_checked

from baselines.registry import make
from envs.core import ActionRefused, Job, JobState, RejectReason, RuntimeConfig, cluster_from_dict, summarize
from envs.core.errors import JobSpecError
from envs.core.job import RefusalReason
from envs.core.mig import MIG_GEOMETRIES, share_milli, valid_positions
from envs.placement import PLACEMENT_RULES
from envs.scenario import scenario
from envs.sim import Simulator, simulate
from envs.sim.checks import mig_violations

RIGID = RuntimeConfig.rigid()


def cluster(*groups, reconfig_s: float | None = None):
    data = {"name": "mig", "node_groups": [
        {"name": f"g{i}", "count": 1, "gpu_type": t, "gpus": n, "mig": mig} for i, (t, n, mig) in enumerate(groups)]}
    if reconfig_s is not None:
        data["mig_reconfig_s"] = reconfig_s
    return cluster_from_dict(data)


ONE = cluster(("A100-40GB", 1, True))
TWO = cluster(("A100-40GB", 2, True))


def mig(job_id: int, profile: str, runtime_s: float = 100.0, submit_s: float = 0.0) -> Job:
    return Job(job_id, submit_s, runtime_s, runtime_s, mig_profile=profile)


def refusal(sim: Simulator, job_id: int, gpu: int) -> RefusalReason:
    with pytest.raises(ActionRefused) as refused:
        sim.start(job_id, [gpu])
    return refused.value.reason


def masks(sim: Simulator) -> dict[int, int]:
    return {job_id: mask for job_id, (_, mask) in sim.view.mig_slices.items()}


# ---- geometry: one test per profile family ---------------------------------------------------------------------------
def test_after_a_4g_at_0_a_3g_goes_to_4_and_nothing_else_fits():
    sim = Simulator(ONE, [mig(1, "4g.20gb"), mig(2, "3g.20gb"), mig(3, "1g.5gb")], RIGID)
    sim.start(1, [0])
    sim.start(2, [0])
    assert masks(sim) == {1: 0b0000_1111, 2: 0b1111_0000}
    assert refusal(sim, 3, 0) is RefusalReason.MIG_GEOMETRY  # every slice held (3g + 4g = 7 compute slices)
    assert sim.view.gpu_free_milli[0] == 1000 - 571 - 428 and mig_violations(sim) == []


def test_seven_1g_fill_slices_0_to_6_and_an_eighth_waits():
    # FIFO + first-fit: seven 1g.5gb start at 0 on slices 0..6 (slice 7 cannot hold a 1g.5gb); the eighth waits for
    # the first to end (t=10) and takes its slice 0.
    jobs = [mig(i, "1g.5gb", runtime_s=10.0) for i in range(8)]
    sim = Simulator(ONE, jobs, RIGID)
    for i in range(7):
        sim.start(i, [0])
    assert masks(sim) == {i: 1 << i for i in range(7)}
    assert refusal(sim, 7, 0) is RefusalReason.MIG_GEOMETRY
    log = simulate(ONE, jobs, make("fcfs"), RIGID)
    assert {r.job.job_id: r.start_time_s for r in log.records} == {**{i: 0.0 for i in range(7)}, 7: 10.0}


def test_2g_sits_only_at_0_2_4():
    # After a 1g.5gb on slice 0, 2g.10gb instances go to 2 and 4; a third cannot take 6-7 (not a 2g position) and,
    # with slice 1 alone free below, waits although 3 slices (1, 6, 7) are free.
    sim = Simulator(ONE, [mig(1, "1g.5gb"), mig(2, "2g.10gb"), mig(3, "2g.10gb"), mig(4, "2g.10gb")], RIGID)
    for job_id in (1, 2, 3):
        sim.start(job_id, [0])
    assert masks(sim) == {1: 0b0000_0001, 2: 0b0000_1100, 3: 0b0011_0000}
    assert refusal(sim, 4, 0) is RefusalReason.MIG_GEOMETRY
    assert valid_positions(MIG_GEOMETRIES["A100-40GB"].profile("2g.10gb"), 0b0011_1101) == ()


def test_1g_10gb_takes_two_slices_at_even_positions_on_a100_40gb_and_one_on_80gb():
    sim = Simulator(cluster(("A100-40GB", 1, True), ("A100-80GB", 1, True)),
                    [mig(i, "1g.10gb") for i in range(5)] + [mig(9, "1g.10gb")], RIGID)
    for i in range(4):
        sim.start(i, [0])
    assert masks(sim) == {0: 0b11, 1: 0b1100, 2: 0b11_0000, 3: 0b1100_0000}
    assert refusal(sim, 4, 0) is RefusalReason.MIG_GEOMETRY
    sim.start(9, [1])  # on the A100-80GB a 1g.10gb is one slice
    assert masks(sim)[9] == 0b1
    assert sim.view.gpu_free_mem_mib.tolist() == [0, 80 * 1024 - 10 * 1024]


def test_7g_needs_an_empty_gpu():
    sim = Simulator(TWO, [mig(1, "1g.5gb"), mig(2, "7g.40gb"), mig(3, "7g.40gb")], RIGID)
    sim.start(1, [0])
    assert refusal(sim, 2, 0) is RefusalReason.MIG_GEOMETRY
    sim.start(2, [1])
    assert masks(sim)[2] == 0b1111_1111 and not sim.view.gpu_whole_free[1] and sim.view.gpu_free_milli[1] == 0
    # a 7g is a whole GPU: the rules place it like a whole-GPU job, on an entirely free GPU only
    assert all(PLACEMENT_RULES[rule](sim.view, sim.view.pending[3]) is None for rule in PLACEMENT_RULES)


def test_a_3g_waits_when_only_scattered_1g_slices_are_free_and_fragmentation_counts_them():
    # Seven 1g.5gb start at 0 on slices 0..6; those on 1, 3, 5 end at 10, the others at 100. From 10 to 100 slices
    # 1, 3, 5 and 7 are free: 4 slices, but no 3g.20gb position (0-3 or 4-7) is, so the pending 3g waits until 100.
    # Fragmentation (smallest pending request: the 3g): 0 until 10 (no free compute slice), then the free compute
    # slices 1, 3, 5 that no 3g position covers, 3 x 1000 // 7 = 428 milli-GPU, for 90 s: 38.52 GPU-seconds.
    # Idle while pending: 1000 - 7 x 142 = 6 milli for 10 s, 1000 - 4 x 142 = 432 milli for 90 s: 38.94 GPU-s.
    jobs = [mig(i, "1g.5gb", runtime_s=10.0 if i in (1, 3, 5) else 100.0) for i in range(7)] + [mig(7, "3g.20gb")]
    sim = Simulator(ONE, jobs, RIGID)
    for i in range(7):
        sim.start(i, [0])
    sim.wait()
    assert sim.time_s == 10 and int(sim.view.gpu_mig_used[0]) == 0b0101_0101
    assert refusal(sim, 7, 0) is RefusalReason.MIG_GEOMETRY
    assert all(PLACEMENT_RULES[rule](sim.view, sim.view.pending[7]) is None for rule in PLACEMENT_RULES)
    sim.wait()
    assert sim.time_s == 100
    sim.start(7, [0])
    assert masks(sim) == {7: 0b0000_1111}
    sim.wait()
    log = sim.log()
    assert log.fragmented_gpu_s == pytest.approx(38.52)
    assert log.idle_gpu_s_while_pending == pytest.approx(38.94)


# ---- modes and their cost --------------------------------------------------------------------------------------------
def test_mode_switches_only_on_empty_gpus_and_pay_the_reconfiguration_cost():
    # Two A100-80GB in full mode, mig_reconfig_s 30. J1 (1g.10gb) switches the empty GPU 0 to MIG mode: 100 + 30 s.
    # J2 (1g.10gb) joins it in MIG mode: no cost, 100 s. An ordinary fractional job cannot share GPU 0 (GPU_MODE),
    # a whole-GPU one neither (GPU_BUSY); J4 (0.5 GPU) runs on GPU 1 in full mode, so a MIG job cannot take GPU 1
    # (full mode, not empty). When both slices are gone (t=130), J5 (whole GPU) switches GPU 0 back: 10 + 30 s.
    c = cluster(("A100-80GB", 2, False), reconfig_s=30.0)
    jobs = [mig(1, "1g.10gb"), mig(2, "1g.10gb"), Job(3, 0, 10, 10, gpu_milli=500), Job(4, 0, 200, 200, gpu_milli=500),
            Job(5, 0, 10, 10), mig(6, "1g.10gb")]
    sim = Simulator(c, jobs, RIGID)
    sim.start(1, [0])
    sim.start(2, [0])
    assert sim.view.gpu_mig_mode.tolist() == [True, False]
    assert refusal(sim, 3, 0) is RefusalReason.GPU_MODE
    assert refusal(sim, 5, 0) is RefusalReason.GPU_BUSY
    sim.start(4, [1])
    assert refusal(sim, 6, 1) is RefusalReason.MIG_GEOMETRY
    sim.wait()  # t=100: J2 ends; J1 still reconfigures + runs until 130
    assert sim.time_s == 100 and refusal(sim, 5, 0) is RefusalReason.GPU_BUSY
    sim.wait()
    assert sim.time_s == 130 and sim.view.gpu_whole_free[0]
    sim.start(5, [0])
    assert sim.view.gpu_mig_mode.tolist() == [False, False]
    sim.start(3, [1])  # GPU 1 is in full mode: no cost
    while not sim.done:
        if 6 in sim.view.pending and sim.view.gpu_whole_free[0]:
            sim.start(6, [0])  # back to MIG mode: 100 + 30
        sim.wait()
    times = {r.job.job_id: (r.start_time_s, r.finish_time_s) for r in sim.log().records}
    assert times == {1: (0, 130), 2: (0, 100), 3: (130, 140), 4: (0, 200), 5: (130, 170), 6: (170, 300)}
    assert sim.mig_reconfig_paid_s == {1: 30.0, 5: 30.0, 6: 30.0}


def test_initial_mode_comes_from_the_preset_and_mig_mode_gpus_host_slices_for_free():
    c = cluster(("A100-40GB", 1, True), ("A100-40GB", 1, False), reconfig_s=5.0)
    assert c.mig_reconfig_s == 5.0
    log = simulate(c, [mig(1, "3g.20gb"), Job(2, 0, 10, 10), mig(3, "3g.20gb", submit_s=1.0)], make("fcfs"), RIGID)
    # J1 on GPU 0 (MIG mode): 100 s; J2 (whole GPU) on GPU 1 (full mode): 10 s; J3 first-fit on GPU 0 beside J1.
    times = {r.job.job_id: (r.start_time_s, r.finish_time_s, r.gpus) for r in log.records}
    assert times == {1: (0, 100, (0,)), 2: (0, 10, (1,)), 3: (1, 101, (0,))}


def test_mig_on_a_type_without_mig_is_a_configuration_error():
    with pytest.raises(Exception, match="not MIG-capable"):
        cluster(("V100", 2, True))


# ---- names and rejection ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["3g.20gb", "nvidia.com/mig-3g.20gb", "MIG 3g.20gb", " 3G.20GB ", "mig-3g.20gb"])
def test_profile_name_forms_are_normalized(name):
    job = Job(1, 0, 1, 1, mig_profile=name)
    assert job.mig_profile == "3g.20gb" and job.gpu_milli == share_milli(3) == 428 and job.is_mig


@pytest.mark.parametrize("bad", [{"mig_profile": "3g"}, {"mig_profile": "nvidia.com/gpu"},
                                 {"mig_profile": "3g.20gb", "n_gpus": 2},
                                 {"mig_profile": "3g.20gb", "gpu_milli": 500}])
def test_malformed_mig_jobs_are_spec_errors(bad):
    with pytest.raises(JobSpecError):
        Job(1, 0, 1, 1, **bad)


def test_a_profile_no_eligible_type_offers_is_rejected_at_submission():
    # 1g.5gb exists only on A100-40GB; 2g.40gb nowhere; a MIG job on V100 has no MIG at all; 1g.10gb on both parts.
    c = cluster(("A100-80GB", 1, False), ("V100", 1, False))
    jobs = [mig(1, "1g.5gb"), mig(2, "2g.40gb"), Job(3, 0, 1, 1, mig_profile="1g.10gb", gpu_types=frozenset({"V100"})),
            mig(4, "1g.10gb", runtime_s=1.0)]
    log = simulate(c, jobs, make("fcfs"), RIGID)
    states = {r.job.job_id: (r.state, r.reject_reason) for r in log.records}
    rejected = (JobState.REJECTED, RejectReason.MIG_PROFILE)
    assert states == {1: rejected, 2: rejected, 3: rejected, 4: (JobState.COMPLETED, None)}


# ---- placement rules -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("first", "expected"), [
    # GPU 0 holds a 4g (slices 0-3): 4 free; GPU 1 is empty.
    ("4g.20gb", {"firstfit": 0, "pack": 0, "spread": 1, "topology": 0, "locality": 0, "fragmentation": 0}),
    # GPU 0 holds a 1g on slice 0: 7 free. Pack takes it (7 < 8 free); fragmentation too: a 1g on slice 1 removes
    # 1 possible instance there (the 1g at 1) against 6 on the empty GPU 1.
    ("1g.5gb", {"firstfit": 0, "pack": 0, "spread": 1, "topology": 0, "locality": 0, "fragmentation": 0}),
])
def test_each_rule_places_a_mig_job_on_the_gpu_its_rule_says(first, expected):
    for rule, gpu in expected.items():
        sim = Simulator(TWO, [mig(1, first), mig(2, "1g.5gb")], RIGID)
        sim.start(1, [0])
        assert int(PLACEMENT_RULES[rule](sim.view, sim.view.pending[2])[0]) == gpu, rule


def test_fragmentation_keeps_geometry_where_pack_fills_the_fullest_gpu():
    # GPU 0 holds a 1g on slice 0 (7 free), GPU 1 a 4g on 0-3 (4 free). A 1g.5gb: pack takes GPU 1 (fewest free
    # slices). Fragmentation counts the (profile, position) instances still possible: GPU 0 goes from 12 to 11
    # (loses the 1g at 1), GPU 1 from 7 to 3 (the 1g at 4, the 1g.10gb at 4, the 2g at 4, the 3g at 4): GPU 0.
    sim = Simulator(TWO, [mig(1, "1g.5gb"), mig(2, "4g.20gb"), mig(3, "1g.5gb")], RIGID)
    sim.start(1, [0])
    sim.start(2, [1])
    job = sim.view.pending[3]
    assert int(PLACEMENT_RULES["pack"](sim.view, job)[0]) == 1
    assert int(PLACEMENT_RULES["fragmentation"](sim.view, job)[0]) == 0


def test_rules_prefer_a_gpu_already_in_mig_mode_among_equally_free_ones():
    c = cluster(("A100-40GB", 1, False), ("A100-40GB", 1, True))
    sim = Simulator(c, [mig(1, "1g.5gb")], RIGID)
    job = sim.view.pending[1]
    assert {rule: int(PLACEMENT_RULES[rule](sim.view, job)[0]) for rule in PLACEMENT_RULES} == {
        "firstfit": 0, "pack": 1, "spread": 1, "topology": 1, "locality": 1, "fragmentation": 1}


# ---- property: random MIG workloads ----------------------------------------------------------------------------------
PROFILES = ["1g.5gb", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb", "1g.20gb", "2g.20gb", "3g.40gb"]


@st.composite
def mig_clusters(draw):
    groups = [{"name": "m", "count": draw(st.integers(1, 2)), "gpu_type": "A100-40GB", "gpus": draw(st.sampled_from(
        [1, 2])), "mig": draw(st.booleans())}]
    if draw(st.booleans()):
        groups.append({"name": "h", "count": 1, "gpu_type": draw(st.sampled_from(["A100-80GB", "H100"])),
                       "gpus": draw(st.sampled_from([1, 2])), "mig": draw(st.booleans())})
    return cluster_from_dict({"name": "mig", "mig_reconfig_s": draw(st.sampled_from([0.0, 7.0])),
                              "node_groups": groups})


@st.composite
def mig_workloads(draw) -> list[Job]:
    out = []
    for job_id in range(draw(st.integers(2, 18))):
        kind = draw(st.sampled_from(["mig", "mig", "mig", "fractional", "whole"]))
        runtime = float(draw(st.sampled_from([1, 5, 20, 60])))
        common = {"job_id": job_id, "submit_time_s": float(draw(st.integers(0, 30))), "runtime_s": runtime,
                  "runtime_estimate_s": runtime * draw(st.sampled_from([1.0, 2.0])),
                  "preemptible": draw(st.booleans()), "priority": draw(st.integers(0, 2))}
        if kind == "mig":
            out.append(Job(**common, mig_profile=draw(st.sampled_from(PROFILES))))
        elif kind == "fractional":
            out.append(Job(**common, gpu_milli=draw(st.sampled_from([250, 500])),
                           gpu_mem_gib=draw(st.sampled_from([0.0, 20.0]))))
        else:
            out.append(Job(**common, n_gpus=draw(st.integers(1, 2))))
    return out


MIG_POLICIES = [f"fcfs+{b}/{r}" for b in ("none", "easy", "conservative") for r in PLACEMENT_RULES] + [
    "sjf+greedy/fragmentation", "priority+easy/pack+preempt", "tiresias/pack", "k8s:mostallocated"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cluster=mig_clusters(), jobs=mig_workloads(), policy=st.sampled_from(MIG_POLICIES))
def test_every_policy_keeps_mig_geometry_valid_at_every_decision(cluster, jobs, policy):
    # every held slice at a valid position, no overlap, modes consistent, memory exact, every job ends once
    assert run_checked(cluster, jobs, policy) == []


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cluster=mig_clusters(), jobs=mig_workloads(), seed=st.integers(0, 2**16))
def test_random_valid_and_invalid_mig_actions_keep_every_invariant(cluster, jobs, seed):
    assert drive(cluster, jobs, seed)[1] == []


def test_a_conservative_reservation_never_mixes_modes_on_one_gpu():
    # Found by the property above. Two A100-40GB in full mode, no reconfiguration cost: at t=0 seven 1g.5gb take GPU 0
    # and 3g, 1g.10gb, 1g.5gb take GPU 1; at t=1 a 0.25 GPU job takes GPU 0 in full mode until 2 and the 7g job all
    # of GPU 1. Conservative backfilling holds job 13 (1g.5gb) on GPU 0 from t=2. Job 12 (1g.5gb, 2 s requested) must
    # not start on GPU 0 at t=1: over [1, 3) GPU 0 is shared in full mode, then holds a slice. It starts at 2.
    cluster = cluster_from_dict({"name": "two", "mig_reconfig_s": 0,
                                 "node_groups": [{"name": "m", "count": 1, "gpu_type": "A100-40GB", "gpus": 2}]})
    profiles = ["1g.5gb"] * 7 + ["3g.20gb", "1g.10gb", "", "7g.40gb", "1g.5gb", "1g.5gb", "1g.5gb"]
    jobs = [Job(i, 0.0, 1.0, 2.0 if i == 12 else 1.0, gpu_milli=250 if i == 9 else 1000, mig_profile=p)
            for i, p in enumerate(profiles)]
    assert run_checked(cluster, jobs, "fcfs+conservative/firstfit") == []
    starts = {r.job.job_id: r.start_time_s for r in simulate(cluster, jobs, make("fcfs+conservative/firstfit"),
                                                              RuntimeConfig.rigid()).records}
    assert starts[9] == 1 and starts[10] == 1 and starts[12] == 2


@pytest.mark.parametrize("policy", ["priority+easy/pack+preempt", "k8s:mostallocated+preempt"])
def test_preemption_puts_reprieved_mig_victims_back_on_their_own_slices(policy):
    # On the mig workload (seed 1) a preemptor's candidate victims include MIG instances; reprieving them one by one
    # in importance order must put each back where it runs, not at the lowest free position (which another reprieved
    # instance may have taken: "no valid position of 4g.20gb is free on GPU 6" before the fix).
    world = scenario("mig", "mig-a100", seed=1)
    log = simulate(world.cluster, world.workload, make(policy), world.runtime)
    assert summarize(log)["preemptions"] > 0
    assert sorted(r.job.job_id for r in log.records) == sorted(j.job_id for j in world.workload.jobs)
