"""Priority orders (SPEC §6): hand-computed rankings, exact decayed fair-share usage, and the tie rule.

States are built by driving a :class:`Simulator` by hand (``start`` and ``wait``); the order is then asked to rank
``sim.view``. Every expected ranking and value is worked out in the comment beside it. "GPUs" is the job's GPU share.
"""

from __future__ import annotations

import itertools
import math
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import queues

from baselines.fairshare import DecayedUsage, decayed_gpu_s
from baselines.orders import (
    F1,
    ORDER_DOCS,
    ORDERS,
    FairShareOrder,
    MultifactorOrder,
    Order,
    Unicep,
    Wfp3,
    make_order,
)
from envs.core import ConfigError, Job, RuntimeConfig
from envs.core.presets import cluster_from_dict
from envs.placement import first_fit
from envs.sim import Simulator

RIGID = RuntimeConfig.rigid()
ONE_NODE = cluster_from_dict({"name": "one", "node_groups": [{"count": 1, "gpu_type": "A100-40GB", "gpus": 8}]})


def ids(jobs: list[Job]) -> list[int]:
    return [j.job_id for j in jobs]


def at_time(sim: Simulator, t: float) -> Simulator:
    """Wait until the simulator's clock reads ``t`` (a decision point)."""
    while sim.time_s < t:
        sim.wait()
    assert sim.time_s == t
    return sim


# ---- static orders ------------------------------------------------------------------------------------------
def test_fcfs_sjf_saf_ljf_rank_a_small_queue_differently():
    # id, submit, req, GPUs -> area = GPUs x req:
    #   1:  0 s, 300 s, 1    -> 300          2: 10 s, 100 s, 4 -> 400          3: 20 s, 200 s, 1 -> 200
    #   4: 30 s, 100 s, 2    -> 200          5: 40 s,  50 s, 0.5 (500 milli) -> 25
    jobs = [Job(1, 0, 300, 300), Job(2, 10, 100, 100, n_gpus=4), Job(3, 20, 200, 200),
            Job(4, 30, 100, 100, n_gpus=2), Job(5, 40, 50, 50, gpu_milli=500)]
    view = at_time(Simulator(ONE_NODE, jobs, RIGID), 40).view  # all five pending, nothing started
    expected = {
        "fcfs": [1, 2, 3, 4, 5],  # submit time
        "fifo": [1, 2, 3, 4, 5],
        "sjf": [5, 2, 4, 3, 1],  # req 50, 100 (J2 submitted before J4), 100, 200, 300
        "saf": [5, 3, 4, 1, 2],  # area 25, 200 (J3 before J4 by submit), 200, 300, 400
        "ljf": [1, 3, 2, 4, 5],  # req 300, 200, 100 (J2 before J4), 100, 50
    }
    for name, ranking in expected.items():
        assert ids(make_order(name).rank(view)) == ranking, name


# ---- dynamic orders: WFP3, UNICEP ------------------------------------------------------------------------------
def test_wfp3_and_unicep_rankings_change_as_time_passes():
    # A (id 1): submit 0, req 100, 1 GPU. B (id 2): submit 50, req 20, 1 GPU. Fillers 8 and 9 run 0-60 and 0-150
    # so that t = 60 and t = 150 are decision points.
    # t = 60:  WFP3  A (60/100)^3 x 1 = 0.216 > B (10/20)^3 = 0.125      -> A, B
    #          UNICEP A 60 / (log2(max(1, 2)) x 100) = 0.6 > B 10 / 20 = 0.5 -> A, B
    # t = 150: WFP3  A (150/100)^3 = 3.375 < B (100/20)^3 = 125           -> B, A
    #          UNICEP A 150/100 = 1.5 < B 100/20 = 5                      -> B, A
    sim = Simulator(ONE_NODE, [Job(1, 0, 10, 100), Job(2, 50, 10, 20), Job(8, 0, 60, 60), Job(9, 0, 150, 150)],
                    RIGID)
    sim.start(8, [0])
    sim.start(9, [1])
    wfp3, unicep = Wfp3(), Unicep()
    at_time(sim, 60)
    a, b = sim.view.pending[1], sim.view.pending[2]
    assert -wfp3.key(60)(a) == pytest.approx(0.216) and -wfp3.key(60)(b) == pytest.approx(0.125)
    assert -unicep.key(60)(a) == pytest.approx(0.6) and -unicep.key(60)(b) == pytest.approx(0.5)
    assert ids(wfp3.rank(sim.view)) == ids(unicep.rank(sim.view)) == [1, 2]
    at_time(sim, 150)
    assert -wfp3.key(150)(a) == pytest.approx(3.375) and -wfp3.key(150)(b) == pytest.approx(125)
    assert -unicep.key(150)(a) == pytest.approx(1.5) and -unicep.key(150)(b) == pytest.approx(5)
    assert ids(wfp3.rank(sim.view)) == ids(unicep.rank(sim.view)) == [2, 1]
    assert ids(make_order("fcfs").rank(sim.view)) == [1, 2]  # FCFS never changes its mind


