"""Preemptive priority (SPEC §6, :mod:`baselines.preemption`): hand-computed evictions on the ``tiny`` cluster, one
case per tie-break level of kube-scheduler's pickOneNodeForPreemption, and a property test over random workloads.

tiny: node 0 = GPUs 0-3, node 1 = GPUs 4-7; rigid runtime model; restart overhead 60 s (``DynamicsConfig()``, no
failures). Unless a test says otherwise the policy is the priority order, no backfilling, first-fit, wrapped in
:class:`Preemptive`. The jobs running before the high-priority job arrives are started by hand on the GPUs given;
the policy decides from then on. Requested wall time = runtime everywhere. K below is kube's 2^31 offset of the
priority sum (level 2). Every expected time is worked out in the comment beside it.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from baselines.backfill import BACKFILL_DOCS, Scheduler
from baselines.orders import ORDER_DOCS, PriorityOrder, make_order
from baselines.preemption import PREEMPT_SUFFIX, Preemptive, candidates_for
from envs.core import Job, RuntimeConfig, summarize
from envs.core.dynamics import DynamicsConfig
from envs.placement import PLACEMENT_RULES, get_placement_rule
from envs.scenario import load_cluster
from envs.sim import Simulator
from envs.sim.checks import log_violations, state_violations
from envs.sim.loop import apply_action
from envs.sim.policy import Action, Policy, Preempt, Start

RIGID = RuntimeConfig.rigid()
TINY = load_cluster("tiny")

Placed = tuple[tuple[float, int, list[int]], ...]
"""Jobs started by hand before the policy decides: (time [s], job id, GPUs), in time order."""


def job(job_id: int, submit_s: float, runtime_s: float, n_gpus: int = 1, priority: int = 0,
        preemptible: bool = True, **more) -> Job:
    """A job whose requested wall time is its runtime [s]."""
    return Job(job_id, submit_s, runtime_s, runtime_s, n_gpus=n_gpus, priority=priority, preemptible=preemptible,
               **more)


def preemptive(order: str = "priority", backfill: str = "none", placement: str = "firstfit") -> Preemptive:
    """The scheduler of these parts, wrapped in :class:`Preemptive`."""
    return Preemptive(Scheduler(f"{order}+{backfill}/{placement}", make_order(order), backfill,
                                get_placement_rule(placement)))


@dataclass
class Run:
    """A finished run: the simulator, every action but Wait as (time [s], action), and the records by job id."""

    sim: Simulator
    actions: list[tuple[float, Action]]

    @property
    def records(self) -> dict:
        """The job log's records by job id."""
        return {r.job.job_id: r for r in self.sim.log().records}

    def at(self, t: float) -> list[tuple[str, int, tuple[int, ...]]]:
        """The actions at time ``t``: ("preempt", job id, ()) or ("start", job id, GPUs)."""
        return [("start", a.job_id, tuple(int(g) for g in a.gpus)) if isinstance(a, Start) else
                ("preempt", a.job_id, ()) for s, a in self.actions if s == t]

    @property
    def preempted(self) -> list[int]:
        """The preempted jobs' ids, in preemption order."""
        return [a.job_id for _, a in self.actions if isinstance(a, Preempt)]


def prepare(jobs: list[Job], placed: Placed = ()) -> Simulator:
    """A simulator of ``jobs`` (restart overhead 60 s, no failures) in which each (time [s], job id, GPUs) of
    ``placed`` was started by hand."""
    sim = Simulator(TINY, jobs, RIGID, DynamicsConfig())
    for t, job_id, gpus in placed:
        at_time(sim, t).start(job_id, gpus)
    return sim


def at_time(sim: Simulator, t: float) -> Simulator:
    """Wait until the simulator's clock reads ``t`` (a decision point)."""
    while sim.time_s < t:
        sim.wait()
    assert sim.time_s == t
    return sim


