"""Quotas by hand on ``tiny`` (8 GPUs: node 0 = GPUs 0-3 A100, node 1 = GPUs 4-7 V100), rigid runtimes.

Hard limits (Slurm GrpTRES) refuse a start above the cap, so a job waits with GPUs free; Kueue-style queues borrow
a cohort's unused nominal quota and give it back by preemption when the lender needs it.
"""

from __future__ import annotations

import dataclasses

import pytest

from baselines import make
from envs.core import ActionRefused, Job, JobState, RefusalReason, RejectReason, RuntimeConfig, summarize
from envs.core.errors import ConfigError
from envs.core.governance import governance_from_dict
from envs.scenario import load_cluster
from envs.sim import Simulator, simulate

RIGID = RuntimeConfig.rigid()


def with_quotas(quotas: dict, partitions: list | None = None):
    tiny = load_cluster("tiny")
    data = {"quotas": quotas} | ({"partitions": partitions} if partitions else {})
    return dataclasses.replace(tiny, governance=governance_from_dict(data, tuple(n.name for n in tiny.nodes), "test"))


def records(cluster, jobs, policy="fcfs"):
    log = simulate(cluster, jobs, make(policy), RIGID)
    assert sorted(r.job.job_id for r in log.records) == sorted(j.job_id for j in jobs)  # each ends exactly once
    return {r.job.job_id: r for r in log.records}, log


def test_team_at_its_hard_cap_waits_while_gpus_are_free_and_starts_when_its_own_job_ends():
    # Team a may hold 2 GPUs. J1 (a, 2 GPUs, 100 s) starts at 0; J2 (a, 1 GPU) would make 3: refused, skipped (not
    # blocking: FIFO goes on), so J3 (team b, 1 GPU) starts at 0 on GPU 2 while GPUs 3-7 stay free. J2 starts at
    # 100 when J1 ends, on GPU 0.
    cluster = with_quotas({"limits": {"teams": {"a": 2}}})
    jobs = [Job(1, 0, 100, 100, n_gpus=2, team="a"), Job(2, 0, 50, 50, team="a"), Job(3, 0, 10, 10, team="b")]
    r, log = records(cluster, jobs)
    assert (r[1].start_time_s, r[2].start_time_s, r[3].start_time_s) == (0, 100, 0)
    assert r[3].gpus == (2,) and r[2].gpus == (0,)
    assert summarize(log)["quota_violations"] == 0


def test_user_limit_refuses_the_start_with_a_typed_reason_and_view_admits_says_so():
    cluster = with_quotas({"limits": {"users": {"alice": 1}}})
    sim = Simulator(cluster, [Job(1, 0, 100, 100, user="alice"), Job(2, 0, 100, 100, user="alice")], RIGID)
    sim.start(1, [0])
    job2 = sim.view.pending[2]
    assert not sim.view.admits(job2)
    with pytest.raises(ActionRefused) as info:
        sim.start(2, [1])
    assert info.value.reason is RefusalReason.QUOTA and "alice" in str(info.value)


def test_a_job_larger_than_its_cap_is_rejected_at_submission_not_left_waiting():
    cluster = with_quotas({"limits": {"teams": {"a": 2}}})
    r, _ = records(cluster, [Job(1, 0, 10, 10, n_gpus=4, team="a"), Job(2, 0, 10, 10, team="a")])
    assert r[1].state is JobState.REJECTED and r[1].reject_reason is RejectReason.QUOTA
    assert r[2].state is JobState.COMPLETED


