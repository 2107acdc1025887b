"""Forking a run (envs/sim/fork.py): a fork never touches the run it came from, keeps its true future when given
none, and runs exactly the arrivals and base runtimes a :class:`Future` gives it.

Hand-computed cases run on the ``tiny`` cluster: node 0 = GPUs 0-3, A100-40GB (speed 1.0); node 1 = GPUs 4-7, V100
(speed 0.5). A one-GPU job without a dataset runs at its GPU's speed with topology factor 1 and no staging, so under
the full runtime model its run takes runtime / speed: runtime on GPUs 0-3, twice the runtime on GPUs 4-7.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from functools import cache

import pytest

from baselines import make
from envs.core import Job, JobLog, RuntimeConfig
from envs.core.errors import ConfigError
from envs.scenario import Scenario, load_cluster, scenario
from envs.sim import Action, Policy, Simulator, View, simulate
from envs.sim.checks import log_violations, state_violations
from envs.sim.fork import Future
from envs.sim.loop import apply_action

# ---- scenario runs ---------------------------------------------------------------------------------------------------
WORLDS = {
    "small-tiny": ("small", "tiny", {"seed": 0}),  # datasets and staging, fractional jobs, no dynamics
    "small-tiny-flaky": ("small", "tiny", {"seed": 2, "dynamics": "flaky"}),  # scheduler outages on this seed
    "small-tiny-high": ("small", "tiny", {"seed": 2, "dynamics": "high"}),  # node and GPU failures on this seed
    "wholegpu-hetero64-flaky": ("whole-gpu", "hetero-64", {"seed": 0, "load": 0.5, "dynamics": "flaky"}),
    "small-tiny-governed": ("small", "tiny-governed", {"seed": 2}),  # partitions, quotas, borrowing and reclaims
    "mig-a100": ("mig", "mig-a100", {"seed": 1}),  # MIG slices and mode switches
}
"""Worlds of a few hundred to 2,000 jobs, each run taking a tenth of a second or so."""

POLICIES = {  # policy run in the original -> a different policy driving the fork
    "sjf+greedy/topology": "fcfs",
    "priority+easy/pack+preempt": "sjf+greedy/topology",
}


@cache
def world(name: str) -> Scenario:
    workload, cluster, kwargs = WORLDS[name]
    return scenario(workload, cluster, **kwargs)


@cache
def unforked(name: str, policy: str) -> tuple[JobLog, float, dict[int, float]]:
    """The log, wait integral and MIG mode-switch time paid of ``policy`` run on world ``name`` without any fork."""
    w = world(name)
    sim = Simulator(w.cluster, w.workload, w.runtime, w.dynamics)
    drive(sim, make(policy))
    return books(sim)


def books(sim: Simulator) -> tuple[JobLog, float, dict[int, float]]:
    return sim.log(), sim.pending_job_s, sim.mig_reconfig_paid_s


def simulator(name: str) -> Simulator:
    w = world(name)
    return Simulator(w.cluster, w.workload, w.runtime, w.dynamics)


MAX_ACTIONS = 100_000
"""More actions than any run here takes (the largest takes about 4,000): a fork that never ends fails, not hangs."""


def drive(sim: Simulator, policy: Policy, until_s: float = math.inf) -> None:
    """Let ``policy`` decide until the run ends or reaches a decision point at or after ``until_s`` [s]."""
    policy.reset()
    for _ in range(MAX_ACTIONS):
        if sim.done or sim.time_s >= until_s:
            return
        apply_action(sim, policy.act(sim.view))
    pytest.fail(f"the run did not end within {MAX_ACTIONS} actions")


def resume(sim: Simulator, policy: Policy) -> None:
    """Let ``policy`` (already mid-run, not reset) decide until the run ends."""
    for _ in range(MAX_ACTIONS):
        if sim.done:
            return
        apply_action(sim, policy.act(sim.view))
    pytest.fail(f"the run did not end within {MAX_ACTIONS} actions")


def wait_out(sim: Simulator) -> None:
    """Wait until the run ends (every job started by hand already, or none pending again)."""
    for _ in range(100):
        if sim.done:
            return
        sim.wait()
    pytest.fail("the run did not end within 100 waits")


def middle_s(name: str) -> float:
    """The submit time of the middle job of world ``name``: where the runs below fork."""
    jobs = world(name).workload.jobs
    return jobs[len(jobs) // 2].submit_time_s


def split(name: str, now_s: float) -> tuple[list[Job], list[Job]]:
    """The jobs of world ``name`` that have arrived by ``now_s`` (a decision point: arrivals at now are in) and the
    others."""
    jobs = world(name).workload.jobs
    return [j for j in jobs if j.submit_time_s <= now_s], [j for j in jobs if j.submit_time_s > now_s]


def replacing_future(name: str, sim: Simulator) -> Future:
    """A future unlike the true one: the first 20 unarrived jobs under new ids with twice their runtime, and every
    job pending or running now given twice its runtime plus a second."""
    later = split(name, sim.time_s)[1][:20]
    arrivals = tuple(dataclasses.replace(j, job_id=j.job_id + 1_000_000, runtime_s=2 * j.runtime_s) for j in later)
    known = [*sim.view.pending.values(), *(r.job for r in sim.view.running.values())]
    return Future(arrivals=arrivals, runtimes_s={j.job_id: 2 * j.runtime_s + 1 for j in known})


@pytest.mark.parametrize("future", ["none", "replaced"])
@pytest.mark.parametrize("policy", list(POLICIES))
@pytest.mark.parametrize("name", list(WORLDS))
def test_driving_a_fork_to_the_end_leaves_the_original_run_bit_identical(name, policy, future):
    sim, p = simulator(name), make(policy)
    drive(sim, p, until_s=middle_s(name))
    assert not sim.done and sim.view.pending  # forked at a decision point in the middle of the run
    fork = sim.fork(None if future == "none" else replacing_future(name, sim))
    drive(fork, make(POLICIES[policy]))
    assert fork.done and fork.time_s > sim.time_s
    resume(sim, p)
    # every record; busy, idle, fragmented and down GPU-seconds, downtime, outage waits, quota books; the wait
    # integral; the MIG mode-switch time paid per job
    assert books(sim) == unforked(name, policy)


def test_the_worlds_do_meet_failures_outages_and_preemptions():
    # What the parametrized runs above claim to cover, checked on the unforked runs.
    flaky = unforked("small-tiny-flaky", "sjf+greedy/topology")[0]
    assert flaky.scheduler_downtime_s > 0
    high = unforked("small-tiny-high", "sjf+greedy/topology")[0]
    assert high.down_gpu_s > 0 and any(r.interruptions and r.interruptions.failures for r in high.records)
    preempting = unforked("small-tiny", "priority+easy/pack+preempt")[0]
    assert any(r.interruptions and r.interruptions.preemptions for r in preempting.records)
    both = unforked("wholegpu-hetero64-flaky", "sjf+greedy/topology")[0]
    assert both.scheduler_downtime_s > 0 and both.down_gpu_s > 0
    governed = unforked("small-tiny-governed", "sjf+greedy/topology")[0]
    assert governed.reclaims > 0 and governed.borrowed_gpu_s > 0
    assert unforked("mig-a100", "sjf+greedy/topology")[2]  # some jobs paid a MIG mode switch


@pytest.mark.parametrize("policy", list(POLICIES))
@pytest.mark.parametrize("name", list(WORLDS))
def test_a_fork_with_the_true_future_driven_by_the_same_policy_ends_as_the_run(name, policy):
    sim, p = simulator(name), make(policy)
    drive(sim, p, until_s=middle_s(name))
    fork, twin = sim.fork(), copy.deepcopy(p)  # the same policy, in the same state
    resume(fork, twin)
    resume(sim, p)
    assert books(fork) == books(sim) == unforked(name, policy) and fork.time_s == sim.time_s


@pytest.mark.parametrize("name", ["small-tiny", "small-tiny-high", "small-tiny-governed", "mig-a100"])
def test_a_fork_is_the_run_from_its_instant_on(name):
    # Forking and driving the fork with Q is exactly switching the run itself from P to Q at that instant.
    switched, forked_from = simulator(name), simulator(name)
    drive(switched, make("priority+easy/pack+preempt"), until_s=middle_s(name))
    drive(forked_from, make("priority+easy/pack+preempt"), until_s=middle_s(name))
    fork = forked_from.fork()
    drive(switched, make("sjf+greedy/topology"))
    drive(fork, make("sjf+greedy/topology"))
    assert books(fork) == books(switched)


def test_a_fork_of_a_fork_leaves_both_untouched():
    name, policy = "small-tiny", "sjf+greedy/topology"
    sim, p = simulator(name), make(policy)
    drive(sim, p, until_s=middle_s(name))
    fork = sim.fork()
    fork_p = copy.deepcopy(p)
    for _ in range(25):  # a few decisions on, then fork again
        apply_action(fork, fork_p.act(fork.view))
    grandchild = fork.view.fork(Future())
    drive(grandchild, make("fcfs"))
    resume(fork, fork_p)
    resume(sim, p)
    assert fork.log() == sim.log() == unforked(name, policy)[0]


# ---- futures: arrivals ----------------------------------------------------------------------------------------------
def test_a_futures_arrivals_are_the_forks_only_later_arrivals():
    name = "small-tiny"
    sim = simulator(name)
    drive(sim, make("sjf+greedy/topology"), until_s=middle_s(name))
    now, left = sim.time_s, sim.view.arrivals_left
    arrived, unarrived = split(name, now)
    unarrived_ids = {j.job_id for j in unarrived}
    assert left == len(unarrived_ids) > 0
    new = [Job(1003, now + 3600, 60, 120, n_gpus=2), Job(1000, now, 60, 120), Job(1001, now + 10, 30, 60),
           Job(1002, now + 500, 90, 90, gpu_milli=500), Job(1004, now + 500, 10, 20)]  # given in no order
    fork = sim.fork(Future(arrivals=new))
    assert fork.view.arrivals_left == len(new)
    assert sim.view.arrivals_left == left  # the run keeps its own
    drive(fork, make("sjf+greedy/topology"))
    records = {r.job.job_id: r for r in fork.log().records}
    assert set(records) == {j.job_id for j in arrived} | {j.job_id for j in new}
    assert not set(records) & unarrived_ids
    for job in new:
        assert records[job.job_id].job == job and records[job.job_id].start_time_s >= job.submit_time_s
    assert log_violations(fork, [*arrived, *new]) == []


def test_an_empty_future_has_no_more_arrivals():
    name = "small-tiny"
    sim = simulator(name)
    drive(sim, make("sjf+greedy/topology"), until_s=middle_s(name))
    arrived = split(name, sim.time_s)[0]
    fork = sim.fork(Future())
    assert fork.view.arrivals_left == 0 and sim.view.arrivals_left > 0
    drive(fork, make("fcfs"))
    assert sorted(r.job.job_id for r in fork.log().records) == sorted(j.job_id for j in arrived)
    assert log_violations(fork, arrived) == []


def test_a_forks_view_counts_arrivals_left_as_they_arrive():
    # Two new arrivals at now + 100 and now + 200: 2 left at the fork, 1 after the first, none after the second.
    sim = Simulator(load_cluster("tiny"), [Job(1, 0, 1000, 1000, n_gpus=8), Job(2, 0, 10, 10), Job(3, 50, 10, 10)])
    sim.start(1, list(range(8)))
    fork = sim.fork(Future(arrivals=[Job(10, 100, 10, 10), Job(11, 200, 10, 10)]))
    assert fork.view.arrivals_left == 2 and sim.view.arrivals_left == 1
    fork.wait()
    assert fork.time_s == 100 and fork.view.arrivals_left == 1 and list(fork.view.pending) == [2, 10]
    fork.wait()
    assert fork.time_s == 200 and fork.view.arrivals_left == 0 and list(fork.view.pending) == [2, 10, 11]
    sim.wait()
    assert sim.time_s == 50 and list(sim.view.pending) == [2, 3]  # the run's own arrival, untouched


# ---- futures: runtimes, hand-computed ------------------------------------------------------------------------------
def started_at_30(runtime: RuntimeConfig | None = None) -> Simulator:
    """tiny, full runtime model unless told: J0 (10 s) on GPU 2 ends at 10; J1 (100 s) on GPU 0 (A100) ends at 100;
    J2 (100 s) on GPU 4 (V100, speed 0.5) ends at 200; J3 arrives at 30 (pending there), J4 at 500. At t=30."""
    jobs = [Job(0, 0, 10, 1000), Job(1, 0, 100, 1000), Job(2, 0, 100, 1000), Job(3, 30, 100, 1000),
            Job(4, 500, 10, 1000)]
    sim = Simulator(load_cluster("tiny"), jobs, runtime)
    sim.start(0, [2])
    sim.start(1, [0])
    sim.start(2, [4])
    sim.wait()  # J0 ends at 10, no decision point; J3 arrives at 30
    assert sim.time_s == 30 and list(sim.view.pending) == [3] and sorted(sim.view.running) == [1, 2]
    return sim


def finish_with_j3_on_gpu1(sim: Simulator) -> dict[int, tuple[float, float]]:
    sim.start(3, [1])
    sim.wait()  # J4 arrives at 500: the only decision point left
    if 4 in sim.view.pending:
        sim.start(4, [3])
    wait_out(sim)
    return {r.job.job_id: (r.start_time_s, r.finish_time_s) for r in sim.log().records}


def test_a_futures_runtimes_end_running_and_pending_jobs_by_hand():
    sim = started_at_30()
    # J1 on an A100 for 250 s: 0 + 250 = 250. J2 on a V100 for 70 s: 0 + 70 / 0.5 = 140. J3 (pending) for 40 s,
    # started at 30 on GPU 1 (A100): 30 + 40 = 70. J4 keeps its own: 500 + 10 = 510.
    fork = sim.fork(Future(arrivals=[Job(4, 500, 10, 1000)], runtimes_s={1: 250, 2: 70, 3: 40}))
    assert finish_with_j3_on_gpu1(fork) == {0: (0, 10), 1: (0, 250), 2: (0, 140), 3: (30, 70), 4: (500, 510)}
    ran = {r.job.job_id: r.job.runtime_s for r in fork.log().records}
    assert ran == {0: 10, 1: 250, 2: 70, 3: 40, 4: 10}  # the records carry the runtimes the fork ran
    # The run itself: J1 100, J2 100 / 0.5 = 200, J3 30 + 100 = 130.
    assert finish_with_j3_on_gpu1(sim) == {0: (0, 10), 1: (0, 100), 2: (0, 200), 3: (30, 130), 4: (500, 510)}


def test_a_runtime_that_would_have_ended_in_the_past_ends_now():
    sim = started_at_30()
    # J1 for 10 s would have ended at 10 and J2 for 5 s at 0 + 5 / 0.5 = 10: both end now, at 30 (J1 first, started
    # first), and J3 is still pending there: a decision point at 30 with nothing running.
    fork = sim.fork(Future(arrivals=[Job(4, 500, 10, 1000)], runtimes_s={1: 10, 2: 5}))
    fork.wait()
    assert fork.time_s == 30 and not fork.view.running and list(fork.view.pending) == [3]
    log = fork.log()
    assert [(r.job.job_id, r.finish_time_s) for r in log.records] == [(0, 10), (1, 30), (2, 30)]
    assert log.busy_gpu_s == 10 + 30 + 30  # J0, J1 and J2 held one GPU each, none after 30


def test_a_new_runtime_above_the_wall_time_is_cut_there_when_kill_at_walltime():
    # J1 asks for 1000 s; given 2000 s it is killed at 0 + 1000, timed out.
    sim = started_at_30(RuntimeConfig(kill_at_walltime=True))
    fork = sim.fork(Future(runtimes_s={1: 2000}))
    fork.start(3, [1])
    wait_out(fork)
    record = next(r for r in fork.log().records if r.job.job_id == 1)
    assert (record.finish_time_s, record.timed_out) == (1000, True)


@pytest.mark.parametrize(("runtime_s", "end_s"), [(50, 115), (100, 165), (20, 95)])
def test_a_restarted_jobs_new_runtime_counts_its_checkpoint_and_restart_overhead(runtime_s, end_s):
    # J1 (100 s, checkpoints every 10 s) runs on GPU 0 from 0; preempted at 35 it keeps 30 s of work, and restarts
    # at 35 on GPU 0 paying the 60 s restart overhead: it ends at 35 + 60 + (R - 30), never before now:
    # R = 50 -> 115, R = 100 (its own) -> 165, R = 20 -> 35 + 60 + 0 = 95.
    jobs = [Job(1, 0, 100, 1000, preemptible=True, checkpoint_interval_s=10), Job(2, 35, 10, 1000)]
    sim = Simulator(load_cluster("tiny"), jobs, RuntimeConfig.rigid())
    sim.start(1, [0])
    sim.wait()
    assert sim.time_s == 35
    sim.preempt(1)
    sim.start(1, [0])
    assert sim.view.history[1].done_work_s == 30
    fork = sim.fork(Future(runtimes_s={1: runtime_s}))
    fork.start(2, [1])
    wait_out(fork)
    record = next(r for r in fork.log().records if r.job.job_id == 1)
    assert (record.start_time_s, record.finish_time_s) == (0, end_s)
    assert record.interruptions is not None and record.interruptions.held_s == end_s  # 35 + (end - 35)
    if runtime_s >= 30:  # (a runtime below the work already kept is a future the run's books cannot square)
        assert log_violations(fork, [dataclasses.replace(jobs[0], runtime_s=runtime_s), jobs[1]]) == []


def test_fork_replaces_the_runtime_of_a_requeued_pending_job():
    # J1 preempted at 35 with 30 s of work kept, then given 80 s in a fork: restarted at 35 it runs
    # 60 (overhead) + 80 - 30 = 110 s -> ends at 145.
    jobs = [Job(1, 0, 100, 1000, preemptible=True, checkpoint_interval_s=10), Job(2, 35, 10, 1000)]
    sim = Simulator(load_cluster("tiny"), jobs, RuntimeConfig.rigid())
    sim.start(1, [0])
    sim.wait()
    sim.preempt(1)
    assert sorted(sim.view.pending) == [1, 2]
    fork = sim.fork(Future(runtimes_s={1: 80}))
    fork.start(1, [0])
    fork.start(2, [1])
    wait_out(fork)
    assert {r.job.job_id: r.finish_time_s for r in fork.log().records} == {2: 45, 1: 145}
    assert sim.view.pending[1].runtime_s == 100  # the run's queue keeps the true runtime


# ---- futures: errors -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("future", "names"), [
    (Future(arrivals=[Job(77, 29.5, 10, 10)]), "job 77"),  # arrives before now (30)
    (Future(arrivals=[Job(3, 40, 10, 10)]), "arrival id 3"),  # J3 has arrived (pending)
    (Future(arrivals=[Job(1, 40, 10, 10)]), "arrival id 1"),  # J1 has arrived (running)
    (Future(arrivals=[Job(0, 40, 10, 10)]), "arrival id 0"),  # J0 has arrived (and ended)
    (Future(arrivals=[Job(50, 40, 10, 10), Job(50, 60, 10, 10)]), "arrival id 50"),  # given twice
    (Future(runtimes_s={0: 50}), "job 0"),  # ended
    (Future(runtimes_s={4: 50}), "job 4"),  # not arrived yet
    (Future(runtimes_s={99: 50}), "job 99"),  # no such job
])
def test_an_impossible_future_is_a_config_error_naming_the_job(future, names):
    sim = started_at_30()
    with pytest.raises(ConfigError, match=names):
        sim.fork(future)
    # the run is untouched: it ends as one never forked
    assert finish_with_j3_on_gpu1(sim) == {0: (0, 10), 1: (0, 100), 2: (0, 200), 3: (30, 130), 4: (500, 510)}


def test_an_arrival_at_now_is_allowed_and_arrives_at_now():
    sim = started_at_30()
    fork = sim.fork(Future(arrivals=[Job(9, 30, 10, 10)]))
    fork.start(3, [1])
    fork.wait()
    assert fork.time_s == 30 and list(fork.view.pending) == [9]


# ---- View.fork -------------------------------------------------------------------------------------------------------
class Peeking:
    """Decides as ``inner``; at its first decision at or after ``at_s`` it forks from its view with ``future`` and
    drives the fork to the end with ``other`` before deciding."""

    name = "peeking"

    def __init__(self, inner: Policy, other: Policy, at_s: float, future: Future | None) -> None:
        self.inner, self.other, self.at_s, self.future = inner, other, at_s, future
        self.fork: Simulator | None = None
        self.forked_at_s = math.nan

    def reset(self) -> None:
        self.inner.reset()
        self.fork = None

    def act(self, view: View) -> Action:
        if self.fork is None and view.time_s >= self.at_s:
            fork = view.fork(self.future)
            assert isinstance(fork, Simulator)
            self.forked_at_s, self.fork = view.time_s, fork
            drive(fork, self.other)
            assert view.time_s == self.forked_at_s  # the fork moved on, the run did not
        return self.inner.act(view)


@pytest.mark.parametrize("future", [None, Future()])
def test_a_policy_can_fork_from_its_view_without_changing_its_run(future):
    name, policy = "small-tiny-flaky", "priority+easy/pack+preempt"
    w = world(name)
    peeking = Peeking(make(policy), make("fcfs"), middle_s(name), future)
    log = simulate(w.cluster, w.workload, peeking, w.runtime, w.dynamics)
    assert log == unforked(name, policy)[0]
    fork = peeking.fork
    assert fork is not None and fork.done and fork.time_s > peeking.forked_at_s
    assert fork.log() != log  # another policy (and, with Future(), no later arrivals): another schedule
    assert state_violations(fork) == []


def test_a_view_of_no_simulator_cannot_fork():
    sim = started_at_30()
    with pytest.raises(ConfigError, match="cannot fork"):
        View(sim.state).fork(None)


def test_a_fork_after_pickling_forks_the_loaded_run():
    import pickle

    sim = pickle.loads(pickle.dumps(started_at_30()))
    fork = sim.view.fork(Future(runtimes_s={1: 250}))
    assert finish_with_j3_on_gpu1(fork)[1] == (0, 250)
    assert finish_with_j3_on_gpu1(sim)[1] == (0, 100)


def test_a_wait_in_a_fork_never_advances_the_run():
    sim = started_at_30()
    fork = sim.fork()
    fork.start(3, [1])
    fork.wait()  # J1 ends at 100, J3 at 130, J2 at 200; J4 arrives at 500: the next decision point
    assert fork.time_s == 500 and list(fork.view.pending) == [4] and fork.view.free_gpus == 8
    assert sim.time_s == 30 and list(sim.view.pending) == [3] and sorted(sim.view.running) == [1, 2]
    assert sim.view.free_gpus == 6 and sim.log().records == fork.log().records[:1]  # J0 only