def run(jobs: list[Job], policy: Preemptive, placed: Placed = ()) -> Run:
    """:func:`prepare`, then let ``policy`` decide to the end; check the state after every action and the log at
    the end."""
    sim = prepare(jobs, placed)
    policy.reset()
    actions: list[tuple[float, Action]] = []
    while not sim.done:
        action = policy.act(sim.view)
        if not apply_action(sim, action):
            continue
        actions.append((sim.time_s, action))
        assert len(actions) <= 50 * len(jobs), "livelock: too many actions"
        assert state_violations(sim) == []
    assert log_violations(sim, jobs) == []
    return Run(sim, actions)


def candidates(jobs: list[Job], placed: Placed, t: float, job_id: int) -> dict[int | None, tuple[int, ...]]:
    """The candidates for pending job ``job_id`` at ``t`` (first-fit): victims' ids by node (None: cluster-wide)."""
    sim = at_time(prepare(jobs, placed), t)
    found = candidates_for(sim.view, sim.view.pending[job_id], preemptive().scheduler)
    return {c.node: tuple(v.job.job_id for v in c.victims) for c in found}


def times(record) -> tuple[float, float]:
    """(first start, finish) [s]."""
    return record.start_time_s, record.finish_time_s


# ---- the priority order ---------------------------------------------------------------------------------------------
def test_priority_order_ranks_by_class_then_submit_time_then_job_id():
    # ids: (submit, priority): 1 (0, 0), 2 (10, 2), 3 (5, 2), 4 (5, 2), 5 (0, -1). Nothing starts; ranked at t = 10.
    # Priority 2 first: J3 and J4 (submit 5; id 3 before 4), then J2 (submit 10); then J1 (0); then J5 (-1).
    jobs = [job(1, 0, 10, priority=0), job(2, 10, 10, priority=2), job(3, 5, 10, priority=2),
            job(4, 5, 10, priority=2), job(5, 0, 10, priority=-1)]
    sim = at_time(Simulator(TINY, jobs, RIGID), 10)
    order = make_order("priority")
    assert isinstance(order, PriorityOrder) and order.name == "priority"
    assert [j.job_id for j in order.rank(sim.view)] == [3, 4, 2, 1, 5]
    assert ORDER_DOCS["priority"] == PriorityOrder.__doc__.splitlines()[0]


# ---- victims and the choice of a candidate --------------------------------------------------------------------------
def test_the_preemptor_evicts_only_the_victims_it_needs_after_reprieve():
    # Node 0: A (J1, priority 0, GPUs 0-1), B (J2, priority 1, GPUs 2-3); node 1: C (J3, not preemptible, 4 GPUs).
    # H (J9, priority 5, 2 GPUs, 500 s) arrives at 100 and does not fit. Node 0: remove A and B, H fits; reprieve
    # B first (higher priority): with B back GPUs 0-1 are free, H still fits, B stays; with A back nothing is free:
    # A is the one victim. Node 1 has no potential victim. H runs 100-600 on GPUs 0-1; A, without checkpoints,
    # restarts at 600 on GPUs 0-1: 600 + 60 + 1000 = 1660.
    jobs = [job(1, 0, 1000, 2), job(2, 0, 1000, 2, priority=1), job(3, 0, 2000, 4, preemptible=False),
            job(9, 100, 500, 2, priority=5)]
    placed = ((0, 1, [0, 1]), (0, 2, [2, 3]), (0, 3, [4, 5, 6, 7]))
    assert candidates(jobs, placed, 100, 9) == {0: (1,)}
    r = run(jobs, preemptive(), placed)
    assert r.at(100) == [("preempt", 1, ()), ("start", 9, (0, 1))]
    rec = r.records
    assert times(rec[9]) == (100, 600) and times(rec[1]) == (0, 1660) and times(rec[2]) == (0, 1000)
    assert r.preempted == [1]