def test_unicep_guards_one_gpu_and_fractional_shares():
    # All submitted at 0 with req 100, ranked at t = 100 (filler 9 runs 0-100): wait 100.
    # log2(GPUs) would be 0 for 1 GPU and -1 for half a GPU; GPUs are floored at 2 inside the log2:
    #   1: 1 GPU -> 100 / (log2 2 x 100) = 1      2: 0.5 GPU -> 1      3: 2 GPUs -> 1
    #   4: 4 GPUs -> 100 / (2 x 100) = 0.5        5: 8 GPUs -> 100 / (3 x 100) = 1/3
    #   6: 1 GPU, req 0 -> req' = 0.1 s -> 100 / 0.1 = 1000 (no division by zero)
    jobs = [Job(1, 0, 1, 100), Job(2, 0, 1, 100, gpu_milli=500), Job(3, 0, 1, 100, n_gpus=2),
            Job(4, 0, 1, 100, n_gpus=4), Job(5, 0, 1, 100, n_gpus=8), Job(6, 0, 1, 0), Job(9, 0, 100, 100)]
    sim = Simulator(ONE_NODE, jobs, RIGID)
    sim.start(9, [0])
    at_time(sim, 100)
    key = Unicep().key(100)
    values = {j: -key(sim.view.pending[j]) for j in (1, 2, 3, 4, 5, 6)}
    assert values == pytest.approx({1: 1.0, 2: 1.0, 3: 1.0, 4: 0.5, 5: 1 / 3, 6: 1000.0})
    assert ids(Unicep().rank(sim.view)) == [6, 1, 2, 3, 4, 5]  # 1, 2, 3 tie: submit time, then job id
    # WFP3 on the same queue: (100/100)^3 x GPUs = 1, 0.5, 2, 4, 8 and (100/0.1)^3 x 1 = 1e9.
    assert ids(Wfp3().rank(sim.view)) == [6, 5, 4, 3, 1, 2]


def test_f1_key_values():
    # key = log10(max(req, 0.1)) x GPUs + 870 x log10(max(submit, 0.1)), lowest first:
    #   1: submit 0 -> 870 x log10(0.1) = -870; req 1000, 2 GPUs -> 3 x 2 = 6          -> -864
    #   2: submit 10 -> 870; req 10, 1 GPU -> 1                                         -> 871
    #   3: submit 10 -> 870; req 0 -> log10(0.1) x 4 GPUs = -4                          -> 866
    #   4: submit 100 -> 870 x 2 = 1740; req 100000, 8 GPUs -> 5 x 8 = 40               -> 1780
    jobs = [Job(1, 0, 1, 1000, n_gpus=2), Job(2, 10, 1, 10), Job(3, 10, 1, 0, n_gpus=4),
            Job(4, 100, 1, 100_000, n_gpus=8)]
    view = at_time(Simulator(ONE_NODE, jobs, RIGID), 100).view
    key = F1().key(100)
    assert {j: key(view.pending[j]) for j in (1, 2, 3, 4)} == pytest.approx({1: -864, 2: 871, 3: 866, 4: 1780})
    assert ids(F1().rank(view)) == [1, 3, 2, 4]  # FCFS would put 2 before 3


