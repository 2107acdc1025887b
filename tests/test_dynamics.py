"""Hand-computed failures, repairs, outages and preemptions on the ``tiny`` cluster (rigid runtime model).

tiny: node 0 = GPUs 0-3, node 1 = GPUs 4-7. The policy is FIFO + first-fit unless a test says otherwise; the
restart overhead is 60 s. Every expected time is worked out in the comment beside it.
"""

from __future__ import annotations

import math
import re

import pytest

from baselines import FifoFirstFit
from envs.core import ActionRefused, ConfigError, Job, JobState, RefusalReason, RuntimeConfig, summarize
from envs.core.dynamics import DynamicsConfig, load_dynamics
from envs.scenario import load_cluster
from envs.sim import Simulator, View, simulate
from envs.sim.checks import log_violations

RIGID = RuntimeConfig.rigid()


@pytest.fixture(scope="module")
def tiny():
    return load_cluster("tiny")


def dynamics(**data) -> DynamicsConfig:
    return DynamicsConfig.from_dict(data, name="test")


def failures(*schedule: dict, **rest) -> DynamicsConfig:
    return dynamics(failures={"schedule": list(schedule)}, **rest)


def run(cluster, jobs, config: DynamicsConfig, policy=None):
    log = simulate(cluster, jobs, policy or FifoFirstFit(), RIGID, config)
    assert len(log.records) == len(jobs)
    return log, {r.job.job_id: r for r in log.records}


def test_node_failure_rolls_back_to_the_last_checkpoint_and_restarts_elsewhere(tiny):
    # J1 (2 GPUs, 1000 s, checkpoint every 300 s) starts at 0 on GPUs 0,1. Node 0 fails at 500: 500 s computed, the
    # checkpoint at 300 s is kept, 200 s are lost (x 2 GPUs = 400 GPU-s). Requeued at 500, it restarts at once on
    # node 1 (GPUs 4,5): 60 s overhead + 700 s of work left -> finishes at 1260.
    jobs = [Job(1, 0, 1000, 2000, n_gpus=2, checkpoint_interval_s=300)]
    log, r = run(tiny, jobs, failures({"node": 0, "fail_s": 500, "repair_s": 3600}))
    assert (r[1].state, r[1].start_time_s, r[1].finish_time_s) == (JobState.COMPLETED, 0, 1260)
    assert r[1].gpus == (4, 5) and r[1].restarts == 1
    i = r[1].interruptions
    assert (i.failures, i.preemptions, i.held_s) == (1, 0, 1260)
    assert (i.lost_failure_gpu_s, i.overhead_gpu_s) == (400, 120)
    m = summarize(log)
    assert m["lost_gpu_hours"] == pytest.approx(400 / 3600)
    assert m["restart_overhead_gpu_hours"] == pytest.approx(120 / 3600)
    assert (m["restarts"], m["failure_interruptions"], m["preemptions"], m["n_failed"]) == (1, 1, 0, 0)
    assert m["failed_gpu_hours"] == pytest.approx(4 * (1260 - 500) / 3600)  # node 0 down from 500 until the end
    assert m["mean_jct_s"] == 1260 and m["mean_wait_s"] == 0


def test_node_failure_without_checkpoint_loses_everything(tiny):
    # No checkpoint: all 500 s are lost (1000 GPU-s); the restart redoes the whole 1000 s after 60 s: 500 + 1060.
    _, r = run(tiny, [Job(1, 0, 1000, 2000, n_gpus=2)], failures({"node": 0, "fail_s": 500, "repair_s": 3600}))
    assert (r[1].start_time_s, r[1].finish_time_s) == (0, 1560)
    assert r[1].interruptions.lost_failure_gpu_s == 1000


def test_gpu_failure_interrupts_both_fractional_jobs_sharing_it(tiny):
    # J1, J2 (half a GPU each, 400 s) share GPU 0; J3 (1 GPU, 1000 s) takes GPU 1. GPU 0 fails at 100: J1 and J2
    # lose 100 s each and go back to the queue; first-fit puts both on GPU 2 (GPU 0 failed, GPU 1 busy):
    # 100 + 60 + 400 = 560. J3 never notices: 0 -> 1000.
    jobs = [Job(1, 0, 400, 800, gpu_milli=500), Job(2, 0, 400, 800, gpu_milli=500), Job(3, 0, 1000, 1000)]
    _, r = run(tiny, jobs, failures({"node": 0, "gpu": 0, "fail_s": 100, "repair_s": 5000}))
    for job_id in (1, 2):
        assert (r[job_id].start_time_s, r[job_id].finish_time_s, r[job_id].gpus) == (0, 560, (2,))
        assert r[job_id].interruptions.lost_failure_gpu_s == pytest.approx(0.5 * 100)
    assert (r[3].finish_time_s, r[3].gpus, r[3].interruptions) == (1000, (1,), None)