def test_level_1_the_lowest_highest_victim_priority_wins_even_with_more_victims():
    # Node 0: A (J1, priority 2, 4 GPUs); node 1: B (J2) and C (J3), priority 1, 2 GPUs each. H (J9, priority 5,
    # 4 GPUs, 500 s) at 100. Candidates: node 0 [A], key (2, 2+K, 1, ...); node 1 [B, C] (with B back only 2 GPUs
    # are free: both are victims), key (1, 2+2K, 2, ...). Level 1: 1 < 2, node 1 although it has more victims.
    # H runs 100-600 on GPUs 4-7; B and C restart at 600 on 4-5 and 6-7: 600 + 60 + 1000 = 1660.
    jobs = [job(1, 0, 1000, 4, priority=2), job(2, 0, 1000, 2, priority=1), job(3, 0, 1000, 2, priority=1),
            job(9, 100, 500, 4, priority=5)]
    placed = ((0, 1, [0, 1, 2, 3]), (0, 2, [4, 5]), (0, 3, [6, 7]))
    assert candidates(jobs, placed, 100, 9) == {0: (1,), 1: (2, 3)}
    r = run(jobs, preemptive(), placed)
    assert r.at(100) == [("preempt", 2, ()), ("preempt", 3, ()), ("start", 9, (4, 5, 6, 7))]
    rec = r.records
    assert times(rec[1]) == (0, 1000) and times(rec[9]) == (100, 600)
    assert times(rec[2]) == times(rec[3]) == (0, 1660) and rec[2].gpus == (4, 5) and rec[3].gpus == (6, 7)


def test_level_2_the_smallest_priority_sum_wins():
    # Node 0: A (J1) and B (J2), priority 2, GPUs 0-1 and 2-3; node 1: C (J3, priority 2, GPUs 4-5), D (J4,
    # priority 0, GPUs 6-7). H (J9, priority 5, 4 GPUs) at 100 needs a whole node: node 0 [A, B], key
    # (2, 4+2K, 2, ...); node 1 [C, D], key (2, 2+2K, 2, ...). Level 1 ties at 2; level 2: node 1. Victims go most
    # important first (C, then D). The requeued C finds no running job below priority 2 to evict. H 100-600; C and
    # D restart at 600 on 4-5 and 6-7: 600 + 60 + 1000 = 1660.
    jobs = [job(1, 0, 1000, 2, priority=2), job(2, 0, 1000, 2, priority=2), job(3, 0, 1000, 2, priority=2),
            job(4, 0, 1000, 2, priority=0), job(9, 100, 500, 4, priority=5)]
    placed = ((0, 1, [0, 1]), (0, 2, [2, 3]), (0, 3, [4, 5]), (0, 4, [6, 7]))
    assert candidates(jobs, placed, 100, 9) == {0: (1, 2), 1: (3, 4)}
    r = run(jobs, preemptive(), placed)
    assert r.at(100) == [("preempt", 3, ()), ("preempt", 4, ()), ("start", 9, (4, 5, 6, 7))]
    rec = r.records
    assert times(rec[3]) == times(rec[4]) == (0, 1660)
    assert times(rec[1]) == times(rec[2]) == (0, 1000)


@pytest.mark.parametrize("priority", [0, -1])
def test_level_3_the_fewest_victims_win_even_with_negative_priorities(priority):
    # Node 0: A (J1, 4 GPUs); node 1: B (J2) and C (J3), 2 GPUs each; all of priority p. H (J9, priority p + 1,
    # 4 GPUs) at 100. Node 0 [A], node 1 [B, C]; level 1 ties at p. p = 0: the raw sums tie at 0 and the fewest
    # victims (level 3) pick node 0; kube's offset sums (K vs 2K) already say so. p = -1: the raw sums (-1 vs -2)
    # would pick node 1, the offset sums (K-1 vs 2K-2) pick node 0: fewer victims, as kube intends.
    # H 100-600 on GPUs 0-3; A restarts at 600: 600 + 60 + 1000 = 1660.
    jobs = [job(1, 0, 1000, 4, priority=priority), job(2, 0, 1000, 2, priority=priority),
            job(3, 0, 1000, 2, priority=priority), job(9, 100, 500, 4, priority=priority + 1)]
    placed = ((0, 1, [0, 1, 2, 3]), (0, 2, [4, 5]), (0, 3, [6, 7]))
    assert candidates(jobs, placed, 100, 9) == {0: (1,), 1: (2, 3)}
    r = run(jobs, preemptive(), placed)
    assert r.at(100) == [("preempt", 1, ()), ("start", 9, (0, 1, 2, 3))]
    rec = r.records
    assert times(rec[1]) == (0, 1660) and times(rec[2]) == times(rec[3]) == (0, 1000)