# ---- fair share --------------------------------------------------------------------------------------------------
def fair_share_history() -> Simulator:
    """User A ran 8 GPUs over 0-1000 s; user B ran 1 GPU over 9000-10000 s. A2 (id 4) and B2 (id 3), both
    submitted at 9500, wait; t = 10000 (B1's end) is the decision point."""
    jobs = [Job(1, 0, 1000, 1000, n_gpus=8, user="A"), Job(2, 9000, 1000, 1000, user="B"),
            Job(3, 9500, 10, 10, user="B"), Job(4, 9500, 10, 10, user="A")]
    sim = Simulator(ONE_NODE, jobs, RIGID)
    sim.start(1, list(range(8)))
    at_time(sim, 9000)
    sim.start(2, [0])
    return at_time(sim, 10_000)


@pytest.mark.parametrize(
    ("params", "factors", "ranking"),
    [
        # h = 1000 s. usage = GPUs x h/ln2 x (2^(-(t-end)/h) - 2^(-(t-start)/h)); in units of h/ln2:
        #   A: 8 x (2^-9 - 2^-10) = 8 / 1024 = 1/128;  B: 1 x (2^0 - 2^-1) = 64/128;  total 65/128.
        #   Equal shares S = 1/2: F_A = 2^(-(1/65)/(1/2)) = 2^(-2/65) = 0.97889, F_B = 2^(-128/65) = 0.25539.
        #   A's old usage has decayed away: A2 ranks first.
        ({"half_life_s": 1000.0}, {"A": 2 ** (-2 / 65), "B": 2 ** (-128 / 65)}, [4, 3]),
        # No decay: A 8000, B 1000 GPU-s: U_A = 8/9, U_B = 1/9; F_A = 2^(-16/9) = 0.29163, F_B = 2^(-2/9) = 0.85724.
        ({"half_life_s": math.inf}, {"A": 2 ** (-16 / 9), "B": 2 ** (-2 / 9)}, [3, 4]),
        # h = 100000 s (long): A 8 x (2^-0.09 - 2^-0.1) = 0.051918, B 1 x (1 - 2^-0.01) = 0.006908 (units of h/ln2):
        #   U_A = 0.88258, U_B = 0.11742 -> F_A = 2^-1.76515 = 0.29420, F_B = 2^-0.23485 = 0.84978: B2 first.
        ({"half_life_s": 100_000.0}, {"A": 0.29420, "B": 0.84978}, [3, 4]),
        # No decay, but shares A 9 : B 1: S_A = 0.9, S_B = 0.1: F_A = 2^(-(8/9)/0.9) = 0.5043,
        #   F_B = 2^(-(1/9)/0.1) = 0.4630: A's bigger share outweighs its bigger usage.
        ({"half_life_s": math.inf, "shares": {"A": 9, "B": 1}}, {"A": 2 ** (-80 / 81), "B": 2 ** (-10 / 9)}, [4, 3]),
    ],
)
def test_fair_share_follows_the_decay_half_life(params, factors, ranking):
    sim = fair_share_history()
    order = make_order("fairshare", **params)
    assert order.fair_share.factors(sim.view) == pytest.approx(factors, rel=1e-3)
    assert ids(order.rank(sim.view)) == ranking


def test_fair_share_by_team_charges_the_team():
    # The same history, with A's and B's jobs in team "T" and A2's in team "U": by team, T used everything, U
    # nothing: F_U = 2^0 = 1 > F_T, so A2 (id 4, team U) ranks first whatever the half-life.
    jobs = [Job(1, 0, 1000, 1000, n_gpus=8, user="A", team="T"), Job(2, 9000, 1000, 1000, user="B", team="T"),
            Job(3, 9500, 10, 10, user="B", team="T"), Job(4, 9500, 10, 10, user="A", team="U")]
    sim = Simulator(ONE_NODE, jobs, RIGID)
    sim.start(1, list(range(8)))
    at_time(sim, 9000)
    sim.start(2, [0])
    at_time(sim, 10_000)
    order = FairShareOrder(half_life_s=math.inf, by="team")
    assert order.fair_share.factors(sim.view) == pytest.approx({"T": 2 ** -2, "U": 1.0})  # U_T = 1, S_T = 1/2
    assert ids(order.rank(sim.view)) == [4, 3]
    assert ids(FairShareOrder(half_life_s=math.inf, by="user").rank(sim.view)) == [3, 4]


