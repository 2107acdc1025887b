"""The lookahead planner and the hindsight bound (baselines/lookahead.py), on hand-computed schedules and random
worlds, and the learning suite's protocol (evaluation/learning.py).

The hand-computed world: one node of 4 A100s, rigid runtimes (no topology or speed effects). S (1 GPU, 3,600 s)
arrives at t=0; B (4 GPUs, 100 s) arrives at t=60. The base heuristic ``saf+greedy`` (smallest GPUs × request
first) starts S at once, so B waits for S: 3,540 s of waiting. Holding for a minute lets B go first (its area
400 < 3,600): B runs 60-160, S starts at 160: 160 s of waiting in all.
"""

from __future__ import annotations

import itertools
import math

import pytest

from baselines import make
from baselines.lookahead import Hold, parse_planner
from envs.core import ConfigError, Job, RuntimeConfig, summarize
from envs.core.presets import cluster_from_dict
from envs.scenario import scenario
from envs.sim import WAIT, Simulator, Wait, simulate
from envs.sim.fork import Future
from envs.sim.loop import apply_action
from envs.workload.futures import FutureModel
from envs.workload.table import Workload
from evaluation.learning import CASES

RIGID = RuntimeConfig.rigid()
SMALL_FIRST = "saf+greedy"


@pytest.fixture(scope="module")
def one_node():
    return cluster_from_dict({"name": "one-node", "node_groups": [
        {"name": "a100", "count": 1, "gpu_type": "A100-40GB", "gpus": 4, "island_size": 4, "cpus": 32,
         "ram_gib": 256, "rack": 0, "cache_gib": 0}]})


def small_then_big(big_at_s: float) -> list[Job]:
    return [Job(0, 0.0, 3600.0, 3600.0, n_gpus=1), Job(1, big_at_s, 100.0, 100.0, n_gpus=4)]


def futures_where_big_follows_small() -> FutureModel:
    """Training streams in which a 4-GPU job always comes 60 s after a 1-GPU job."""
    return FutureModel([Workload.from_jobs("train", small_then_big(60.0))])


def records(cluster, jobs, policy):
    log = simulate(cluster, jobs, policy, RIGID)
    return {r.job.job_id: (r.start_time_s, r.finish_time_s) for r in log.records}


def test_base_heuristic_starts_the_small_job_and_the_big_one_waits(one_node):
    assert records(one_node, small_then_big(60.0), make(SMALL_FIRST)) == {0: (0.0, 3600.0), 1: (3600.0, 3700.0)}


def test_planner_holds_the_small_job_because_resampled_futures_bring_a_big_one(one_node):
    planner = make(f"lookahead:c={SMALL_FIRST}|hold1m:m=2:every=1h", futures=futures_where_big_follows_small())
    assert records(one_node, small_then_big(60.0), planner) == {1: (60.0, 160.0), 0: (160.0, 3760.0)}
    assert planner.decisions == [(0.0, "hold1m")]  # 160 s of waiting against 3,540 s for the base


def test_planner_never_reads_the_true_future(one_node):
    # the same first decision whether the big job really comes at 60 s, at 3,000 s, or as a 1-GPU job
    futures = futures_where_big_follows_small()
    variants = [small_then_big(60.0), small_then_big(3000.0),
                [Job(0, 0.0, 3600.0, 3600.0, n_gpus=1), Job(1, 60.0, 100.0, 100.0, n_gpus=1)]]
    firsts = []
    for jobs in variants:
        planner = make(f"lookahead:c={SMALL_FIRST}|hold1m:m=2", futures=futures)
        simulate(one_node, jobs, planner, RIGID)
        firsts.append(planner.decisions[0])
    assert firsts == [(0.0, "hold1m")] * 3