def test_a_job_past_the_retry_limit_ends_failed(tiny):
    # max_failures 1. J1 (1 GPU, 1000 s) starts on GPU 0; node 0 fails at 100 (lost 100 s), J1 restarts on GPU 4 at
    # 100; node 1 fails at 200: its second failure is past the limit, so J1 ends FAILED at 200 after 40 s of work
    # (lost 100 + 40 = 140 GPU-s, overhead 60 GPU-s).
    config = failures({"node": 0, "fail_s": 100, "repair_s": 10_000}, {"node": 1, "fail_s": 200, "repair_s": 10_000},
                      max_failures=1)
    log, r = run(tiny, [Job(1, 0, 1000, 2000)], config)
    assert (r[1].state, r[1].start_time_s, r[1].finish_time_s) == (JobState.FAILED, 0, 200)
    assert (r[1].interruptions.failures, r[1].interruptions.lost_failure_gpu_s, r[1].interruptions.overhead_gpu_s) \
        == (2, 140, 60)
    m = summarize(log)
    assert (m["n_failed"], m["n_completed"], m["n_rejected"], m["restarts"]) == (1, 0, 0, 1)
    assert m["goodput"] == 0 and m["utilization"] == pytest.approx(200 / (8 * 200))


def test_a_failed_jobs_checkpointed_work_is_lost_with_it(tiny):
    # As above with checkpoints every 50 s: run 1 keeps 100 s, run 2 (from 100) computes 40 s < 50 s and keeps none.
    # FAILED: the kept 100 s are lost too, so lost = 200 - 60 overhead = 140 GPU-s, the same as without checkpoints.
    config = failures({"node": 0, "fail_s": 100, "repair_s": 10_000}, {"node": 1, "fail_s": 200, "repair_s": 10_000},
                      max_failures=1)
    _, r = run(tiny, [Job(1, 0, 1000, 2000, checkpoint_interval_s=50)], config)
    assert r[1].state is JobState.FAILED and r[1].interruptions.lost_failure_gpu_s == 140


class Recorder:
    """FIFO + first-fit that notes the time of every decision it is asked for."""

    def __init__(self) -> None:
        self.inner, self.name, self.asked = FifoFirstFit(), "recorder", []

    def reset(self) -> None:
        self.inner.reset()
        self.asked.clear()

    def act(self, view: View):
        self.asked.append(view.time_s)
        return self.inner.act(view)


def test_a_30_minute_outage_delays_every_start_inside_it_and_no_completion(tiny):
    # The scheduler is down from 100 to 1900. J1 (4 GPUs, 500 s) started at 0 completes at 500 as planned; J2
    # (arrives 200) and J3 (arrives 1000) wait for the recovery and both start at 1900; no decision in between.
    jobs = [Job(1, 0, 500, 500, n_gpus=4), Job(2, 200, 100, 100), Job(3, 1000, 100, 100, n_gpus=2)]
    policy = Recorder()
    log, r = run(tiny, jobs, dynamics(outages={"windows": [[100, 1800]]}), policy)
    assert (r[1].start_time_s, r[1].finish_time_s) == (0, 500)
    assert (r[2].start_time_s, r[3].start_time_s) == (1900, 1900)
    assert not [t for t in policy.asked if 100 < t < 1900] and 1900 in policy.asked
    m = summarize(log)
    assert (m["scheduler_downtime_s"], m["outage_waiting_jobs"]) == (1800, 2)
    assert m["mean_wait_s"] == pytest.approx((0 + 1700 + 900) / 3)


def test_a_failure_during_an_outage_requeues_and_restarts_at_recovery(tiny):
    # Outage 100..1000; node 0 fails at 200 under J1 (1 GPU, 1000 s, no checkpoint): J1 waits in the queue until
    # the scheduler is back at 1000, restarts on GPU 4: 1000 + 60 + 1000 = 2060.
    config = dynamics(failures={"schedule": [{"node": 0, "fail_s": 200, "repair_s": 5000}]},
                      outages={"windows": [[100, 900]]})
    log, r = run(tiny, [Job(1, 0, 1000, 2000)], config)
    assert (r[1].finish_time_s, r[1].gpus) == (2060, (4,))
    assert summarize(log)["outage_waiting_jobs"] == 1