def test_decayed_usage_counts_a_job_that_ended_between_two_decisions_exactly():
    # h = 500 s. J1 (user u, 2 GPUs) runs 0-300 and ends between the decisions at t = 0 and t = 1000 (the tracker is
    # not asked at 300); J2 (user v, 1 GPU) runs 0-1000; J3 (user w) waits throughout.
    # u: 2 x 500/ln2 x (2^(-700/500) - 2^(-1000/500)) = 2 x 721.348 x (0.378929 - 0.25) = 186.0
    # v: 1 x 500/ln2 x (2^0 - 2^-2) = 721.348 x 0.75 = 541.0;  w: 0.
    h = 500.0
    expected = {"u": 2 * h / math.log(2) * (2 ** -1.4 - 2 ** -2.0), "v": h / math.log(2) * 0.75, "w": 0.0}
    assert expected["u"] == pytest.approx(186.0, abs=0.1) and expected["v"] == pytest.approx(541.0, abs=0.1)
    jobs = [Job(1, 0, 300, 300, n_gpus=2, user="u"), Job(2, 0, 1000, 1000, user="v"), Job(3, 0, 10, 10, user="w")]

    def run(ask_at: tuple[float, ...]) -> dict[str, float]:
        sim = Simulator(ONE_NODE, jobs, RIGID)
        sim.start(1, [0, 1])
        sim.start(2, [2])
        tracker = DecayedUsage(half_life_s=h)
        for t in ask_at:
            tracker.at(at_time(sim, t).view)
        return tracker.at(at_time(sim, 1000).view)

    assert run((0.0,)) == pytest.approx(expected, rel=1e-12)
    assert run((0.0, 300.0)) == pytest.approx(expected, rel=1e-12)  # seen ending at 300, then decayed to 1000
    assert run(()) == pytest.approx(expected, rel=1e-12)  # first asked at 1000
    # At t = 300, J1 ended at this very instant and J2 is still running: both 2x / 1x 500/ln2 x (1 - 2^-0.6).
    sim = Simulator(ONE_NODE, jobs, RIGID)
    sim.start(1, [0, 1])
    sim.start(2, [2])
    running = DecayedUsage(h).at(at_time(sim, 300).view)
    assert running["u"] == pytest.approx(2 * running["v"]) == pytest.approx(2 * decayed_gpu_s(1, 0, 300, 300, h))


def test_fair_share_tracker_starts_over_on_a_new_run():
    # The same order object asked on a second simulator (as a harness reusing a policy would) sees only that run:
    # there, user B alone ran (2 GPUs over 0-1000, no decay) and A2 (id 4) ranks first with F_A = 1, F_B = 2^-2.
    order = FairShareOrder(half_life_s=math.inf)
    assert ids(order.rank(fair_share_history().view)) == [3, 4]
    sim = Simulator(ONE_NODE, [Job(1, 0, 1000, 1000, n_gpus=2, user="B"), Job(3, 500, 10, 10, user="B"),
                               Job(4, 500, 10, 10, user="A")], RIGID)
    sim.start(1, [0, 1])
    at_time(sim, 1000)
    assert order.fair_share.factors(sim.view) == pytest.approx({"A": 1.0, "B": 0.25})  # U_B = 1, S_B = 1/2
    assert ids(order.rank(sim.view)) == [4, 3]


# ---- multifactor ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("weights", "priorities", "ranking"),
    [
        # Ranked at t = 7200 with max_age_s = 7200, cluster 8 GPUs, max_priority 2; no usage among the jobs' user,
        # so F = 1 for all. Factors (age, size, qos): J1 submit 0, 1 GPU, class 0 -> (1, 1/8, 0);
        # J2 submit 3600, 8 GPUs, class 0 -> (0.5, 1, 0); J3 submit 3600, 1 GPU, class 2 -> (0.5, 1/8, 1).
        # Defaults (age 1000, fair share 10000, size 1000, qos 10000):
        #   J1 1000 + 10000 + 125 = 11125;  J2 500 + 10000 + 1000 = 11500;  J3 500 + 10000 + 125 + 10000 = 20625.
        ({}, {1: 11125, 2: 11500, 3: 20625}, [3, 2, 1]),
        # Age-heavy, no QoS, no fair share (age 10000, size 1000):
        #   J1 10000 + 125 = 10125;  J2 5000 + 1000 = 6000;  J3 5000 + 125 = 5125.
        ({"w_age": 10_000, "w_fairshare": 0, "w_qos": 0}, {1: 10125, 2: 6000, 3: 5125}, [1, 2, 3]),
        # Size only: J2 1000; J1 and J3 tie at 125 -> J1 (submitted first).
        ({"w_age": 0, "w_fairshare": 0, "w_qos": 0}, {1: 125, 2: 1000, 3: 125}, [2, 1, 3]),
    ],
)
def test_multifactor_weights_reorder_the_queue(weights, priorities, ranking):
    jobs = [Job(1, 0, 10, 10), Job(2, 3600, 10, 10, n_gpus=8), Job(3, 3600, 10, 10, priority=2),
            Job(9, 0, 7200, 7200, user="filler")]
    sim = Simulator(ONE_NODE, jobs, RIGID)
    sim.start(9, [0])
    at_time(sim, 7200)
    order = make_order("multifactor", max_age_s=7200.0, **weights)
    assert order.priorities(sim.view) == pytest.approx(priorities)
    assert ids(order.rank(sim.view)) == ranking


