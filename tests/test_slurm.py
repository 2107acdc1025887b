"""The slurm policy's rules, each on a schedule computed by hand (one node of 8 GPUs unless said; rigid runtimes,
runtime = requested time unless said), and its slurm: section. A submission queues a scheduling pass 1 s later
(sbatch never starts a job at once), which considers every job pending by then: jobs submitted at 0, 1, 2 and 3 are
first considered at 1, 1, 3 and 3, so a job submitted at 0 on a free node starts at 1."""

from __future__ import annotations

import math

import pytest

from baselines.registry import make
from baselines.slurm import slurm_policy, slurm_policy_params
from baselines.slurm_conf import SlurmConf, slurm_conf_from_dict, slurm_minutes
from envs.core.dynamics import DynamicsConfig
from envs.core.errors import ConfigError
from envs.core.job import Job
from envs.core.presets import cluster_from_dict
from envs.core.runtime import RuntimeConfig
from envs.sim.loop import simulate

RERUN = DynamicsConfig(restart_overhead_s=0.0)  # a requeued batch script reruns from the start, with no overhead
FAST = {"SchedulerParameters": "bf_interval=1,bf_resolution=1"}


def node(gpus: int = 8, partitions: list | None = None):
    data = {"name": "one", "node_groups": [{"name": "n", "count": 1, "gpu_type": "A100-80GB", "gpus": gpus}]}
    if partitions:
        data["partitions"] = partitions
    return cluster_from_dict(data)


def job(job_id: int, submit: float, gpus: int, limit: float, run: float | None = None, **kw) -> Job:
    return Job(job_id, submit, limit if run is None else run, limit, n_gpus=gpus, **kw)


def starts(jobs, slurm=None, cluster=None, name="slurm", epoch_s=0.0) -> dict[int, float]:
    policy = slurm_policy(name, FAST if slurm is None else slurm, epoch_s=epoch_s)
    log = simulate(cluster or node(), jobs, policy, RuntimeConfig.rigid(), RERUN)
    return {r.job.job_id: r.finish_time_s - r.job.runtime_s for r in log.records}


def test_main_scheduler_is_fifo_until_the_first_job_that_does_not_fit():
    # sched/builtin: job 3 (1 GPU) fits at t=3 but waits behind job 2, which waits for job 1's end at 101.
    jobs = [job(1, 0, 6, 100), job(2, 1, 4, 50), job(3, 2, 1, 10)]
    assert starts(jobs, {"SchedulerType": "sched/builtin"}) == {1: 1, 2: 101, 3: 101}


def test_a_reservation_holds_its_whole_node():
    # Job 1 runs 1-101. Job 2 (2 GPUs) is reserved at 101 for [101, 201), taking the whole node then. Job 3 (1 GPU,
    # 200 s) fits now on the free GPU, and EASY starts it at 2 (job 2 still fits at 100 on job 1's 7 GPUs), but
    # Slurm's plan has the node taken during [101, 201): job 3 waits, and the main scheduler starts it at 101 after
    # job 2. Job 4 (1 GPU, 30 s; considered at 3 with job 3) ends at 33, before the reservation: backfilled at 3.
    jobs = [job(1, 0, 7, 100), job(2, 1, 2, 100), job(3, 2, 1, 200, run=50), job(4, 3, 1, 30, run=20)]
    assert starts(jobs) == {1: 1, 2: 101, 3: 101, 4: 3}
    easy = simulate(node(), jobs, make("fcfs+easy"), RuntimeConfig.rigid())
    assert {r.job.job_id: r.start_time_s for r in easy.records}[3] == 2


def test_a_job_ending_exactly_at_a_reservation_is_not_backfilled():
    # All four are considered at 1. Job 1 (7 GPUs, 3 min) runs 1-181 and job 2 (8 GPUs) is reserved from 181. Job 3
    # (1 GPU, 3 min) would end at 1 + 180 = 181: `begin_time <= end_time` blocks it, and it starts after job 2
    # (181-241). Job 4 (1 GPU, 2 min) ends at 121: backfilled at 1.
    jobs = [job(1, 0, 7, 180), job(2, 0.2, 8, 60), job(3, 0.5, 1, 180), job(4, 0.6, 1, 120)]
    assert starts(jobs) == {1: 1, 2: 181, 3: 241, 4: 1}