def test_preempt_requeues_with_rollback_and_refuses_what_it_may_not(tiny):
    # J1 (preemptible, 1 GPU, 1000 s, checkpoint every 100 s) starts at 0 on GPU 0; J2 (not preemptible) on GPU 1.
    # Preempted at 250 (J3's arrival): keeps 200 s, loses 50 GPU-s. Restarted at once: 250 + 60 + 800 = 1110.
    jobs = [Job(1, 0, 1000, 2000, preemptible=True, checkpoint_interval_s=100), Job(2, 0, 1000, 2000),
            Job(3, 250, 10, 10)]
    sim = Simulator(tiny, jobs, RIGID)
    sim.start(1, [0])
    sim.start(2, [1])
    sim.wait()
    assert sim.time_s == 250
    with pytest.raises(ActionRefused) as refused:
        sim.preempt(2)
    assert refused.value.reason is RefusalReason.NOT_PREEMPTIBLE
    with pytest.raises(ActionRefused) as refused:
        sim.preempt(3)
    assert refused.value.reason is RefusalReason.NOT_RUNNING
    with pytest.raises(ActionRefused) as refused:
        sim.preempt(99)
    assert refused.value.reason is RefusalReason.UNKNOWN_JOB
    sim.preempt(1)
    assert list(sim.view.pending) == [1, 3]  # back at its place: submit 0 before submit 250
    assert sim.view.gpu_free_milli[0] == 1000 and sim.view.executed_s(1) == 250
    sim.start(1, [0])
    sim.start(3, [2])
    while not sim.done:
        sim.wait()
    r = {rec.job.job_id: rec for rec in sim.log().records}
    assert (r[1].start_time_s, r[1].finish_time_s) == (0, 1110)
    assert (r[1].interruptions.preemptions, r[1].interruptions.lost_preemption_gpu_s) == (1, 50)
    assert log_violations(sim, jobs) == []


def test_no_dynamics_is_the_static_simulation(tiny):
    jobs = [Job(i, 10 * i, 100 + i, 200, n_gpus=1 + i % 3) for i in range(20)]
    static = simulate(tiny, jobs, FifoFirstFit(), RIGID)
    assert simulate(tiny, jobs, FifoFirstFit(), RIGID, load_dynamics("none")) == static


def test_random_failures_depend_on_the_seed_only(tiny):
    # The failure timeline is the same whatever the policy does: two policies see failures at the same instants.
    config = dynamics(failures={"node_mtbf_s": 2000, "mttr_s": 500})
    jobs = [Job(i, 50 * i, 300, 600, n_gpus=1 + i % 4, checkpoint_interval_s=100) for i in range(40)]

    def failure_times(policy_name: str) -> list[float]:
        from baselines import make

        sim = Simulator(tiny, jobs, RIGID, config)
        policy = make(policy_name)
        policy.reset()
        seen = []
        while not sim.done:
            before = sim.view.down_gpus
            action = policy.act(sim.view)
            if hasattr(action, "gpus"):
                sim.start(action.job_id, action.gpus)
            else:
                sim.wait()
            if sim.view.down_gpus > before:
                seen.append(sim.time_s)
        return seen

    fifo, sjf = failure_times("fifo"), failure_times("sjf+easy")
    shared = min(len(fifo), len(sjf))
    assert shared > 3 and fifo[:shared] == sjf[:shared]


@pytest.mark.parametrize(("data", "message"), [
    ({"failures": {"node_mtbf_s": -1}}, "failures.node_mtbf_s: must be in [60, 1e+10] s or .inf, got -1"),
    ({"failures": {"repair": "never"}}, "failures.repair: input should be 'exponential' or 'fixed', got 'never'"),
    ({"failures": {"schedule": [{"node": 0, "fail_s": 1}]}}, "failures.schedule[0].repair_s: missing"),
    ({"outages": {"windows": [[1]]}}, "outages.windows[0][1]: missing"),
    ({"max_failures": -1}, "max_failures: input should be greater than or equal to 0, got -1"),
    ({"failure": {}}, "failure: unknown key (allowed: failures, outages, restart_overhead_s, max_failures, "
                      "governance)"),
    ({"failures": [1, 2]}, "failures: input should be a valid dictionary, got [1, 2]"),
    ({"outages": "abc"}, "outages: input should be a valid dictionary, got 'abc'"),
    ({"failures": {"schedule": 5}}, "failures.schedule: input should be a valid list, got 5"),
    ({"failures": {"node_mtbf_s": {"A100": 5}}}, "failures.node_mtbf_s.A100: must be in [60, 1e+10] s"),
    ({"restart_overhead_s": True}, "restart_overhead_s: input should be a valid number, got True"),
])
def test_bad_scenarios_are_named(data, message):
    with pytest.raises(ConfigError, match=re.escape(f"scenario 'bad': {message}")):
        DynamicsConfig.from_dict(data, name="bad")


def test_a_scheduled_failure_on_a_missing_node_is_named(tiny):
    with pytest.raises(ConfigError, match=r"failures.schedule\[0\].node: 5 is not a node of tiny"):
        Simulator(tiny, [Job(1, 0, 10, 10)], RIGID, failures({"node": 5, "fail_s": 1, "repair_s": 1}))


def test_waiting_until_a_time_makes_it_a_decision_point(tiny):
    sim = Simulator(tiny, [Job(1, 0, 10, 10, n_gpus=8), Job(2, 0, 10, 10)], RIGID)
    sim.start(1, list(range(8)))
    sim.wait(until_s=4.0)
    assert sim.time_s == 4.0 and list(sim.view.pending) == [2]
    sim.wait()
    assert sim.time_s == 10 and not math.isnan(sim.log().records[0].finish_time_s)
