"""Partitions by hand on ``tiny`` (node 0 = a100-0, GPUs 0-3; node 1 = v100-0, GPUs 4-7), rigid runtimes.

``fast`` = node a100-0 (priority tier 1); ``slow`` = node v100-0 (max wall time 500 s, team b only); ``all`` =
both nodes, the default partition of jobs that name none.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from baselines import make
from envs.core import ActionRefused, Job, JobState, RefusalReason, RejectReason, RuntimeConfig
from envs.core.errors import ConfigError
from envs.core.governance import governance_from_dict
from envs.core.presets import cluster_from_dict
from envs.scenario import load_cluster
from envs.sim import Simulator, simulate

RIGID = RuntimeConfig.rigid()
PARTITIONS = [{"name": "fast", "groups": ["a100"], "priority_tier": 1},
              {"name": "slow", "nodes": ["v100-0"], "max_wall_s": 500, "allowed_teams": ["b"]},
              {"name": "all", "groups": ["a100", "v100"], "default": True}]


@pytest.fixture(scope="module")
def cluster():
    tiny = load_cluster("tiny")
    governance = governance_from_dict({"partitions": PARTITIONS}, tuple(n.name for n in tiny.nodes), "test")
    return dataclasses.replace(tiny, governance=governance)


def run(cluster, jobs, policy="fcfs"):
    log = simulate(cluster, jobs, make(policy), RIGID)
    assert sorted(r.job.job_id for r in log.records) == sorted(j.job_id for j in jobs)
    return {r.job.job_id: r for r in log.records}


def test_a_job_of_a_partition_waits_for_its_nodes_while_other_nodes_are_free(cluster):
    # J1 takes all of node 0 (fast) until 100; J2 (fast, 1 GPU) waits although node 1 is idle; J3 (no partition:
    # the default "all") starts at once on node 1.
    r = run(cluster, [Job(1, 0, 100, 100, n_gpus=4, partition="fast"), Job(2, 0, 10, 10, partition="fast"),
                      Job(3, 0, 10, 10)], "fcfs+easy/pack")
    assert r[2].start_time_s == 100 and r[2].gpus == (0,)
    assert r[3].start_time_s == 0 and r[3].gpus == (4,)


def test_easy_backfilling_respects_the_partition(cluster):
    # J1 (fast, 2 GPUs) runs until 100; the head J2 (fast, 4 GPUs) is reserved at 100 on node 0. J3 (fast, 1 GPU,
    # 1000 s) would delay that reservation on node 0 and may not use node 1: it waits until J2 ends at 150. Without
    # partitions J2 starts at once on node 1 and J3 beside J1 on node 0 (checked on the plain cluster).
    jobs = [Job(1, 0, 100, 100, n_gpus=2, partition="fast"), Job(2, 1, 50, 50, n_gpus=4, partition="fast"),
            Job(3, 2, 1000, 1000, partition="fast")]
    r = run(cluster, jobs, "fcfs+easy/pack")
    assert (r[2].start_time_s, r[3].start_time_s) == (100, 150)
    assert all(g < 4 for rec in r.values() for g in rec.gpus)
    plain = run(load_cluster("tiny"), [dataclasses.replace(j, partition="") for j in jobs], "fcfs+easy/pack")
    assert (plain[2].start_time_s, plain[3].start_time_s) == (1, 2) and plain[2].gpus == (4, 5, 6, 7)


def test_submission_checks_reject_with_reasons(cluster):
    r = run(cluster, [Job(1, 0, 10, 10, partition="gpu"), Job(2, 0, 10, 10, partition="slow", team="a"),
                      Job(3, 0, 10, 600, partition="slow", team="b"), Job(4, 0, 10, 10, partition="slow", team="b"),
                      Job(5, 0, 10, 10, n_gpus=5, partition="fast")])
    assert r[1].reject_reason is RejectReason.UNKNOWN_PARTITION
    assert r[2].reject_reason is RejectReason.PARTITION_ACCESS
    assert r[3].reject_reason is RejectReason.PARTITION_TIME_LIMIT
    assert r[4].state is JobState.COMPLETED and r[4].gpus == (4,)
    assert r[5].reject_reason is RejectReason.TOO_MANY_GPUS  # fast has 4 GPUs


def test_higher_priority_tier_goes_first(cluster):
    # J0 (fast) holds GPU 0 until 10; J1 (default partition, 4 GPUs) and J2 (fast, 4 GPUs) arrive at 1. FIFO alone
    # would start J1 on node 1 at 1 and J2 at 10; with tiers J2 (tier 1) is considered first: it does not fit node 0
    # until 10, and FIFO without backfill blocks behind it, so J1 waits too; at 10 J2 takes node 0 and J1 node 1.
    r = run(cluster, [Job(0, 0, 10, 10, partition="fast"), Job(1, 1, 10, 10, n_gpus=4),
                      Job(2, 1, 10, 10, n_gpus=4, partition="fast")])
    assert (r[2].start_time_s, r[1].start_time_s) == (10, 10)
    assert r[2].gpus == (0, 1, 2, 3) and r[1].gpus == (4, 5, 6, 7)


def test_a_start_outside_the_partition_is_refused(cluster):
    sim = Simulator(cluster, [Job(1, 0, 10, 10, partition="fast")], RIGID)
    with pytest.raises(ActionRefused) as info:
        sim.start(1, [4])
    assert info.value.reason is RefusalReason.PARTITION


def test_partitions_in_a_preset_and_their_errors():
    preset = {"name": "p", "node_groups": [{"name": "a", "count": 2, "gpu_type": "V100", "gpus": 2}],
              "partitions": [{"name": "one", "nodes": ["a-1"]}]}
    cluster = cluster_from_dict(preset)
    assert np.array_equal(cluster.eligible_nodes(frozenset(), 0.0, "one"), [False, True])
    assert np.array_equal(cluster.eligible_nodes(frozenset(), 0.0, ""), [True, True])  # no default: anywhere
    with pytest.raises(ConfigError, match=r"partitions\[0\].nodes: no node is named 'a-9'"):
        cluster_from_dict(preset | {"partitions": [{"name": "x", "nodes": ["a-9"]}]})
    with pytest.raises(ConfigError, match=r"partitions\[0\].max_walls: unknown key"):
        cluster_from_dict(preset | {"partitions": [{"name": "x", "nodes": ["a-0"], "max_walls": 3}]})
