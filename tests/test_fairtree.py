"""Fair Tree (Slurm's default fair-share algorithm): hand-computed Level Fairshares and rankings, the three tie
rules of Slurm's fair_tree.html, the multifactor composition, a run on ``tiny`` and the config errors.

LF = S / U among siblings (S = shares / siblings' shares, U = usage / siblings' usage, inf without usage); users
are ranked in a depth-first walk with children by LF descending, rank counting down from the number of users n,
factor = rank / n. Every expected value is worked out in the comment beside it.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from baselines.fairtree import AccountTree, Association, FairTree, association_tree, fair_tree_factors
from baselines.orders import FairShareOrder, FairTreeOrder, MultifactorOrder, make_order
from baselines.registry import make
from envs.core import ConfigError, Job, RuntimeConfig
from envs.core.presets import cluster_from_dict
from envs.scenario import load_cluster
from envs.sim import Simulator, simulate

RIGID = RuntimeConfig.rigid()
ONE_NODE = cluster_from_dict({"name": "one", "node_groups": [{"count": 1, "gpu_type": "A100-40GB", "gpus": 8}]})


def factors(accounts: dict, user_accounts: dict[str, str], usage: dict[str, float],
            users: dict | None = None) -> dict[str, float]:
    return fair_tree_factors(AccountTree.from_config(accounts, users), user_accounts, usage)


def ids(jobs: list[Job]) -> list[int]:
    return [j.job_id for j in jobs]


# ---- the ranking, by hand -------------------------------------------------------------------------------------
def test_two_level_tree_ranks_every_user_of_the_better_served_account_first():
    # root -> A (1 share), B (1 share); A -> a1, a2; B -> b1 (1 share each). Usage a1 30, a2 10, b1 60.
    # root level: A 40, B 60 of 100; S = 1/2 each: LF_A = 0.5 / 0.4 = 1.25 > LF_B = 0.5 / 0.6 = 0.833.
    # A: LF_a1 = 0.5 / (30/40) = 0.667, LF_a2 = 0.5 / (10/40) = 2: a2, then a1.  B: LF_b1 = 1 / 1 = 1.
    # Walk: a2 (rank 3), a1 (2), b1 (1); n = 3.
    root = association_tree(AccountTree.from_config({"A": {}, "B": {}}), {"a1": "A", "a2": "A", "b1": "B"},
                            {"a1": 30.0, "a2": 10.0, "b1": 60.0})
    level_fs = {n.name: n.level_fs for n in walk(root)}
    assert level_fs == pytest.approx({"root": math.inf, "A": 1.25, "B": 0.5 / 0.6, "a1": 2 / 3, "a2": 2.0, "b1": 1.0})
    assert factors({"A": {"shares": 1}, "B": {"shares": 1}}, {"a1": "A", "a2": "A", "b1": "B"},
                   {"a1": 30.0, "a2": 10.0, "b1": 60.0}) == {"a2": 1.0, "a1": 2 / 3, "b1": 1 / 3}


def test_deeper_tree_with_account_and_user_shares():
    # root -> ml (2), ops (1); ml -> vision (1), nlp (3); users v1 (vision), n1 (2 shares), n2 (nlp), o1 (ops).
    # Usage v1 10, n1 40, n2 30, o1 20 (ml 80, ops 20 of 100).
    # root: LF_ml = (2/3) / 0.8 = 0.833 < LF_ops = (1/3) / 0.2 = 1.667: ops first; o1 (LF 1) rank 4.
    # ml: LF_vision = (1/4) / (10/80) = 2 > LF_nlp = (3/4) / (70/80) = 0.857: v1 rank 3.
    # nlp: LF_n1 = (2/3) / (40/70) = 7/6 > LF_n2 = (1/3) / (30/70) = 7/9: n1 rank 2, n2 rank 1; n = 4.
    accounts = {"ml": {"shares": 2}, "ops": {"shares": 1, "parent": "root"}, "vision": {"parent": "ml"},
                "nlp": {"shares": 3, "parent": "ml"}}
    assert factors(accounts, {"v1": "vision", "n1": "nlp", "n2": "nlp", "o1": "ops"},
                   {"v1": 10.0, "n1": 40.0, "n2": 30.0, "o1": 20.0}, users={"n1": 2}) == {
        "o1": 1.0, "v1": 0.75, "n1": 0.5, "n2": 0.25}


def test_unconfigured_teams_join_root_with_one_share_and_empty_accounts_still_count():
    # "big" (3 shares, no users) and the unconfigured teams x, y (1 share each) under root; usage x1 10, y1 30.
    # root: S_big = 3/5 with no usage -> LF inf (first, but it ranks nobody); LF_x = 0.2 / 0.25 = 0.8,
    # LF_y = 0.2 / 0.75 = 0.267: x1 rank 2 (n = 2, not tied with big: inf != 0.8), y1 rank 1.
    assert factors({"big": {"shares": 3}}, {"x1": "x", "y1": "y"}, {"x1": 10.0, "y1": 30.0}) == {"x1": 1.0, "y1": 0.5}
    # With equal shares (no "big") the classic order would be the same here; the empty account only shifts S.
    assert factors({}, {"x1": "x", "y1": "y"}, {"x1": 10.0, "y1": 30.0}) == {"x1": 1.0, "y1": 0.5}


def test_without_any_usage_every_user_gets_one():
    # Every LF is inf: all siblings tie at every level, so every user shares the top rank n / n.
    assert factors({"lab": {}, "A": {"parent": "lab"}}, {"a": "A", "b": "B", "c": "lab"}, {}) == {
        "a": 1.0, "b": 1.0, "c": 1.0}
    assert factors({}, {}, {}) == {}


# ---- ties (fair_tree.html, "Ties") ----------------------------------------------------------------------------
def test_sibling_users_with_equal_level_fairshare_share_a_rank():
    # A -> a1 10, a2 10, a3 0, a4 30 (S = 1/4 each, A's usage 50): LF a3 inf, a1 = a2 = 0.25 / 0.2 = 1.25,
    # a4 = 0.25 / 0.6 = 0.417. a3 rank 4; a1 and a2 tie at rank 3; a4 gets the rank without ties, 1 (not 2).
    assert factors({}, {"a1": "A", "a2": "A", "a3": "A", "a4": "A"}, {"a1": 10.0, "a2": 10.0, "a4": 30.0}) == {
        "a3": 1.0, "a1": 0.75, "a2": 0.75, "a4": 0.25}


def test_user_tied_with_a_sibling_account_shares_the_rank_of_its_top_user():
    # root -> ml, other; ml -> user m1 and account vision; vision -> v1, v2; other -> o1. Usage m1 10, v1 10.
    # root: other has no usage (inf) > ml: o1 rank 4. ml: LF_m1 = 0.5 / 0.5 = 1 = LF_vision: a tie, the user
    # first: m1 rank 3. vision starts tied: v2 (no usage, inf) keeps rank 3; v1 (LF 0.5 / 1 = 0.5) gets 1.
    assert factors({"ml": {}, "vision": {"parent": "ml"}, "other": {}},
                   {"m1": "ml", "v1": "vision", "v2": "vision", "o1": "other"}, {"m1": 10.0, "v1": 10.0}) == {
        "o1": 1.0, "m1": 0.75, "v2": 0.75, "v1": 0.25}


def test_sibling_accounts_with_equal_level_fairshare_have_their_children_merged():
    # root -> A, B, 1 share each, both used 20: LF_A = LF_B = 1, so their children are merged and sorted together,
    # each child keeping its LF among its own siblings: A -> a1 10, a2 10, a3 0: LF 1/3 / 1/2 = 2/3, 2/3, inf;
    # B -> b1 20: LF 1. Merged: a3 (inf) rank 4, b1 (1) rank 3, a1 and a2 (2/3, tied) rank 2; n = 4.
    # (Without the merge, as Slurm's fair_tree.c does it, A's users would come first: a3 4, a1 3, a2 3, b1 3.)
    assert factors({"A": {}, "B": {}}, {"a1": "A", "a2": "A", "a3": "A", "b1": "B"},
                   {"a1": 10.0, "a2": 10.0, "b1": 20.0}) == {"a3": 1.0, "b1": 0.75, "a1": 0.5, "a2": 0.5}


def walk(node: Association):
    yield node
    for child in node.children:
        yield from walk(child)


def users_under(node: Association) -> list[str]:
    return [n.name for n in walk(node) if n.is_user]


@settings(max_examples=200, deadline=None)
@given(parents=st.lists(st.integers(0, 5), min_size=1, max_size=6),
       placement=st.lists(st.tuples(st.integers(0, 5), st.sampled_from([0.0, 1.0, 2.0, 5.0])), min_size=1,
                          max_size=10),
       shares=st.lists(st.sampled_from([1, 2, 3]), min_size=6, max_size=6))
def test_a_better_served_sibling_never_ranks_any_user_below_the_other(parents, placement, shares):
    # The promise of fair_tree.html: if siblings X and Y have LF_X > LF_Y, every user of X ranks at least as high as
    # every user of Y (ties are allowed). Account k's parent is an earlier account (or root), so no cycle.
    names = [f"acct{k}" for k in range(len(parents))]
    accounts = {name: {"shares": shares[k], "parent": "root" if k == 0 or parents[k] >= k else names[parents[k]]}
                for k, name in enumerate(names)}
    user_accounts = {f"u{i}": names[min(k, len(names) - 1)] for i, (k, _) in enumerate(placement)}
    usage = {f"u{i}": used for i, (_, used) in enumerate(placement)}
    tree = AccountTree.from_config(accounts)
    got = fair_tree_factors(tree, user_accounts, usage)
    assert set(got) == set(user_accounts) and all(0 < f <= 1 for f in got.values()) and max(got.values()) == 1.0
    for node in walk(association_tree(tree, user_accounts, usage)):
        for x in node.children:
            for y in node.children:
                if x.level_fs > y.level_fs and users_under(x) and users_under(y):
                    assert min(got[u] for u in users_under(x)) >= max(got[u] for u in users_under(y))


# ---- in the simulator ---------------------------------------------------------------------------------------------
def team_history() -> Simulator:
    """No-decay usage at t = 1000: a1 (team A) 4 GPUs and a2 (team A) 1 GPU over 0-1000, b1 (team B) 2 GPUs over
    0-1000; one 1-GPU job each of a1, a2, b1 and c1 (team C, nothing used) waits from 500 (ids 11, 12, 13, 14)."""
    jobs = [Job(1, 0, 1000, 1000, n_gpus=4, user="a1", team="A"), Job(2, 0, 1000, 1000, user="a2", team="A"),
            Job(3, 0, 1000, 1000, n_gpus=2, user="b1", team="B"),
            Job(11, 500, 10, 10, user="a1", team="A"), Job(12, 500, 10, 10, user="a2", team="A"),
            Job(13, 500, 10, 10, user="b1", team="B"), Job(14, 500, 10, 10, user="c1", team="C")]
    sim = Simulator(ONE_NODE, jobs, RIGID)
    sim.start(1, [0, 1, 2, 3])
    sim.start(2, [4])
    sim.start(3, [5, 6])
    while sim.time_s < 1000:
        sim.wait()
    return sim


def test_order_ranks_teams_first_then_users_within_them():
    # Usage a1 4000, a2 1000, b1 2000, c1 0 GPU-s; teams A 5000, B 2000, C 0 under root, S = 1/3 each:
    # LF_C = inf > LF_B = (1/3) / (2/7) = 7/6 > LF_A = (1/3) / (5/7) = 7/15. c1 rank 4, b1 rank 3; in A,
    # LF_a2 = 0.5 / 0.2 = 2.5 > LF_a1 = 0.5 / 0.8 = 0.625: a2 rank 2, a1 rank 1.
    view = team_history().view
    order = make_order("fairtree", half_life_s=math.inf)
    assert order.fair_share.factors(view) == {"c1": 1.0, "b1": 0.75, "a2": 0.5, "a1": 0.25}
    assert ids(order.rank(view)) == [14, 13, 12, 11]
    # Classic fair share by user ranks a2 (1000 GPU-s) before b1 (2000): it does not see the teams.
    assert ids(FairShareOrder(half_life_s=math.inf).rank(view)) == [14, 12, 13, 11]


def test_decay_half_life_changes_the_ranking():
    # Team A's user a ran 8 GPUs over 0-1000, team B's user b 1 GPU over 9000-10000; a2/b2 jobs wait at 10000.
    # No decay: A 8000 > B 1000 GPU-s -> LF_B > LF_A: b first (1.0), a 0.5.
    # h = 1000 s: A 8 x (2^-9 - 2^-10) = 1/128 < B 1 x (1 - 2^-1) = 64/128 (units of h/ln 2): a first.
    jobs = [Job(1, 0, 1000, 1000, n_gpus=8, user="a", team="A"), Job(2, 9000, 1000, 1000, user="b", team="B"),
            Job(3, 9500, 10, 10, user="b", team="B"), Job(4, 9500, 10, 10, user="a", team="A")]
    sim = Simulator(ONE_NODE, jobs, RIGID)
    sim.start(1, list(range(8)))
    while sim.time_s < 9000:
        sim.wait()
    sim.start(2, [0])
    while sim.time_s < 10_000:
        sim.wait()
    no_decay, decayed = FairTreeOrder(half_life_s=math.inf), FairTreeOrder(half_life_s=1000.0)
    assert no_decay.fair_share.factors(sim.view) == {"b": 1.0, "a": 0.5}
    assert decayed.fair_share.factors(sim.view) == {"a": 1.0, "b": 0.5}
    assert ids(no_decay.rank(sim.view)) == [3, 4] and ids(decayed.rank(sim.view)) == [4, 3]


def test_fair_tree_run_on_tiny_starts_jobs_in_tree_order():
    # tiny: 8 GPUs. Every job takes all 8 for 100 s. J1 (a1, team A) runs 0-100; J2 (a2, A), J3 (b1, B), J4 (c1,
    # team C, not configured) wait from 10. A and B are under "lab"; C joins root. No decay.
    # t = 100, usage a1 800: root: lab (S 1/2, U 1) LF 0.5 < C (no usage) inf -> c1 first: J4 100-200.
    # t = 200, usage a1 800, c1 800: lab and C tie (LF 1) -> merged: B (inf, in lab), c1 (1), A (0.5): b1 first,
    # J3 200-300, then J2 300-400. FCFS would run J2, J3, J4 in id order.
    jobs = [Job(1, 0, 100, 100, n_gpus=8, user="a1", team="A"), Job(2, 10, 100, 100, n_gpus=8, user="a2", team="A"),
            Job(3, 10, 100, 100, n_gpus=8, user="b1", team="B"), Job(4, 10, 100, 100, n_gpus=8, user="c1", team="C")]
    accounts = {"lab": {}, "A": {"parent": "lab"}, "B": {"parent": "lab"}}

    def starts(policy) -> dict[int, float]:
        return {r.job.job_id: r.start_time_s for r in simulate(load_cluster("tiny"), jobs, policy, RIGID).completed()}

    assert starts(make("fairtree+easy", accounts=accounts, half_life_s=math.inf)) == {1: 0, 4: 100, 3: 200, 2: 300}
    assert starts(make("fcfs")) == {1: 0, 2: 100, 3: 200, 4: 300}


def test_tracker_starts_over_on_a_new_run():
    # The same FairTree asked on a fresh simulator forgets the first run's users and usage.
    tracker = FairTree(half_life_s=math.inf)
    assert tracker.factors(team_history().view) == {"c1": 1.0, "b1": 0.75, "a2": 0.5, "a1": 0.25}
    sim = Simulator(ONE_NODE, [Job(1, 0, 10, 10, user="z", team="Z")], RIGID)
    assert tracker.factors(sim.view) == {"z": 1.0}


# ---- multifactor with Fair Tree ------------------------------------------------------------------------------------
def test_multifactor_takes_its_fair_share_factor_from_fair_tree():
    # The team history at t = 1000 with fair share 10000 and size 1000 only: 1-GPU jobs on 8 GPUs add 125.
    #   14 (c1): 10000 + 125;  13 (b1): 7500 + 125;  12 (a2): 5000 + 125;  11 (a1): 2500 + 125.
    view = team_history().view
    weights = {"w_age": 0, "w_qos": 0, "half_life_s": math.inf}
    tree = make_order("multifactor", fairshare="fairtree", **weights)
    assert tree.priorities(view) == pytest.approx({14: 10125, 13: 7625, 12: 5125, 11: 2625})
    assert ids(tree.rank(view)) == [14, 13, 12, 11]
    # The default stays classic: F_c1 = 1 > F_a2 > F_b1 > F_a1 (2^(-U/S) with S = 1/4).
    classic = make_order("multifactor", **weights)
    assert ids(classic.rank(view)) == [14, 12, 13, 11]
    assert classic.priorities(view)[12] == pytest.approx(10_000 * 2 ** (-(1000 / 7000) / 0.25) + 125)


# ---- config errors -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"accounts": {"A": {"parent": "B"}}}, r"accounts\['A'\]: parent: unknown account 'B'"),
        ({"accounts": {"A": {"parent": "B"}, "B": {"parent": "A"}}}, r"accounts\['A'\]: parent: cycle A -> B -> A"),
        ({"accounts": {"A": {"parent": "A"}}}, r"accounts\['A'\]: parent: cycle A -> A"),
        ({"accounts": {"A": {"shares": 0}}}, r"accounts\['A'\]: shares: must be a finite number > 0, got 0"),
        ({"accounts": {"A": {"shares": -1}}}, r"accounts\['A'\]: shares"),
        ({"accounts": {"A": {"shares": math.inf}}}, r"accounts\['A'\]: shares"),
        ({"accounts": {"A": {"shares": True}}}, r"accounts\['A'\]: shares"),
        ({"accounts": {"A": {"share": 2}}}, r"accounts\['A'\]: unknown key\(s\) 'share' \(known: shares, parent\)"),
        ({"accounts": {"root": {}}}, r"accounts\['root'\]: an account name"),
        ({"accounts": {"A": 2}}, r"accounts\['A'\]: must be a mapping"),
        ({"accounts": ["A"]}, r"accounts: must be a mapping"),
        ({"users": {"u": 0}}, r"users\['u'\]: must be a finite number > 0"),
    ],
)
def test_fairtree_config_errors_name_the_key(params, message):
    with pytest.raises(ConfigError, match=r"order 'fairtree': " + message):
        make_order("fairtree", **params)
    with pytest.raises(ConfigError, match=r"half_life_s: must be > 0"):
        make_order("fairtree", half_life_s=0)


def test_multifactor_rejects_settings_of_the_other_fair_share():
    with pytest.raises(ConfigError, match=r"order 'multifactor': fairshare: must be one of classic, fairtree"):
        make_order("multifactor", fairshare="tree")
    with pytest.raises(ConfigError, match=r"order 'multifactor': accounts, users: only with fairshare='fairtree'"):
        make_order("multifactor", accounts={"A": {}})
    with pytest.raises(ConfigError, match=r"order 'multifactor': by, shares, default_share: only with"):
        make_order("multifactor", fairshare="fairtree", shares={"u": 2})
    with pytest.raises(ConfigError, match=r"order 'multifactor': accounts\['A'\]: parent: unknown account 'X'"):
        make_order("multifactor", fairshare="fairtree", accounts={"A": {"parent": "X"}})
    with pytest.raises(ConfigError, match=r"order 'fairtree': unknown parameter\(s\) shares"):
        make_order("fairtree", shares={"u": 2})
    assert isinstance(MultifactorOrder(fairshare="fairtree").fair_share, FairTree)