def test_the_will_run_test_takes_running_jobs_away_in_30_s_batches():
    # Job 1 (4 GPUs, 2 min) runs from 1 (expected end 121), job 2 (2 GPUs, 2 min) from 51 (end 171); 2 GPUs free.
    # Job 3 (6 GPUs, considered at 61) fits once job 1 ends, at 121. But the will-run test's first batch holds every
    # job ending by B + 30, B being the first end rounded up to a multiple of 30 s of the wall clock. With the
    # simulated time 0 at Unix time 0, B = 150: job 2's end (171) is in the batch too, and job 3's reservation starts
    # at the batch's last end, 171. Job 4 (1 GPU, 1 min, considered at 101) ends at 161 < 171: backfilled at 101
    # (EASY would not: job 3 must start at 121 there). Job 3 then starts at 161, when job 4 ends.
    jobs = [job(1, 0, 4, 120), job(2, 50, 2, 120), job(3, 60, 6, 60), job(4, 100, 1, 60)]
    assert starts(jobs) == {1: 1, 2: 51, 3: 161, 4: 101}
    easy = simulate(node(), jobs, make("fcfs+easy"), RuntimeConfig.rigid())
    assert {r.job.job_id: r.start_time_s for r in easy.records}[4] > 100
    # With time 0 at Unix time 15, job 1's end is wall 136: B = 150 - 15 = 135 in simulated time, B + 30 = 165 <
    # 171, so the first batch holds job 1 alone and job 3 is reserved at 121; job 4 would delay it and waits for
    # the GPUs job 2 frees at 171, job 3 starting at 121.
    assert starts(jobs, epoch_s=15) == {1: 1, 2: 51, 3: 121, 4: 171}


def test_backfill_runs_only_at_its_cycle():
    # bf_interval=30: at 1 (the pass of jobs 1 and 2) the main scheduler starts job 1 and a backfill cycle reserves
    # job 2; the next cycle is due at 31. Job 3 (1 GPU) could be backfilled at its pass, 6 (it ends before job 2's
    # reservation at 101), but only the main scheduler runs then, and it stops at job 2: job 3 waits for the cycle.
    jobs = [job(1, 0, 7, 100), job(2, 1, 8, 50), job(3, 5, 1, 20)]
    got = starts(jobs, {"SchedulerParameters": "bf_interval=30,bf_resolution=1"})
    assert got[3] == 31


def test_bf_max_job_test_limits_the_jobs_a_cycle_considers():
    # Jobs 2 and 3 are blocked; job 4 is backfilled at its pass (3), but with bf_max_job_test=2 the cycle stops
    # before it, and it runs after job 3 (1-101, 101-151, 151-201).
    jobs = [job(1, 0, 7, 100), job(2, 1, 8, 50), job(3, 2, 8, 50), job(4, 3, 1, 20)]
    assert starts(jobs)[4] == 3
    assert starts(jobs, {"SchedulerParameters": "bf_interval=1,bf_resolution=1,bf_max_job_test=2"})[4] == 201


def test_no_reservation_beyond_bf_window():
    # bf_window=1 (minute): job 2's start at 101 lies beyond now + 60 s, so it gets no reservation and job 3 (1 GPU,
    # 500 s) is backfilled at 3; job 2 then waits for job 3 too (starts at 503).
    jobs = [job(1, 0, 7, 100), job(2, 1, 8, 50), job(3, 2, 1, 500)]
    assert starts(jobs, {"SchedulerParameters": "bf_interval=1,bf_resolution=1,bf_window=1"}) == {1: 1, 2: 503, 3: 3}
    assert starts(jobs)[3] == 151  # with the default window job 2's reservation holds the node until 151


def test_a_blocked_partition_withholds_its_nodes_from_the_main_scheduler():
    # Partitions a and b share the node. Job 2 (partition a) does not fit: the main scheduler withholds the node
    # for the rest of its pass, so job 3 (partition b, 1 GPU, fits on the free GPU) is not started by it:
    # sched/builtin starts it only after job 2 (8 GPUs, 101-151). With backfill it starts at 4 (it ends before job
    # 2's reservation).
    cluster = node(partitions=[{"name": "a", "groups": ["n"], "default": True}, {"name": "b", "groups": ["n"]}])
    jobs = [job(1, 0, 7, 100, partition="a"), job(2, 1, 8, 50, partition="a"), job(3, 3, 1, 20, partition="b")]
    assert starts(jobs, {"SchedulerType": "sched/builtin"}, cluster) == {1: 1, 2: 101, 3: 151}
    assert starts(jobs, cluster=cluster)[3] == 4