def test_planner_decisions_before_a_change_of_future_arrivals_are_unchanged():
    # two worlds that share every job submitted before t_change and differ after it: every planning instant
    # before t_change chooses the same candidate in both
    world = scenario("small", "tiny", seed=3)
    jobs = sorted(world.workload.jobs, key=lambda j: j.submit_time_s)
    t_change = jobs[len(jobs) // 2].submit_time_s
    changed = [j if j.submit_time_s < t_change else
               Job(j.job_id, j.submit_time_s + 5.0, j.runtime_s * 3, j.runtime_estimate_s * 3, n_gpus=4)
               for j in jobs]
    futures = FutureModel([scenario("small", "tiny", seed=s).workload for s in (100, 101)])
    name = "lookahead:c=sjf+greedy|saf+greedy/pack|hold10m:m=2:every=30m:h=2h"
    runs = []
    for workload in (jobs, changed):
        planner = make(name, futures=futures)
        simulate(world.cluster, workload, planner, world.runtime)
        runs.append([d for d in planner.decisions if d[0] < t_change])
    assert len(runs[0]) >= 2
    assert runs[0] == runs[1]


@pytest.mark.parametrize("seed", range(5))
def test_hindsight_bound_is_never_worse_than_its_best_candidate(seed):
    world = scenario("small", "tiny", seed=seed, load=1.5)
    candidates = ["sjf+greedy", "saf+greedy/pack", "fcfs+easy/topology"]
    waits = [summarize(simulate(world.cluster, world.workload, make(c), world.runtime))["mean_wait_s"]
             for c in candidates]
    bound = make(f"hindsight:c={'|'.join(candidates)}|hold10m:every=30m")
    planned = summarize(simulate(world.cluster, world.workload, bound, world.runtime))["mean_wait_s"]
    assert planned <= min(waits) + 1e-9


@pytest.mark.parametrize("seed", range(3))
def test_lookahead_that_knows_the_whole_future_is_never_worse_than_its_base(seed):
    world = scenario("small", "tiny", seed=seed, load=1.5)
    base = summarize(simulate(world.cluster, world.workload, make("saf+greedy/pack"), world.runtime))["mean_wait_s"]
    futures = FutureModel([scenario("small", "tiny", seed=s).workload for s in (100, 101)])
    informed = make("lookahead:c=saf+greedy/pack|sjf+greedy|hold10m:m=1:every=30m:know=arrivals+runtimes",
                    futures=futures)
    planned = summarize(simulate(world.cluster, world.workload, informed, world.runtime))["mean_wait_s"]
    assert planned <= base + 1e-9


def test_a_future_without_arrivals_keeps_the_true_ones(one_node):
    sim = Simulator(one_node, small_then_big(60.0), RIGID)
    fork = sim.view.fork(Future(arrivals=None, runtimes_s={0: 50.0}))
    policy = make(SMALL_FIRST)
    while not fork.done:
        apply_action(fork, policy.act(fork.view))
    assert {r.job.job_id: r.finish_time_s for r in fork.log().records} == {0: 50.0, 1: 160.0}


def test_hold_waits_until_its_end_then_lets_the_base_decide(one_node):
    sim = Simulator(one_node, small_then_big(60.0), RIGID)
    hold = Hold(60.0, make(SMALL_FIRST))
    hold.reset()
    assert hold.act(sim.view) == Wait(60.0)
    sim.wait(60.0)
    action = hold.act(sim.view)
    assert (action.job_id, list(action.gpus)) == (1, [0, 1, 2, 3])  # B, the smaller area, first


def test_planner_names_are_canonical_and_checked():
    spec = parse_planner("lookahead:c=sjf+greedy|hold15m:m=3:every=30m:h=4h:z=1.5:seed=7:know=runtimes", make)
    assert (spec.candidates, spec.futures, spec.every_s, spec.horizon_s, spec.z, spec.seed, spec.know) == \
        (("sjf+greedy", "hold15m"), 3, 1800.0, 14400.0, 1.5, 7, {"runtimes"})
    assert spec.name == "lookahead:c=sjf+greedy|hold15m:m=3:every=30m:h=4h:z=1.5:know=runtimes:seed=7"
    assert parse_planner("hindsight", make).horizon_s == math.inf


@pytest.mark.parametrize(("name", "message"), [
    ("lookahead:q=1", "KEY=VALUE with KEY one of"),
    ("lookahead:c=hold5m|sjf", "a heuristic first"),
    ("lookahead:c=sjf|nosuch", "unknown order"),
    ("lookahead:c=sjf|lookahead", "cannot be a planner"),
    ("lookahead:c=sjf|holdabc", "not a duration"),
    ("lookahead:m=0", r"m must be in 1\.\.64"),
    ("lookahead:m=100000000", r"m must be in 1\.\.64"),
    ("lookahead:seed=-1", "seed must be >= 0"),
    ("lookahead:c=sjf|holdinf", "a hold must be finite"),
    ("hindsight:m=3:z=1", "m, z apply to lookahead only"),
    ("lookahead:every=inf", "every must be finite"),
    ("lookahead:h=-1h", "must be > 0"),
    ("lookahead:z=-1", "z must be finite and >= 0"),
    ("lookahead:know=everything", "know= takes arrivals and/or runtimes"),
])
def test_bad_planner_names_are_one_line_errors(name, message):
    with pytest.raises(ConfigError, match=message):
        make(name, futures=futures_where_big_follows_small())


def test_lookahead_without_training_streams_is_an_error():
    with pytest.raises(ConfigError, match="needs training streams"):
        make("lookahead")


def test_a_view_of_no_simulator_cannot_fork(one_node):
    from envs.sim.state import SimState
    from envs.sim.view import View

    with pytest.raises(ConfigError, match="cannot fork"):
        View(SimState(one_node, 0.0, 0)).fork(None)


def test_wait_is_the_only_action_of_a_hold_before_its_end(one_node):
    sim = Simulator(one_node, small_then_big(60.0), RIGID)
    hold = Hold(600.0, make(SMALL_FIRST))
    hold.reset()
    assert isinstance(hold.act(sim.view), Wait) and hold.act(sim.view) != WAIT


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_learning_suite_seed_ranges_are_disjoint(case):
    ranges = [set(case.train), set(case.validation), set(case.test)]
    assert all(not (a & b) for i, a in enumerate(ranges) for b in ranges[i + 1:])
    if case.window:  # trace windows of different ranges never share a job
        starts = sorted(set().union(*ranges))
        assert all(b - a >= case.window for a, b in itertools.pairwise(starts))
        assert len(case.test) >= 20
