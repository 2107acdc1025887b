"""The slurm preset against a real Slurm: every stream recorded from slurmctld 22.05 (``tests/data/slurm/``, recorded
by ``benchmarks/slurm_live.py record``) replayed in the simulator must give Slurm's start order exactly and each
start within the scheduler's own cycle."""

from __future__ import annotations

from pathlib import Path

import pytest
from paths import ROOT

from baselines.registry import make
from envs.core.files import read_yaml
from envs.core.job import TraceOutcome
from envs.scenario import load_cluster
from envs.sim.loop import simulate
from envs.workload.loaders import load_trace
from envs.workload.operators.slurm_nodes import expand_hostlist
from evaluation.slurm_replay import (
    START_TOLERANCE_S,
    case_from_dict,
    compare,
    inversions,
    record_workload,
    replay_nodes,
)

RECORDS = sorted((ROOT / "tests" / "data" / "slurm").glob("*.yaml"))



def test_the_required_streams_are_recorded():
    names = {p.stem for p in RECORDS}
    assert {"fifo-mixed", "fifo-backfill", "partitions", "multifactor-fairshare"} <= names


@pytest.mark.parametrize("path", RECORDS, ids=[p.stem for p in RECORDS])
def test_slurm_preset_reproduces_the_recorded_starts(path: Path):
    record = read_yaml(path, "Slurm record")
    assert record["recorded"]["slurm"].startswith("slurm")
    result = compare(record, "slurm")
    assert result.inversions == 0, result.starts
    assert result.max_diff_s <= START_TOLERANCE_S, result.starts


MULTI_NODE = [p for p in RECORDS if (read_yaml(p, "Slurm record").get("node") or {}).get("count", 1) > 1]


def test_the_multi_node_streams_are_recorded():
    assert {p.stem for p in MULTI_NODE} >= {"multinode-gang", "multinode-fragmentation"}


@pytest.mark.parametrize("path", MULTI_NODE, ids=[p.stem for p in MULTI_NODE])
def test_slurm_preset_chooses_the_recorded_nodes(path: Path):
    """On several slurmd, each job runs on the nodes Slurm gave it (jobcomp's NodeList, a hostlist)."""
    case = case_from_dict(read_yaml(path, "Slurm record"), str(path))
    chosen = replay_nodes(case, "slurm")
    assert {j["id"]: expand_hostlist(j["node_list"], str(path), 1) for j in case.jobs} == chosen


@pytest.mark.parametrize("path", RECORDS, ids=[p.stem for p in RECORDS])
def test_records_are_self_consistent(path: Path):
    """Each job ran once or was requeued; its recorded run is as long as its sleep (plus Slurm's start overhead)
    and ends before its time limit."""
    case = case_from_dict(read_yaml(path, "Slurm record"), str(path))
    workload = record_workload(case)
    assert len(workload) == len(case.jobs)
    for job in case.jobs:
        assert job["start_s"] >= job["submit_s"]
        assert job["run_s"] <= job["end_s"] - job["start_s"] <= job["run_s"] + 2
        assert job["end_s"] - job["start_s"] < 60 * job["time_min"]
        assert job["state"] == "COMPLETED"


SACCT = sorted((ROOT / "tests" / "data" / "slurm").glob("*.sacct.txt"))


def test_real_sacct_output_is_recorded():
    assert SACCT, "no sacct output recorded (benchmarks/slurm_live.py record writes NAME.sacct.txt with accounting)"


@pytest.mark.parametrize("path", SACCT, ids=[p.name for p in SACCT])
def test_the_sacct_loader_reads_real_sacct_output(path: Path):
    """Slurm's own sacct output of a recorded stream loads into the recorded jobs: GPUs, time limits, accounts, QOS,
    and times within the second sacct rounds to."""
    record = read_yaml(path.with_name(path.name.removesuffix(".sacct.txt") + ".yaml"), "Slurm record")
    trace = load_trace(path)
    assert len(trace) == len(record["jobs"])
    by_id = {job.job_id: job for job in trace.jobs}
    # Slurm resets a requeued job's Submit to its requeue, and the loader counts from the first Submit it keeps
    submits = {rec["id"]: rec["earlier_runs"][-1]["end_s"] if rec.get("earlier_runs") else rec["submit_s"]
               for rec in record["jobs"]}
    first_submit = min(submits.values())
    for rec in record["jobs"]:
        job = by_id[rec["slurm_id"]]
        assert (job.n_gpus, job.runtime_estimate_s) == (rec["gpus"], 60 * rec["time_min"])
        assert (job.team, job.qos, job.user) == (rec.get("account", "-"), rec.get("qos", "normal"), "root")
        assert job.outcome is TraceOutcome.PASS
        assert abs(job.submit_time_s - (submits[rec["id"]] - first_submit)) <= 1.0
        assert abs(job.runtime_s - (rec["end_s"] - rec["start_s"])) <= 1.0
    assert trace.skipped.get("requeued_run", 0) == sum(len(rec.get("earlier_runs", ())) for rec in record["jobs"])


def test_inversions_count_only_strict_disagreements():
    assert inversions({1: (0, 0), 2: (5, 4), 3: (5, 6)}) == 0  # a Slurm tie (5, 5) is no order
    assert inversions({1: (0, 3), 2: (1, 2), 3: (2, 1)}) == 3


@pytest.mark.parametrize("spec", ["scontrol:tests/data/slurm/scontrol-show-node.txt",
                                  "sinfo:tests/data/slurm/sinfo-N.txt"])
def test_real_node_exports_give_the_recorded_cluster(spec: str):
    """`scontrol show node --oneliner` and `sinfo -N -o "%N %P %c %m %G"` of the live Slurm that ran the partitions
    stream (its `OS=` value holds spaces) give that cluster: one node of 8 GPUs, 16 CPUs, 16,000 MiB, in both
    partitions; and the recorded stream replays on it."""
    kind, _, path = spec.partition(":")
    cluster = load_cluster(f"{kind}:{ROOT / path}")
    assert (cluster.n_nodes, cluster.n_gpus) == (1, 8)
    assert (int(cluster.node_cpu_milli[0]), int(cluster.node_ram_mib[0])) == (16_000, 16_000)
    assert {p.name: p.nodes for p in cluster.governance.partitions} == {"short": (0,), "long": (0,)}
    case = case_from_dict(read_yaml(ROOT / "tests" / "data" / "slurm" / "partitions.yaml", "record"), "partitions")
    log = simulate(cluster, record_workload(case), make("slurm"))
    assert len(log.completed()) == len(case.jobs)
