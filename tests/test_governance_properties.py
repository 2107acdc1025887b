"""Quotas and partitions under random clusters, workloads and policies: no holding ever exceeds its quota, no job
runs outside its partition, every job ends exactly once, and the random driver's arbitrary starts are refused
without effect when they break either. Quota holdings are recounted from the running jobs at every step,
independently of the simulator's ledger."""

from __future__ import annotations

import contextlib
import dataclasses
import random
from collections import Counter

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import clusters, drive, run_checked, workloads

from envs.core import ActionRefused, ClusterSpec, Job, RuntimeConfig
from envs.core.governance import governance_from_dict
from envs.sim import Simulator

TEAMS = ("x", "y", "z")
POLICIES = ("fcfs", "sjf+easy/pack", "fairtree+conservative/topology", "priority+easy/pack+preempt",
            "k8s:mostallocated+preempt", "tiresias")


@st.composite
def governed(draw) -> tuple[ClusterSpec, list[Job]]:
    """A random cluster with random partitions (some overlapping), hard limits and Kueue queues, and a workload
    whose jobs name those partitions (or none) and belong to three teams."""
    cluster = draw(clusters())
    names = tuple(n.name for n in cluster.nodes)
    partitions = []
    for i in range(draw(st.integers(0, 3))):
        nodes = draw(st.sets(st.sampled_from(names), min_size=1))
        partitions.append({"name": f"p{i}", "nodes": sorted(nodes), "priority_tier": draw(st.integers(0, 2)),
                           "max_wall_s": draw(st.sampled_from([1e9, 200.0]))})
    limits = {t: draw(st.sampled_from([1, 2, 4, 8])) for t in draw(st.sets(st.sampled_from(TEAMS)))}
    queues = {t: {"nominal_gpus": draw(st.sampled_from([1, 2, 4])), "cohort": draw(st.sampled_from(["c", "c", ""])),
                  "borrowing_limit_gpus": draw(st.sampled_from([0, 2, float("inf")]))}
              for t in draw(st.sets(st.sampled_from(TEAMS)))}
    governance = governance_from_dict({"partitions": partitions, "quotas": {"limits": {"teams": limits},
                                                                            "queues": queues}}, names, "random")
    jobs = [dataclasses.replace(j, team=draw(st.sampled_from(TEAMS)), priority=draw(st.integers(0, 2)),
                                preemptible=draw(st.booleans()),
                                partition=draw(st.sampled_from(["", *(p["name"] for p in partitions)])))
            for j in draw(workloads())]
    return dataclasses.replace(cluster, governance=governance), jobs


def quota_breaches(sim: Simulator) -> list[str]:
    """Holdings recounted from the running jobs, against every limit, queue cap and cohort quota."""
    quotas = sim.cluster.governance.quotas
    held: Counter[str] = Counter()
    for running in sim.view.running.values():
        held[running.job.team] += running.job.n_gpus * running.job.gpu_milli
    found = [f"team {t} holds {held[t]} > {cap}" for t, cap in quotas.team_limits.items() if held[t] > cap * 1000]
    cohorts: Counter[str] = Counter()
    nominal: Counter[str] = Counter()
    for team, queue in quotas.queues.items():
        if held[team] > (queue.nominal_gpus + queue.borrowing_limit_gpus) * 1000:
            found.append(f"queue {team} holds {held[team]} above nominal + borrowing limit")
        cohort = queue.cohort or f"alone-{team}"
        cohorts[cohort] += held[team]
        nominal[cohort] += queue.nominal_gpus * 1000
    found += [f"cohort {c} holds {cohorts[c]} > {nominal[c]}" for c in cohorts if cohorts[c] > nominal[c]]
    return found


def partition_breaches(sim: Simulator) -> list[str]:
    c = sim.cluster
    found = []
    for running in sim.view.running.values():
        inside = c.partition_nodes(running.job.partition)
        if not inside[c.gpu_node[np.asarray(running.gpus)]].all():
            found.append(f"job {running.job.job_id} runs outside partition {running.job.partition!r}")
    return found


@settings(max_examples=40, deadline=None)
@given(governed(), st.sampled_from(POLICIES))
def test_policies_never_break_a_quota_or_a_partition(case, name):
    cluster, jobs = case
    found = run_checked(cluster, jobs, name, RuntimeConfig(), lambda sim: quota_breaches(sim) + partition_breaches(sim))
    assert found == []


@settings(max_examples=40, deadline=None)
@given(governed(), st.integers(0, 2**31 - 1))
def test_arbitrary_starts_are_refused_when_they_break_a_quota_or_a_partition(case, seed):
    cluster, jobs = case
    log, found = drive(cluster, jobs, seed)
    assert found == [] and log.quota_violations == 0
    assert sorted(r.job.job_id for r in log.records) == sorted(j.job_id for j in jobs)
    rng = random.Random(seed)
    sim = Simulator(cluster, jobs, RuntimeConfig())  # replay a few random steps, recounting after each
    for _ in range(30):
        if sim.done:
            break
        for job in list(sim.view.pending.values()):
            gpus = sorted(rng.sample(range(cluster.n_gpus), min(job.n_gpus, cluster.n_gpus)))
            with contextlib.suppress(ActionRefused):  # refusals are the point: nothing may change
                sim.start(job.job_id, gpus)
        assert quota_breaches(sim) + partition_breaches(sim) == []
        if not sim.events_left:
            break  # random GPUs started nothing and nothing else can happen
        sim.wait()