def test_higher_priority_tiers_go_first():
    cluster = node(partitions=[{"name": "low", "groups": ["n"], "default": True},
                               {"name": "high", "groups": ["n"], "priority_tier": 5}])
    jobs = [job(1, 0, 8, 100), job(2, 1, 8, 50, partition="low"), job(3, 2, 8, 50, partition="high")]
    assert starts(jobs, cluster=cluster) == {1: 1, 3: 101, 2: 151}


def test_multifactor_priority_by_hand():
    # w_age 1000, max age 10 min, w_fairshare 10000 over accounts x and y (one user u in each: associations u@x,
    # u@y); recalculated every minute (at 60, 120, ...). Job 1 (x) runs 1-121 on all 8 GPUs. Job 2 (x) and job 3
    # (y) are submitted at 1 and 2; x has usage and y none, so y's user ranks above x's: job 3 starts at 121, before
    # job 2 (181). Fair Tree also ranks root@root (Slurm's root user, no usage), which comes first.
    slurm = {**FAST, "PriorityType": "priority/multifactor", "PriorityWeightAge": 1000, "PriorityMaxAge": 10,
             "PriorityWeightFairshare": 10000, "PriorityCalcPeriod": 1,
             "Accounts": {"x": {"Fairshare": 1}, "y": {"Fairshare": 1}}}
    jobs = [job(1, 0, 8, 120, user="u@x", team="x"), job(2, 1, 8, 60, user="u@x", team="x"),
            job(3, 2, 8, 60, user="u@y", team="y")]
    assert starts(jobs, slurm) == {1: 1, 3: 121, 2: 181}
    policy = slurm_policy("slurm", slurm)
    simulate(node(), jobs, policy, RuntimeConfig.rigid())
    # Job 2's priority from the last recalculation before its start, at 180: age (180 - 1) / 600 x 1000 = 298.33;
    # usage x 8 x 120 = 960 GPU-s, y 8 x 59 = 472; under root, x, y and the user root@root have 1 share each:
    # Level Fairshare x (1/3) / (960 / 1432) = 0.50, y (1/3) / (472 / 1432) = 1.01, root@root infinite (no usage),
    # so u@x ranks third of three users: 1/3 x 10000. Priority int(298.33 + 3333.33) = 3631.
    assert policy._priority[2] == 3631


def test_qos_preemption_requeues_and_holds_the_victims():
    # Job 1 (QOS low, 8 GPUs, 300 s) runs from 1. Job 2 (QOS high, may preempt low) preempts at its submission, 10:
    # job 1 is requeued and job 2 runs 10-70. Job 1 may start again 121 s after its requeue (131), but that is no
    # event: the main scheduler's next periodic pass (sched_interval 60 s: at 180) starts it, and it reruns from the
    # start until 480.
    slurm = {**FAST, "PriorityType": "priority/multifactor", "PriorityWeightQOS": 10000, "PreemptType": "preempt/qos",
             "PreemptMode": "REQUEUE", "QOS": {"low": {"Priority": 0}, "high": {"Priority": 100, "Preempt": ["low"]}}}
    jobs = [job(1, 0, 8, 300, qos="low", preemptible=True), job(2, 10, 8, 60, qos="high")]
    policy = slurm_policy("slurm", slurm)
    log = simulate(node(), jobs, policy, RuntimeConfig.rigid(), RERUN)
    by_id = {r.job.job_id: r for r in log.records}
    assert by_id[2].start_time_s == 10
    assert by_id[1].start_time_s == 1 and by_id[1].finish_time_s == 180 + 300
    assert by_id[1].interruptions.preemptions == 1
    # A job end after the hold is an event: with job 3 (high, 8 GPUs, 140-160), job 1 restarts at 160.
    jobs = [*jobs, job(3, 140, 8, 20, qos="high")]
    log = simulate(node(), jobs, slurm_policy("slurm", slurm), RuntimeConfig.rigid(), RERUN)
    assert {r.job.job_id: r.finish_time_s for r in log.records}[1] == 160 + 300


def test_the_family_is_in_the_registry_and_takes_a_placement():
    assert make("slurm").name == "slurm"
    assert make("slurm/pack", slurm=FAST).name == "slurm/pack"
    with pytest.raises(ConfigError, match="unknown placement"):
        make("slurm/nowhere")