def test_level_4_the_most_recently_started_highest_priority_victim_wins():
    # Started by hand: A' (J1, priority 0, GPU 3) at 0, B (J2, priority 1, GPUs 4-6) at 20, A (J3, priority 1,
    # GPUs 0-2) at 30, B' (J4, priority 0, GPU 7) at 60; 1000 s each. H (J9, priority 5, 4 GPUs) at 100 needs a
    # whole node: node 0 [A, A'], node 1 [B, B']; levels 1-3 tie (1, 1+2K, 2). Level 4 looks at the highest-priority
    # victims only: A started at 30, later than B at 20, so node 0 wins (the earliest start of all victims would
    # have picked node 1: 0 against 20). The requeued A (3 GPUs) could only evict B' (1 GPU): no room, no eviction.
    # H 100-600 on GPUs 0-3; at 600 A (priority 1) restarts on 0-2, then A' on 3: 600 + 60 + 1000 = 1660 both;
    # B 20-1020, B' 60-1060.
    jobs = [job(1, 0, 1000), job(2, 20, 1000, 3, priority=1), job(3, 30, 1000, 3, priority=1), job(4, 60, 1000),
            job(9, 100, 500, 4, priority=5)]
    placed = ((0, 1, [3]), (20, 2, [4, 5, 6]), (30, 3, [0, 1, 2]), (60, 4, [7]))
    assert candidates(jobs, placed, 100, 9) == {0: (3, 1), 1: (2, 4)}
    r = run(jobs, preemptive(), placed)
    assert r.at(100) == [("preempt", 3, ()), ("preempt", 1, ()), ("start", 9, (0, 1, 2, 3))]
    rec = r.records
    assert times(rec[3]) == (30, 1660) and rec[3].gpus == (0, 1, 2)
    assert times(rec[1]) == (0, 1660) and rec[1].gpus == (3,)
    assert times(rec[2]) == (20, 1020) and times(rec[4]) == (60, 1060)


def test_a_requeued_victim_may_itself_preempt_a_lower_priority_job_at_the_same_instant():
    # Node 0: A1 (J1) and A2 (J2), priority 1, GPUs 0-1 and 2-3; node 1: L (J3, priority 0, GPUs 4-5), Y (J4, not
    # preemptible, GPUs 6-7, 2000 s). H (J9, priority 5, 4 GPUs) at 100: only node 0 can be freed: preempt A1, A2
    # (equal priority and start: by id), start H. A1, now the top-ranked blocked job, evicts L (priority 0 < 1)
    # and restarts on GPUs 4-5: 100 + 60 + 1000 = 1160. A2 finds nothing below priority 1 running. At 600 (H ends)
    # A2 restarts on 0-1 and L on 2-3: 600 + 60 + 1000 = 1660.
    jobs = [job(1, 0, 1000, 2, priority=1), job(2, 0, 1000, 2, priority=1), job(3, 0, 1000, 2),
            job(4, 0, 2000, 2, preemptible=False), job(9, 100, 500, 4, priority=5)]
    placed = ((0, 1, [0, 1]), (0, 2, [2, 3]), (0, 3, [4, 5]), (0, 4, [6, 7]))
    assert candidates(jobs, placed, 100, 9) == {0: (1, 2)}
    r = run(jobs, preemptive(), placed)
    assert r.at(100) == [("preempt", 1, ()), ("preempt", 2, ()), ("start", 9, (0, 1, 2, 3)),
                         ("preempt", 3, ()), ("start", 1, (4, 5))]
    rec = r.records
    assert times(rec[1]) == (0, 1160) and times(rec[2]) == (0, 1660) and times(rec[3]) == (0, 1660)
    assert rec[2].gpus == (0, 1) and rec[3].gpus == (2, 3)