def test_multifactor_qos_factor_is_clipped_to_one():
    # Class 5 with max_priority 2 gives qos 5/2 -> clipped to 1; class -1 -> 0. Only the QoS weight is on.
    sim = Simulator(ONE_NODE, [Job(1, 0, 10, 10, priority=5), Job(2, 0, 10, 10, priority=-1), Job(3, 0, 10, 10,
                                                                                                   priority=1)])
    order = MultifactorOrder(w_age=0, w_fairshare=0, w_size=0, w_qos=100)
    assert order.priorities(sim.view) == pytest.approx({1: 100, 2: 0, 3: 50})


# ---- registry -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ORDERS)
def test_registry_builds_each_order(name):
    assert isinstance(make_order(name), Order)


def test_registry_rejects_unknown_orders_and_parameters():
    assert set(ORDER_DOCS) == set(ORDERS) and all(ORDER_DOCS.values())
    with pytest.raises(ConfigError, match=r"order 'edf': unknown \(known: fcfs, fifo, sjf.*multifactor\)"):
        make_order("edf")
    with pytest.raises(ConfigError, match=r"order 'sjf': unknown parameter\(s\) half_life_s"):
        make_order("sjf", half_life_s=10)
    with pytest.raises(ConfigError, match="half_life_s"):
        make_order("fairshare", half_life_s=0)
    with pytest.raises(ConfigError, match="by"):
        make_order("fairshare", by="account")
    with pytest.raises(ConfigError, match="w_age"):
        make_order("multifactor", w_age=-1)


# ---- every order: a permutation that honours the tie rule -------------------------------------------------------
def keys_of(order: Order, view) -> dict[int, float]:
    """The ascending key each order sorts by, per pending job."""
    if isinstance(order, FairShareOrder):
        factors = order.fair_share.factors(view)
        return {j.job_id: -factors[order.fair_share.account(j)] for j in view.pending.values()}
    if isinstance(order, MultifactorOrder):
        return {i: -p for i, p in order.priorities(view).items()}
    key = order.key(view.time_s)
    return {j.job_id: key(j) for j in view.pending.values()}


ORDER_CASES = {**{name: factory for name, factory in ORDERS.items()},
               "fairshare-team-20s": lambda: FairShareOrder(half_life_s=20.0, by="team")}
"""Every registered order, and fair share by team with a short half-life (usage decays between decisions)."""


@pytest.mark.parametrize("name", ORDER_CASES)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jobs=queues(), seed=st.integers(0, 2**16))
def test_every_order_returns_a_permutation_that_respects_the_tie_rule(name, jobs, seed):
    rng = random.Random(seed)
    sim = Simulator(ONE_NODE, jobs, RIGID)
    order = ORDER_CASES[name]()
    while not sim.done:
        view = sim.view
        ranked = order.rank(view)
        assert sorted(ids(ranked)) == sorted(view.pending) and len(ranked) == len(view.pending)
        keys = keys_of(order, view)
        for a, b in itertools.pairwise(ranked):
            assert keys[a.job_id] < keys[b.job_id] or (
                keys[a.job_id] == keys[b.job_id] and (a.submit_time_s, a.job_id) < (b.submit_time_s, b.job_id))
        for job in list(view.pending.values()):
            gpus = first_fit(view, job) if rng.random() < 0.6 or not sim.events_left else None
            if gpus is not None:
                sim.start(job.job_id, gpus)
        sim.wait()