def test_defaults_are_slurms():
    conf = slurm_conf_from_dict({})
    assert conf == SlurmConf()
    assert (conf.bf_interval_s, conf.bf_resolution_s, conf.bf_window_s, conf.bf_max_job_test) == (30, 60, 86400, 500)
    assert (conf.priority_type, conf.scheduler_type, conf.calc_period_s) == ("priority/basic", "sched/backfill", 300)
    assert conf.max_age_s == conf.half_life_s == 7 * 86400


def test_section_parsing_and_conf_lines():
    conf = slurm_conf_from_dict({"SchedulerParameters": {"bf_interval": 2, "bf_window": 10},
                                 "PriorityType": "priority/multifactor", "PriorityMaxAge": "1-0",
                                 "PriorityWeightAge": 5, "PreemptType": "preempt/qos", "PreemptMode": "requeue"})
    assert (conf.bf_interval_s, conf.bf_window_s, conf.max_age_s, conf.w_age) == (2, 600, 86400, 5)
    lines = conf.lines()
    assert "SchedulerParameters=bf_interval=2,bf_resolution=60,bf_window=10,bf_max_job_test=500,sched_interval=60," \
           "default_queue_depth=100" in lines
    assert "PriorityMaxAge=1440" in lines and "PreemptMode=REQUEUE" in lines
    assert slurm_conf_from_dict(dict(line.split("=", 1) for line in lines[:3])).bf_window_s == 600


@pytest.mark.parametrize("section, message", [
    ({"SchedulerType": "sched/fifo"}, "SchedulerType: must be one of"),
    ({"SchedulerParameters": "bf_interval=0"}, "bf_interval: must be an integer >= 1"),
    ({"SchedulerParameters": "bf_magic=3"}, "unknown option 'bf_magic'"),
    ({"SchedulerParameters": "bf_interval"}, "expected OPTION=VALUE"),
    ({"PriorityMaxAge": "7-x"}, "PriorityMaxAge: must be a Slurm time"),
    ({"PreemptType": "preempt/qos"}, "needs PreemptMode REQUEUE"),
    ({"Bogus": 1}, "Bogus"),
    ({"QOS": {"high": {"Preempt": ["nobody"]}}}, "unknown QOS nobody"),
    ({"QOS": {"high": {"Priority": "top"}}}, "QOS.high.Priority: input should be a valid integer, got .top."),
    ({"Accounts": {"a": {"Parent": "zz"}}}, "parent: unknown account"),
])
def test_bad_sections_say_what_and_where(section, message):
    with pytest.raises(ConfigError, match=message):
        slurm_policy_params(section, "policy.yaml: slurm")


@pytest.mark.parametrize("text, minutes", [("5", 5), ("5:30", 5.5), ("1:02:03", 62.05), ("2-3", 2 * 1440 + 180),
                                           ("1-0:10", 1450), ("1-00:00:30", 1440.5), ("UNLIMITED", math.inf), (7, 7)])
def test_slurm_time_strings(text, minutes):
    assert slurm_minutes(text, "t") == pytest.approx(minutes)


def test_a_submission_pass_takes_every_job_pending_by_then():
    # Job 1 (tier 0) is submitted at 0 and job 2 (tier 5) at 0.5; both want the whole node. The pass queued by job
    # 1's submission runs at 1 and sees both: job 2 goes first (higher tier), job 1 after it (151).
    cluster = node(partitions=[{"name": "low", "groups": ["n"], "default": True},
                               {"name": "high", "groups": ["n"], "priority_tier": 5}])
    jobs = [job(1, 0, 8, 100, partition="low"), job(2, 0.5, 8, 150, partition="high")]
    assert starts(jobs, cluster=cluster) == {2: 1, 1: 151}


def test_a_user_unknown_at_the_last_recalculation_gets_no_fair_share():
    # Passes at 5, 65, ... (calc_origin_s=5). Jobs 1 and 2 (user u@x) are submitted at 0 and first seen at 1: no
    # pass has run, so their fair-share factor is 0 and their priority int(0) -> 1 (Slurm's floor); the pass at 5
    # ranks u@x (usage from 1) after root@root (Slurm's root user, no usage): 2nd of 2, 5000 for job 2, pending.
    slurm = {**FAST, "PriorityType": "priority/multifactor", "PriorityWeightFairshare": 10000,
             "PriorityCalcPeriod": 1}
    policy = slurm_policy("slurm", slurm, calc_origin_s=5.0)
    jobs = [job(1, 0, 8, 100, user="u@x", team="x"), job(2, 0, 8, 100, user="u@x", team="x")]
    seen = []

    class Spy:
        name = "spy"

        def reset(self):
            policy.reset()

        def act(self, view):
            action = policy.act(view)
            seen.append((view.time_s, dict(policy._priority)))
            return action

    simulate(node(), jobs, Spy(), RuntimeConfig.rigid(), RERUN)
    assert next(p for t, p in seen if t >= 1) == {1: 1, 2: 1}
    assert next(p for t, p in seen if t >= 5)[2] == 5000


