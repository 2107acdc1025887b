"""Invariants of the simulator over random clusters, workloads and random (valid and invalid) actions (SPEC §11)."""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import any_dynamics, any_runtime, clusters, drive, large_cluster, large_workload, workloads


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cluster=clusters(), jobs=workloads(), seed=st.integers(0, 2**16))
def test_random_actions_keep_every_invariant(cluster, jobs, seed):
    assert drive(cluster, jobs, seed)[1] == []


@settings(max_examples=40, deadline=None)
@given(cluster=clusters(), jobs=workloads(), seed=st.integers(0, 2**16))
def test_same_seed_gives_same_log(cluster, jobs, seed):
    assert drive(cluster, jobs, seed, check=False) == drive(cluster, jobs, seed, check=False)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1))
def test_random_actions_keep_every_invariant_at_scale(seed):
    # up to 64 nodes of mixed sizes and 300 jobs, every runtime-model switch and kill_at_walltime on or off
    rng = random.Random(seed)
    cluster, jobs, runtime = large_cluster(rng), large_workload(rng), any_runtime(rng)
    log, found = drive(cluster, jobs, seed, runtime, check=False)
    assert found == []
    assert drive(cluster, jobs, seed, runtime, check=False)[0] == log  # the same seed, the same run


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1))
def test_failures_outages_and_preemptions_keep_every_invariant(seed):
    # the same large scenarios with random failures, repairs, outages and preemptions: nothing over-allocated, a
    # failed GPU holds nothing, every job ends exactly once, GPU-seconds and (rigid model) work conserved
    rng = random.Random(seed)
    cluster, jobs, runtime = large_cluster(rng), large_workload(rng), any_runtime(rng)
    dynamics = any_dynamics(rng, cluster)
    log, found = drive(cluster, jobs, seed, runtime, check=True, dynamics=dynamics)
    assert found == []
    assert drive(cluster, jobs, seed, runtime, check=False, dynamics=dynamics)[0] == log  # the same seed, same log


def test_every_invariant_is_checked_after_every_action_on_one_large_scenario():
    rng = random.Random(20261201)
    assert drive(large_cluster(rng), large_workload(rng), 1, any_runtime(rng))[1] == []