def test_kueue_queue_borrows_idle_quota_and_is_reclaimed_when_the_lender_job_arrives():
    # Queues a (nominal 1) and b (nominal 3) in cohort c: cohort quota 4 of the 8 GPUs. Team a runs J1 (start 0),
    # J2 and J3 (start 5; J3 has priority 1): a holds 3, borrowing 2 of b's idle quota. At t=10 b's J4 (2 GPUs)
    # arrives: within b's nominal (0 + 2 <= 3), but the cohort has 4 - 3 = 1 GPU of quota left. Reclaim: a's
    # running jobs by priority ascending, then latest start, then highest id: J2 (prio 0, start 5), J1 (prio 0,
    # start 0), J3 (prio 1). Taking J2 frees 1: the cohort then has 2 left, enough; J1 and J3 keep running.
    # J4 starts at 10; J2 goes back to the queue and waits: a's J2 would borrow (a holds 2 > nominal 1 after it)
    # and the cohort is full (a 2 + b 2 = 4) until J4 ends at 110, when J2 restarts (60 s restart overhead + 100 s).
    cluster = with_quotas({"queues": {"a": {"nominal_gpus": 1, "cohort": "c"},
                                      "b": {"nominal_gpus": 3, "cohort": "c"}}})
    jobs = [Job(1, 0, 1000, 1000, team="a"), Job(2, 5, 100, 100, team="a"), Job(3, 5, 1000, 1000, team="a", priority=1),
            Job(4, 10, 100, 100, n_gpus=2, team="b")]
    r, log = records(cluster, jobs)
    assert r[2].interruptions is not None and r[2].interruptions.preemptions == 1
    assert r[1].interruptions is None and r[3].interruptions is None
    assert (r[4].start_time_s, r[4].finish_time_s) == (10, 110)
    assert r[2].finish_time_s == 110 + 60 + 100
    m = summarize(log)
    assert (m["reclaims"], m["reclaimed_gpus"], m["quota_violations"]) == (1, 1.0, 0)
    assert m["reclaimed_gpu_hours"] == m["lost_preemption_gpu_hours"] == pytest.approx(5 / 3600)  # J2 ran 5 s
    # borrowed: a held 3 over [5, 10] (2 above nominal), then 2 over [10, 110] and 3 over [110, 270] until J2 ends,
    # then 2 until J1 ends at 1000 and J3 at 1005 (1 above nominal until 1000, 0 after)
    assert m["borrowed_gpu_hours"] == pytest.approx((2 * 5 + 1 * 100 + 2 * 160 + 1 * 730) / 3600)


def test_kueue_borrowing_limit_and_lone_queue():
    # a: nominal 1, borrowing limit 1, cohort c with b (nominal 4): a may hold 2, never 3, even with b idle.
    cluster = with_quotas({"queues": {"a": {"nominal_gpus": 1, "borrowing_limit_gpus": 1, "cohort": "c"},
                                      "b": {"nominal_gpus": 4, "cohort": "c"}, "solo": {"nominal_gpus": 1}}})
    r, _ = records(cluster, [Job(i, 0, 100, 100, team="a") for i in (1, 2, 3)]
                   + [Job(4, 0, 10, 10, team="solo"), Job(5, 0, 10, 10, team="solo")])
    assert sorted(r[i].start_time_s for i in (1, 2, 3)) == [0, 0, 100]
    assert sorted(r[i].start_time_s for i in (4, 5)) == [0, 10]  # a lone queue cannot borrow


def test_quota_config_errors_name_the_key():
    with pytest.raises(ConfigError, match=r"quotas.queues.a.nominal_gpus: missing"):
        with_quotas({"queues": {"a": {"cohort": "c"}}})
    with pytest.raises(ConfigError, match=r"quotas.limits.teams.a: must be a number >= 0"):
        with_quotas({"limits": {"teams": {"a": -1}}})
    with pytest.raises(ConfigError, match=r"quotas.shares: unknown key"):
        with_quotas({"shares": {}})


def test_env_masks_a_start_its_quota_refuses_and_shows_the_headroom():
    # tiny-governed: team2 may hold 2 GPUs. Two 2-GPU jobs of team2 at t=0: after the first starts, the second is
    # refused by its quota although 6 GPUs are free, so no Start is legal and the env moves on to t=100, when the
    # first ends; the headroom column reads 2 of 8 GPUs at both decision points (0 is never shown: no choice then).
    from envs.gymenv import GPUClusterEnv
    from envs.workload.table import Workload

    env = GPUClusterEnv(cluster="tiny-governed", workload="small", slots=4, placement_rules=["pack", "spread"])
    jobs = (Job(1, 0, 100, 100, n_gpus=2, team="team2"), Job(2, 0, 100, 100, n_gpus=2, team="team2"))
    obs, _ = env.reset(seed=0, options={"workload": Workload("w", jobs)})
    assert obs["jobs"].shape == (4, 13)
    assert obs["jobs"][0, 12] == obs["jobs"][1, 12] == 2 / 8
    mask = env.action_masks()
    assert mask[0] and mask[2]  # slot 0 and slot 1 (rule pack) may start
    assert env.view.admits(jobs[1])
    obs, *_ = env.step(0)
    assert env.view.time_s == 100 and [j.job_id for j in env.visible_jobs] == [2]
    assert env.action_masks()[0] and obs["jobs"][0, 12] == 2 / 8