def test_time_limits_are_whole_minutes():
    # Job 1 asks for 61 s: Slurm holds 2 minutes, so job 2 (8 GPUs) is reserved at 1 + 120 = 121, and job 3 (1 GPU,
    # 1 min, considered at 3) is backfilled: it ends at 63 < 121 (with the raw 61 s it could not: 63 > 62). Job 1
    # really ends at 31; job 2 then waits for job 3's GPU until 63.
    jobs = [job(1, 0, 7, 61, run=30), job(2, 1, 8, 50), job(3, 2, 1, 60)]
    assert starts(jobs) == {1: 1, 2: 63, 3: 3}


def test_a_job_held_by_a_quota_blocks_nothing():
    # Team x may hold 2 GPUs (GrpTRES): job 2 (x, 2 GPUs) waits for job 1 (x) although 6 GPUs are free, and is
    # skipped without blocking its partition: job 3 (team y) starts at once by the main scheduler (sched/builtin).
    cluster = cluster_from_dict({"name": "q", "node_groups": [{"name": "n", "count": 1, "gpu_type": "A100-80GB",
                                                               "gpus": 8}],
                                 "quotas": {"limits": {"teams": {"x": 2}}}})
    jobs = [job(1, 0, 2, 100, team="x"), job(2, 0, 2, 50, team="x"), job(3, 0, 4, 50, team="y")]
    assert starts(jobs, {"SchedulerType": "sched/builtin"}, cluster) == {1: 1, 3: 1, 2: 101}


def test_backfill_counts_the_gpu_memory_of_jobs_it_starts_in_the_same_cycle():
    # Three GPUs of 80 GiB. Job 1 holds GPU 0 (1-101, limit 2 min); job 2 (3 GPUs) waits for it and blocks the main
    # scheduler. Jobs 3 and 4 ask for half a GPU and 48 GiB each: both fit GPU 1 by share, not by memory. The pass
    # at 1 (which sees every job pending by then) starts job 1, and backfill jobs 3 and 4 in one cycle: job 3 on GPU
    # 1, job 4 on GPU 2. A cycle that did not count job 3's memory planned job 4 on GPU 1 too, and the simulator
    # refused that start (GPU_MEMORY: GPU 1 has 32,768 MiB free, the job needs 49,152).
    half = {"gpu_milli": 500, "gpu_mem_gib": 48.0}
    jobs = [job(1, 0, 1, 120, run=100), job(2, 0.5, 3, 60, run=10), job(3, 1, 1, 60, run=30, **half),
            job(4, 1, 1, 60, run=30, **half)]
    policy = slurm_policy("slurm", FAST)
    log = simulate(node(3), jobs, policy, RuntimeConfig.rigid(), RERUN)
    assert {r.job.job_id: (r.start_time_s, tuple(r.gpus)) for r in log.records if r.job.job_id in (3, 4)} == {
        3: (1.0, (1,)), 4: (1.0, (2,))}


@pytest.mark.parametrize("seed", [1, 3])
def test_a_backfill_start_is_handed_out_only_while_the_quota_allows_it(seed):
    # On tiny-governed (teams with hard GPU quotas), one backfill cycle may plan two jobs of one team; once the first
    # has started, the second is over its team's quota and must wait (Slurm checks limits at each start). These
    # seeds made the simulator refuse the second start (QUOTA) before; now every job completes, but those no quota
    # could ever hold, rejected at submission.
    from envs.scenario import scenario
    from envs.workload.table import Workload

    world = scenario("small", cluster="tiny-governed", seed=seed)
    jobs = Workload.from_jobs("first-80", world.workload.jobs[:80])
    log = simulate(world.cluster, jobs, slurm_policy("slurm", FAST), world.runtime)
    assert len(log.records) == 80
    assert all(r.state.name == "COMPLETED" or r.reject_reason is not None for r in log.records)
