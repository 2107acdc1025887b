"""Every schedule of the heuristic families that speed-ups touch is bit-identical to the recorded one
(``tests/data/golden/schedule_digests.json``, written by ``benchmarks/schedule_digests.py --write`` when a schedule
is meant to change), and the digest itself tells schedules apart."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
from paths import ROOT

from baselines.registry import make
from envs.scenario import scenario
from envs.sim.loop import simulate
from evaluation.digests import run_digest, schedule_digest

GOLDEN = json.loads((ROOT / "tests" / "data" / "golden" / "schedule_digests.json").read_text())


@pytest.mark.parametrize("policy", list(GOLDEN["digests"]))
def test_schedules_are_bit_identical_to_the_recorded_ones(policy):
    now = [run_digest(policy, run) for run in GOLDEN["runs"]]
    changed = [run for run, old, new in zip(GOLDEN["runs"], GOLDEN["digests"][policy], now, strict=True) if old != new]
    assert changed == [], f"{policy}: {len(changed)} of {len(now)} schedules changed, first on {changed[:1]}"


def test_the_digest_sees_a_one_bit_change_of_a_start():
    world = scenario("small", cluster="tiny", seed=0)
    log = simulate(world.cluster, world.workload.jobs[:20], make("fcfs+easy"), world.runtime)
    first = log.records[0]
    moved = first._replace(start_time_s=math.nextafter(first.start_time_s, math.inf))  # the next float up
    assert schedule_digest(log) != schedule_digest(dataclasses.replace(log, records=(moved, *log.records[1:])))
    assert schedule_digest(log) == schedule_digest(simulate(world.cluster, world.workload.jobs[:20],
                                                            make("fcfs+easy"), world.runtime))