# ---- what is never evicted ------------------------------------------------------------------------------------------
def test_an_equal_priority_or_non_preemptible_job_is_never_evicted_and_the_preemptor_waits():
    # Node 0: A (J1, priority 5, preemptible, 4 GPUs, 1000 s); node 1: B (J2, priority 0, not preemptible, 4 GPUs,
    # 2000 s). H (J9, priority 5, 4 GPUs, 500 s) at 100: A has its priority, B may not be preempted: no potential
    # victim. H waits for A's end: 1000-1500.
    jobs = [job(1, 0, 1000, 4, priority=5), job(2, 0, 2000, 4, preemptible=False), job(9, 100, 500, 4, priority=5)]
    placed = ((0, 1, [0, 1, 2, 3]), (0, 2, [4, 5, 6, 7]))
    assert candidates(jobs, placed, 100, 9) == {}
    r = run(jobs, preemptive(), placed)
    assert r.preempted == []
    rec = r.records
    assert times(rec[9]) == (1000, 1500) and times(rec[1]) == (0, 1000) and times(rec[2]) == (0, 2000)


def test_no_job_is_evicted_for_a_preemptor_that_would_still_not_fit():
    # Node 0: A (J1, priority 0, preemptible, 4 GPUs, 1000 s); node 1: B (J2, not preemptible, GPUs 4-5, 2000 s).
    # H (J9, priority 5, 8 GPUs: a gang) at 100: without A, 6 GPUs are free, not 8: no candidate, A runs on.
    # H starts when B ends: 2000-2500.
    jobs = [job(1, 0, 1000, 4), job(2, 0, 2000, 2, preemptible=False), job(9, 100, 500, 8, priority=5)]
    placed = ((0, 1, [0, 1, 2, 3]), (0, 2, [4, 5]))
    assert candidates(jobs, placed, 100, 9) == {}
    r = run(jobs, preemptive(), placed)
    assert r.preempted == []
    assert times(r.records[1]) == (0, 1000) and times(r.records[9]) == (2000, 2500)


# ---- gangs, restarts, composition -----------------------------------------------------------------------------------
def test_a_gang_larger_than_any_node_preempts_cluster_wide_and_a_multi_node_victim_frees_both_nodes():
    # A (J1, priority 1) on GPUs 0-1; M (J2, priority 0) on GPUs 2, 3 and 4 (across both nodes); 5-7 free.
    # H (J9, priority 5, 6 GPUs, 300 s) at 100 is larger than a node: one cluster-wide candidate. Remove A and M:
    # 8 free. Reprieve A first: GPUs 2-7 free, H fits, A stays; with M back only 5-7 are free: M is the victim.
    # First-fit's gang takes node 0's GPUs 2-3 and node 1's 4-7. H 100-400; M restarts at 400 on the first node
    # with 3 free GPUs (node 1: 4-6): 400 + 60 + 1000 = 1460.
    jobs = [job(1, 0, 1000, 2, priority=1), job(2, 0, 1000, 3), job(9, 100, 300, 6, priority=5)]
    placed = ((0, 1, [0, 1]), (0, 2, [2, 3, 4]))
    assert candidates(jobs, placed, 100, 9) == {None: (2,)}
    r = run(jobs, preemptive(), placed)
    assert r.at(100) == [("preempt", 2, ()), ("start", 9, (2, 3, 4, 5, 6, 7))]
    rec = r.records
    assert times(rec[9]) == (100, 400) and times(rec[1]) == (0, 1000)
    assert times(rec[2]) == (0, 1460) and rec[2].gpus == (4, 5, 6)


def test_the_victim_restarts_from_its_checkpoint_and_pays_the_overhead():
    # A (J1, priority 0, 4 GPUs, 1000 s, checkpoint every 300 s) on node 0; B (J2, not preemptible) fills node 1
    # until 3000. H (J9, priority 5, 4 GPUs, 500 s) at 400 preempts A: 400 s computed, 300 s kept, 100 s x 4 GPUs
    # = 400 GPU-s lost. H 400-900; A restarts at 900: 60 s overhead + 700 s left -> 1660; held 400 + 760 = 1160 s,
    # overhead 60 s x 4 GPUs = 240 GPU-s.
    jobs = [job(1, 0, 1000, 4, checkpoint_interval_s=300), job(2, 0, 3000, 4, preemptible=False),
            job(9, 400, 500, 4, priority=5)]
    r = run(jobs, preemptive(), ((0, 1, [0, 1, 2, 3]), (0, 2, [4, 5, 6, 7])))
    assert r.at(400) == [("preempt", 1, ()), ("start", 9, (0, 1, 2, 3))]
    rec = r.records
    assert times(rec[9]) == (400, 900) and times(rec[1]) == (0, 1660)
    i = rec[1].interruptions
    assert (i.preemptions, i.failures, i.held_s, i.lost_preemption_gpu_s, i.overhead_gpu_s) == (1, 0, 1160, 400, 240)
    m = summarize(r.sim.log())
    assert m["preemptions"] == 1 and m["lost_gpu_hours"] == pytest.approx(400 / 3600)
    assert m["restart_overhead_gpu_hours"] == pytest.approx(240 / 3600)


