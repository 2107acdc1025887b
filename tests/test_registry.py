"""Policy names: the ORDER[+BACKFILL][/PLACEMENT] grammar, the rls: prefix and the catalogue."""

from __future__ import annotations

import subprocess
import sys

import pytest

from baselines import Scheduler, make, parse
from envs.core import ConfigError, Job, RuntimeConfig
from envs.scenario import load_cluster
from envs.sim import simulate


@pytest.mark.parametrize(
    ("name", "parts"),
    [
        ("fcfs", ("fcfs", "none", "firstfit")),
        ("SJF+EASY", ("sjf", "easy", "firstfit")),
        ("fairshare+conservative/topology", ("fairshare", "conservative", "topology")),
        ("wfp3/pack", ("wfp3", "none", "pack")),
    ],
)
def test_names_parse_with_defaults(name, parts):
    assert parse(name) == parts
    policy = make(name)
    assert isinstance(policy, Scheduler) and policy.backfill == parts[1]


@pytest.mark.parametrize(("name", "bad"), [("sjff", "order"), ("sjf+eazy", "backfilling"), ("sjf/packk", "placement")])
def test_unknown_parts_are_errors_naming_them(name, bad):
    with pytest.raises(ConfigError, match=bad):
        make(name)


def test_rls_names_give_peer_policies():
    choose, backfill = make("rls:wfp3-peer+rlsbackfill")
    assert callable(choose) and backfill is True
    with pytest.raises(ConfigError):
        make("rls:nope")


def test_order_parameters_reach_the_order():
    policy = make("fairshare", half_life_s=3600.0)
    assert policy.name == "fairshare"
    with pytest.raises(ConfigError):
        make("fcfs", half_life_s=3600.0)


def test_every_registered_combination_runs_a_small_workload():
    cluster = load_cluster("tiny")
    jobs = [Job(i, float(3 * i), 10.0 + i, 20.0 + i, n_gpus=1 + i % 4, user=f"u{i % 3}") for i in range(12)]
    from baselines.orders import ORDER_DOCS

    for order in ORDER_DOCS:
        log = simulate(cluster, jobs, make(f"{order}+easy/pack"), RuntimeConfig.rigid())
        assert len(log.completed()) == len(jobs)


def test_python_m_baselines_lists_every_part():
    out = subprocess.run([sys.executable, "-m", "baselines"], capture_output=True, text=True, check=True).stdout
    for word in ("fcfs", "multifactor", "conservative", "topology", "fragmentation", "rlsbackfill", "wfp3-peer"):
        assert word in out
