"""Hand-computed Tiresias (discretized 2D-LAS) and YARN-CS schedules on the ``tiny`` cluster (rigid runtime model).

tiny: node 0 = GPUs 0-3, node 1 = GPUs 4-7; placement is first-fit; the restart overhead is 60 s (DynamicsConfig's
default). Attained service = GPUs x executed time, so an n-GPU job crosses a threshold of T GPU-seconds T/n seconds
of holding GPUs after it last entered the top queue. Every expected time is worked out in the comment beside it.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from baselines import make
from baselines.tiresias import (
    DEFAULT_MIN_RUN_S,
    DEFAULT_STARVE_FACTOR,
    DEFAULT_THRESHOLDS_GPU_S,
    TIRESIAS_DOCS,
    Tiresias,
    YarnCs,
    tiresias_policy,
)
from envs.core import ConfigError, Job, JobState, RuntimeConfig
from envs.core.dynamics import DynamicsConfig
from envs.placement import pack
from envs.scenario import load_cluster
from envs.sim import Preempt, Simulator, Start, simulate
from envs.sim.checks import log_violations, state_violations

RIGID = RuntimeConfig.rigid()
MAX_STEPS = 10_000  # far more actions than any workload here needs: more means a livelock


@pytest.fixture(scope="module")
def tiny():
    return load_cluster("tiny")


def drive(cluster, jobs, policy, dynamics: DynamicsConfig | None = None, check_state: bool = False):
    """Run ``policy`` as :func:`envs.sim.simulate` does; return the simulator and the (time, kind, job id) of every
    start ("start") and preemption ("preempt")."""
    sim = Simulator(cluster, jobs, RIGID, dynamics or DynamicsConfig())
    policy.reset()
    events = []
    for _ in range(MAX_STEPS):
        if sim.done:
            return sim, events
        action = policy.act(sim.view)
        if isinstance(action, Start):
            events.append((sim.time_s, "start", action.job_id))
            sim.start(action.job_id, action.gpus)
        elif isinstance(action, Preempt):
            events.append((sim.time_s, "preempt", action.job_id))
            sim.preempt(action.job_id)
        else:
            sim.wait(action.until_s)
        if check_state:
            assert state_violations(sim) == []
    raise AssertionError(f"no end after {MAX_STEPS} actions")


def records(sim):
    return {r.job.job_id: r for r in sim.log().records}


def test_a_job_demoted_at_its_threshold_is_preempted_for_a_newer_job_and_restarts_from_its_checkpoint(tiny):
    # Default thresholds (3250, 7200) GPU-s. J1 (8 GPUs, 3000 s, preemptible, checkpoint every 100 s) starts at 0 in
    # queue 0. J2 (1 GPU, 100 s) arrives at 300: J1 (8 x 300 = 2400 GPU-s) is in queue 0 too, so J2 waits. J1 reaches
    # 3250 GPU-s at 3250 / 8 = 406.25 s: demoted, then preempted at once for J2, which starts on GPU 0.
    # J1 computed 406.25 s: keeps 400 (the checkpoint), loses 6.25 s x 8 = 50 GPU-s. J2 ends at 506.25; J1 restarts
    # then (it is not restarted at 406.25: 7 GPUs free) and needs 60 s + 2600 s: it ends at 3166.25.
    jobs = [Job(1, 0, 3000, 3000, n_gpus=8, preemptible=True, checkpoint_interval_s=100), Job(2, 300, 100, 100)]
    sim, events = drive(tiny, jobs, Tiresias())
    assert events == [(0, "start", 1), (406.25, "preempt", 1), (406.25, "start", 2), (506.25, "start", 1)]
    r = records(sim)
    assert (r[2].start_time_s, r[2].finish_time_s, r[2].gpus) == (406.25, 506.25, (0,))
    assert (r[1].state, r[1].start_time_s, r[1].finish_time_s) == (JobState.COMPLETED, 0, 3166.25)
    i = r[1].interruptions
    assert (i.preemptions, i.lost_preemption_gpu_s, i.overhead_gpu_s, i.held_s) == (1, 50, 8 * 60, 406.25 + 2660)
    assert log_violations(sim, jobs) == []


STARVING = [Job(1, 0, 200, 200, n_gpus=8, preemptible=True, checkpoint_interval_s=10),
            Job(2, 10, 400, 400, n_gpus=8, preemptible=True)]
"""Two jobs that each need the whole cluster, for the starvation and same-queue cases (threshold 800 GPU-s)."""


def test_the_starvation_guard_promotes_a_waiting_job_at_first_start_plus_three_times_its_run(tiny):
    # One threshold, 800 GPU-s (= 100 s on 8 GPUs); starve_factor 2. J1 starts at 0 and is demoted at 100; J2 (queue
    # 0, waiting since 10) preempts it at 100. J1 computed 100 s: the checkpoint at 100 is kept, nothing lost. J2 is
    # demoted at 200 (J1's queue now: no preemption). J1 ran 100 s from its first start at 0, then waited: promoted
    # at 0 + (1 + 2) x 100 = 300, it is in queue 0 again and preempts J2 (queue 1) at 300; J2 loses its 200 s (no
    # checkpoint) = 1600 GPU-s. J1 needs 60 s + 100 s: ends at 460 (demoted again at 300 + 100 = 400, beside J2 in
    # queue 1). J2 restarts at 460: 60 s + 400 s -> 920 (its own limit, 100 + 3 x 200 = 700, comes after that).
    sim, events = drive(tiny, STARVING, Tiresias(thresholds_gpu_s=(800,), starve_factor=2))
    assert events == [(0, "start", 1), (100, "preempt", 1), (100, "start", 2), (300, "preempt", 2),
                      (300, "start", 1), (460, "start", 2)]
    r = records(sim)
    assert (r[1].finish_time_s, r[1].interruptions.lost_preemption_gpu_s) == (460, 0)
    assert (r[2].finish_time_s, r[2].interruptions.lost_preemption_gpu_s) == (920, 1600)
    assert log_violations(sim, STARVING) == []


def test_jobs_of_the_same_queue_never_preempt_each_other(tiny):
    # As above without the guard. J2 arrives at 10 while J1 is in queue 0: it waits until J1 is demoted at 100. J2
    # is demoted at 200; J1 entered queue 1 earlier (100) but J2 runs, and a running job is ahead of its queue's
    # waiting ones: J2 runs its 400 s to 500 uninterrupted. J1 restarts then: 60 s + 100 s -> 660.
    sim, events = drive(tiny, STARVING, Tiresias(thresholds_gpu_s=(800,), starve_factor=math.inf))
    assert events == [(0, "start", 1), (100, "preempt", 1), (100, "start", 2), (500, "start", 1)]
    r = records(sim)
    assert (r[2].finish_time_s, r[2].interruptions) == (500, None)
    assert r[1].finish_time_s == 660


def test_a_job_yields_only_after_min_run_s_doubled_for_each_preemption_it_suffered(tiny):
    # One threshold, 80 GPU-s (10 s on 8 GPUs); no guard; min_run_s 60. J1 (8 GPUs, 1000 s, checkpoint every 10 s) is
    # demoted at 10, but J2 (queue 0, waiting since 5) may preempt it only at 0 + 60 = 60 (kept 60 s). J2 runs
    # 60 -> 80; J1 restarts at 80. J3 arrives at 100: J1, preempted once, is protected for 2 x 60 s, until 200 (its
    # run: 60 s restart + 60 s kept). J3 runs 200 -> 220; J1 restarts: 60 s + 880 s -> 1160.
    jobs = [Job(1, 0, 1000, 1000, n_gpus=8, preemptible=True, checkpoint_interval_s=10),
            Job(2, 5, 20, 20, n_gpus=8), Job(3, 100, 20, 20, n_gpus=8)]
    sim, events = drive(tiny, jobs, Tiresias(thresholds_gpu_s=(80,), starve_factor=math.inf))
    assert events == [(0, "start", 1), (60, "preempt", 1), (60, "start", 2), (80, "start", 1), (200, "preempt", 1),
                      (200, "start", 3), (220, "start", 1)]
    i = records(sim)[1].interruptions
    assert (records(sim)[1].finish_time_s, i.preemptions, i.lost_preemption_gpu_s) == (1160, 2, 0)


THRASHING = [Job(i, 10 * i, 300, 300, n_gpus=8, preemptible=True) for i in range(3)]
"""Three jobs that each need the whole cluster, no checkpoints: with a 500 GPU-s threshold each gets 62.5 s."""


def test_without_the_progress_guard_promotions_livelock(tiny):
    # Each job is promoted, runs 62.5 s (60 s restart + 2.5 s, all lost) and is preempted by the next promoted one.
    with pytest.raises(AssertionError, match="no end"):
        drive(tiny, THRASHING, Tiresias(thresholds_gpu_s=(500,), min_run_s=0))


def test_the_progress_guard_ends_every_job(tiny):
    # A job needs 300 s + 60 s uninterrupted; after 3 preemptions its runs are protected for 8 x 60 = 480 s > 360 s.
    sim, _ = drive(tiny, THRASHING, Tiresias(thresholds_gpu_s=(500,)))
    assert all(r.state is JobState.COMPLETED for r in sim.log().records)
    assert max(r.interruptions.preemptions for r in sim.log().records) <= 3
    assert log_violations(sim, THRASHING) == []


def test_a_queue_is_fifo_by_the_time_jobs_entered_it_not_by_submit_time(tiny):
    # One threshold, 100 GPU-s; no guard. A (1 GPU, 1000 s) starts at 0 on GPU 0, B (4 GPUs, 400 s) at 20 on GPUs
    # 4-7. B enters queue 1 at 20 + 100 / 4 = 45, A at 0 + 100 / 1 = 100 (nobody waits then, so no decision marks
    # it). C (8 GPUs, 10 s) arrives at 200 and preempts both (A loses 200 GPU-s, B 180 x 4 = 720). D (4 GPUs, 1000 s,
    # queue 0) arrives at 205 and waits for C (same queue). At 210 C ends: D takes GPUs 0-3, then queue 1 in entry
    # order: B (45) before A (100) takes GPUs 4-7; A no longer fits. (By submit time A would have taken GPU 4 and
    # blocked B.) B: 210 + 60 + 400 = 670; A restarts then on GPU 4: 670 + 60 + 1000 = 1730; D ends at 1210.
    jobs = [Job(1, 0, 1000, 1000, preemptible=True), Job(2, 20, 400, 400, n_gpus=4, preemptible=True),
            Job(3, 200, 10, 10, n_gpus=8), Job(4, 205, 1000, 1000, n_gpus=4)]
    sim, events = drive(tiny, jobs, Tiresias(thresholds_gpu_s=(100,), starve_factor=math.inf))
    assert events == [(0, "start", 1), (20, "start", 2), (200, "preempt", 2), (200, "preempt", 1), (200, "start", 3),
                      (210, "start", 4), (210, "start", 2), (670, "start", 1)]
    r = records(sim)
    assert [(r[j].finish_time_s, r[j].gpus) for j in (1, 2, 3, 4)] == [
        (1730, (4,)), (670, (4, 5, 6, 7)), (210, tuple(range(8))), (1210, (0, 1, 2, 3))]
    assert (r[1].interruptions.lost_preemption_gpu_s, r[2].interruptions.lost_preemption_gpu_s) == (200, 720)
    assert log_violations(sim, jobs) == []


def test_only_the_least_important_jobs_needed_are_preempted(tiny):
    # Thresholds 100 and 1000 GPU-s (three queues); no guard. A (4 GPUs, 1000 s) runs on node 0 from 0: queue 1 at
    # 25, queue 2 at 250. B (4 GPUs, 1000 s) runs on node 1 from 100: queue 1 at 125, queue 2 at 350. C (1 GPU, 50 s)
    # arrives at 300: A (queue 2) is less important than B (queue 1), and preempting A alone makes room: B keeps
    # running. C runs on GPU 0 to 350; A (4 GPUs, node 0 has 3 free until then) restarts at 350: 60 + 1000 -> 1410.
    jobs = [Job(1, 0, 1000, 1000, n_gpus=4, preemptible=True), Job(2, 100, 1000, 1000, n_gpus=4, preemptible=True),
            Job(3, 300, 50, 50)]
    sim, events = drive(tiny, jobs, Tiresias(thresholds_gpu_s=(100, 1000), starve_factor=math.inf))
    assert events == [(0, "start", 1), (100, "start", 2), (300, "preempt", 1), (300, "start", 3), (350, "start", 1)]
    r = records(sim)
    assert (r[1].finish_time_s, r[2].finish_time_s, r[2].interruptions, r[3].gpus) == (1410, 1100, None, (0,))


BLOCKED_HEAD = [Job(1, 0, 1000, 1000, n_gpus=4), Job(2, 10, 100, 100, n_gpus=8), Job(3, 20, 50, 50)]
"""J2 needs the whole cluster while J1 holds node 0; J3 would fit beside J1."""


def test_tiresias_starts_what_fits_and_never_preempts_a_job_that_is_not_preemptible(tiny):
    # Default thresholds. J2 (8 GPUs) waits behind J1; J3 (1 GPU) fits beside it and starts at 20 on GPU 4 (fit-
    # first), ends at 70. J1 is demoted at 3250 / 4 = 812.5 s, but it is not preemptible: J2 waits for its end at
    # 1000 and runs to 1100.
    sim, events = drive(tiny, BLOCKED_HEAD, Tiresias())
    assert events == [(0, "start", 1), (20, "start", 3), (1000, "start", 2)]
    r = records(sim)
    assert [(r[j].start_time_s, r[j].finish_time_s) for j in (1, 2, 3)] == [(0, 1000), (1000, 1100), (20, 70)]


def test_yarn_cs_blocks_behind_its_head_and_never_preempts(tiny):
    # The same jobs with J1 preemptible: YARN-CS keeps one FIFO queue, so J2 blocks J3 and nobody is preempted. J1
    # 0 -> 1000, J2 1000 -> 1100, J3 1100 -> 1150 on GPU 0.
    jobs = [Job(1, 0, 1000, 1000, n_gpus=4, preemptible=True), *BLOCKED_HEAD[1:]]
    sim, events = drive(tiny, jobs, YarnCs())
    assert events == [(0, "start", 1), (1000, "start", 2), (1100, "start", 3)]
    r = records(sim)
    assert [(r[j].start_time_s, r[j].finish_time_s) for j in (1, 2, 3)] == [(0, 1000), (1000, 1100), (1100, 1150)]
    assert r[3].gpus == (0,)


def random_jobs(seed: int, n: int = 14) -> list[Job]:
    """A small mixed workload: 1-8 GPUs or half a GPU, mostly preemptible, some checkpointing, bursty arrivals."""
    rng = np.random.default_rng(seed)
    submit = np.cumsum(rng.exponential(40.0, n)).round(1)
    jobs = []
    for i in range(n):
        runtime = float(rng.integers(10, 600))
        fractional = rng.random() < 0.2
        jobs.append(Job(i, float(submit[i]), runtime, runtime, n_gpus=1 if fractional else int(rng.choice(
            [1, 1, 2, 3, 4, 5, 8])), gpu_milli=500 if fractional else 1000, preemptible=bool(rng.random() < 0.7),
            checkpoint_interval_s=float(rng.choice([0, 25, 100]))))
    return jobs


POLICIES = {
    "defaults": lambda: Tiresias(),
    "small-thresholds": lambda: Tiresias(thresholds_gpu_s=(50, 400), starve_factor=1),
    "pack-eager-guard": lambda: Tiresias(pack, thresholds_gpu_s=(100,), starve_factor=0.5),
    "yarn-cs": lambda: YarnCs(),
}


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("seed", range(12))
def test_random_workloads_complete_with_every_invariant(tiny, policy, seed):
    jobs = random_jobs(seed)
    sim, events = drive(tiny, jobs, POLICIES[policy](), check_state=True)
    assert log_violations(sim, jobs) == []
    assert all(r.state is JobState.COMPLETED for r in sim.log().records)
    preempted = {(t, job_id) for t, kind, job_id in events if kind == "preempt"}
    assert not [e for e in events if e[1] == "start" and (e[0], e[2]) in preempted]  # no restart at the same instant


@pytest.mark.parametrize("seed", range(6))
def test_random_failures_keep_every_invariant(tiny, seed):
    # Failures interrupt jobs while nobody waits: the policy then places them by the crossings of their last run.
    config = DynamicsConfig.from_dict({"failures": {"node_mtbf_s": 1500, "mttr_s": 200}, "max_failures": 1000},
                                      name="test")
    jobs = random_jobs(100 + seed)
    sim, _ = drive(tiny, jobs, Tiresias(thresholds_gpu_s=(50, 400), starve_factor=1), config, check_state=True)
    assert log_violations(sim, jobs) == []
    assert all(r.state is JobState.COMPLETED for r in sim.log().records)


@pytest.mark.parametrize("seed", range(8))
def test_yarn_cs_is_the_fifo_schedule(tiny, seed):
    jobs = random_jobs(200 + seed)
    assert simulate(tiny, jobs, YarnCs(), RIGID) == simulate(tiny, jobs, make("fifo"), RIGID)


def test_the_factory_names_its_policies_and_refuses_unknown_ones():
    assert set(TIRESIAS_DOCS) == {"tiresias", "yarn-cs"}
    assert (DEFAULT_THRESHOLDS_GPU_S, DEFAULT_STARVE_FACTOR, DEFAULT_MIN_RUN_S) == ((3250, 7200), 2, 60)
    policy = tiresias_policy("Tiresias", "firstfit")
    assert isinstance(policy, Tiresias) and policy.name == "tiresias"
    assert policy.thresholds_gpu_s == DEFAULT_THRESHOLDS_GPU_S and not policy.blocking
    baseline = tiresias_policy("yarn-cs", "pack")
    assert isinstance(baseline, YarnCs) and baseline.name == "yarn-cs/pack" and baseline.rule is pack
    with pytest.raises(ConfigError, match="known: tiresias, yarn-cs"):
        tiresias_policy("las", "firstfit")
    with pytest.raises(ConfigError, match="placement rule 'nowhere'"):
        tiresias_policy("tiresias", "nowhere")


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"thresholds_gpu_s": (7200, 3250)}, "strictly increasing"),
    ({"thresholds_gpu_s": (0,)}, "> 0"),
    ({"thresholds_gpu_s": (100, math.inf)}, "finite"),
    ({"starve_factor": 0}, "starve_factor: must be > 0"),
    ({"starve_factor": math.nan}, "starve_factor: must be > 0"),
    ({"min_run_s": -1}, "min_run_s: must be finite and >= 0"),
])
def test_bad_parameters_are_named(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        Tiresias(**kwargs)