def test_easy_backfill_runs_first_then_the_blocked_head_preempts():
    # priority+easy/pack. A (J1, priority 0, preemptible) on node 0 until 1000; B (J2, not preemptible) on GPUs
    # 4-5 until 2000. At 100 H (J9, priority 5, 4 GPUs, 500 s) and S (J8, priority 0, not preemptible, 1 GPU, 50 s)
    # arrive. EASY reserves H at A's expected end, 1000; S ends by 150 <= 1000 and pack puts it on GPU 6: backfilled.
    # Then EASY waits; H, still blocked, preempts A (node 1 holds no preemptible job) and starts on node 0: 100-600.
    # S 100-150. A restarts at 600 (before, only GPUs 6-7 are free): 600 + 60 + 1000 = 1660.
    policy = Preemptive(Scheduler("priority+easy", make_order("priority"), "easy", get_placement_rule("pack")))
    assert isinstance(policy, Policy) and policy.name == "priority+easy" + PREEMPT_SUFFIX
    jobs = [job(1, 0, 1000, 4), job(2, 0, 2000, 2, preemptible=False), job(8, 100, 50, 1, preemptible=False),
            job(9, 100, 500, 4, priority=5)]
    r = run(jobs, policy, ((0, 1, [0, 1, 2, 3]), (0, 2, [4, 5])))
    assert r.at(100) == [("start", 8, (6,)), ("preempt", 1, ()), ("start", 9, (0, 1, 2, 3))]
    rec = r.records
    assert times(rec[8]) == (100, 150) and times(rec[9]) == (100, 600) and times(rec[1]) == (0, 1660)


# ---- property: every preemption makes room for a strictly more important job, at once -------------------------------
@st.composite
def preemption_workloads(draw) -> list[Job]:
    """2-14 jobs over 300 s: whole GPUs (up to the whole cluster) or half a GPU, priority classes 0-3, preemptible
    or not, with or without checkpoints, estimates exact or doubled."""
    out = []
    for job_id in range(draw(st.integers(2, 14))):
        runtime = float(draw(st.sampled_from([10, 50, 100, 300])))
        fractional = draw(st.integers(0, 4)) == 0
        out.append(Job(job_id, float(draw(st.integers(0, 300))), runtime, runtime * draw(st.sampled_from([1, 2])),
                       n_gpus=1 if fractional else draw(st.sampled_from([1, 1, 2, 3, 4, 6, 8])),
                       gpu_milli=500 if fractional else 1000, priority=draw(st.integers(0, 3)),
                       preemptible=draw(st.booleans()), checkpoint_interval_s=draw(st.sampled_from([0.0, 25.0]))))
    return out


@settings(max_examples=150, deadline=None)
@given(jobs=preemption_workloads(), order=st.sampled_from(["priority", "fcfs", "sjf"]),
       backfill=st.sampled_from(sorted(BACKFILL_DOCS)), placement=st.sampled_from(sorted(PLACEMENT_RULES)))
def test_every_preemption_lets_a_strictly_more_important_pending_job_start_at_that_instant(jobs, order, backfill,
                                                                                          placement):
    r = run(jobs, preemptive(order, backfill, placement))
    priority = {j.job_id: j.priority for j in jobs}
    for i, (t, action) in enumerate(r.actions):
        if isinstance(action, Preempt):
            start_s, started = next(((s, a) for s, a in r.actions[i + 1:] if isinstance(a, Start)), (None, None))
            assert start_s == t and priority[started.job_id] > priority[action.job_id]
