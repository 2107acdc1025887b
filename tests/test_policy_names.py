"""Policy names: the ORDER[+BACKFILL][/PLACEMENT] grammar, the rls: prefix, every documented name run once, and
the catalogue."""

from __future__ import annotations

import subprocess
import sys

import pytest

from baselines import Scheduler, make, parse
from baselines.backfill import BACKFILL_DOCS
from baselines.kubernetes import KUBE_DOCS, KUBE_PREFIX
from baselines.orders import ORDER_DOCS
from baselines.rls import RLS_ORDERS
from envs.core import ConfigError, Job, RuntimeConfig
from envs.peer.engine import run_sequence
from envs.peer.swf import PeerJob, PeerMachine
from envs.placement import PLACEMENT_DOCS
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


POLICY_NAMES = ([f"{order}+easy/pack" for order in ORDER_DOCS] + [f"fcfs+{mode}" for mode in BACKFILL_DOCS]
                + [f"sjf/{rule}" for rule in PLACEMENT_DOCS] + [f"{KUBE_PREFIX}{name}" for name in KUBE_DOCS])
"""Every order, backfilling mode, placement rule and Kubernetes profile the registries document, each in a policy
name."""

PEER_POLICY_NAMES = ([f"rls:{order}" for order in RLS_ORDERS] + [f"rls:{order}+rlsbackfill" for order in RLS_ORDERS]
                     + ["rls:sjf/f1@0.5", "rls:f1/sjf@0.5+rlsbackfill"])
"""Every peer-compatible order, with and without the peer's backfill, and two-stage orders."""

# Two one-processor nodes; job 1 fills both until 100, the others (1 or 2 processors) queue behind it.
PEER_JOBS = [PeerJob(1, 0, 100, 100, 2), PeerJob(2, 10, 50, 60, 1), PeerJob(3, 20, 10, 20, 1),
             PeerJob(4, 30, 200, 250, 2), PeerJob(5, 40, 5, 10, 1)]


@pytest.mark.parametrize("name", POLICY_NAMES)
def test_every_documented_policy_runs_a_small_workload(name):
    cluster = load_cluster("tiny")
    jobs = [Job(i, float(3 * i), 10.0 + i, 20.0 + i, n_gpus=1 + i % 4, user=f"u{i % 3}") for i in range(12)]
    log = simulate(cluster, jobs, make(name), RuntimeConfig.rigid())
    assert len(log.completed()) == len(jobs)


@pytest.mark.parametrize("name", PEER_POLICY_NAMES)
def test_every_documented_peer_policy_schedules_every_job(name):
    choose, backfill = make(name)
    result = run_sequence(PEER_JOBS, PeerMachine(nodes=2, procs_per_node=1.0), choose, backfill)
    assert sorted(result.start_order) == list(range(len(PEER_JOBS)))
    assert all(start >= job.submit for start, job in zip(result.start_times, PEER_JOBS, strict=True))


def test_python_m_baselines_lists_every_part():
    out = subprocess.run([sys.executable, "-m", "baselines"], capture_output=True, text=True, check=True).stdout
    for word in ("fcfs", "multifactor", "fairtree", "conservative", "topology", "fragmentation", "rlsbackfill",
                 "wfp3-peer", "k8s:NAME", "mostallocated"):
        assert word in out
