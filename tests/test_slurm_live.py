"""The live-Slurm harness's offline parts: the conf it writes, the cases it reads and makes, and the one line it
says on a machine that cannot run Slurm (the live run itself needs root and slurm-wlm: benchmarks/slurm_live.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from paths import ROOT

from envs.core.errors import ConfigError
from envs.core.files import read_yaml
from evaluation.slurm_replay import case_from_dict, case_from_workload, slurm_conf_text

CASES = ROOT / "benchmarks" / "slurm_cases"


def _harness():
    spec = importlib.util.spec_from_file_location("slurm_live", ROOT / "benchmarks" / "slurm_live.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_conf_holds_the_cases_node_partitions_and_scheduling_keys():
    case = case_from_dict(read_yaml(CASES / "partitions.yaml", "case"), "partitions")
    conf = slurm_conf_text(case, "host1", Path("/run/x"))
    lines = conf.splitlines()
    assert "SchedulerType=sched/backfill" in lines and "PriorityType=priority/basic" in lines
    assert any(line.startswith("SchedulerParameters=bf_interval=1,bf_resolution=1,") for line in lines)
    assert "NodeName=host1 CPUs=16 RealMemory=16000 Gres=gpu:8 State=UNKNOWN" in lines
    assert "PartitionName=short Nodes=host1 State=UP PriorityTier=2 MaxTime=2" in lines
    assert "PartitionName=long Nodes=host1 State=UP PriorityTier=1 MaxTime=INFINITE Default=YES" in lines
    assert "AccountingStorageType=accounting_storage/none" in lines


def test_an_accounting_case_bills_gpus_and_names_its_qos():
    case = case_from_dict(read_yaml(CASES / "qos-preemption.yaml", "case"), "qos")
    assert case.needs_accounting and case.accounts == {"a": 1}
    assert [q["name"] for q in case.qos] == ["low", "high"] and case.qos[1]["Preempt"] == "low"
    conf = slurm_conf_text(case, "h", Path("/x"))
    assert "PreemptType=preempt/qos" in conf and "TRESBillingWeights=GRES/gpu=1" in conf
    assert "AccountingStorageType=accounting_storage/slurmdbd" in conf


def test_a_stream_from_any_workload_has_whole_minute_limits():
    case = case_from_workload("small", 12, 0.05, 0, {}, node_gpus=8)
    assert len(case.jobs) == 12
    for job in case.jobs:
        assert 1 <= job["gpus"] <= 8 and job["time_min"] >= 1 and 5 <= job["run_s"] < 60 * job["time_min"]
    assert [j["submit_s"] for j in case.jobs] == sorted(j["submit_s"] for j in case.jobs)
    case_from_dict(case.as_dict(), "made")  # it reads back


@pytest.mark.parametrize("change, message", [
    (lambda d: d["jobs"][0].update(gpus=9), r"9 GPUs on 1 node\(s\) do not split evenly over at most 1 node"),
    (lambda d: d["jobs"][0].update(gpus=12, nodes=2), r"12 GPUs on 2 node\(s\) do not split evenly over at most 1"),
    (lambda d: d["jobs"][0].update(run_s=600), "run_s must be > 0 and below time_min"),
    (lambda d: d["jobs"][0].pop("time_min"), r"jobs\[0\]\.time_min: missing"),
    (lambda d: d.update(colour="red"), "colour"),
    (lambda d: d["slurm"].update(SchedulerType="sched/magic"), "SchedulerType"),
])
def test_bad_cases_say_what_and_where(change, message):
    data = read_yaml(CASES / "fifo-mixed.yaml", "case")
    change(data)
    with pytest.raises(ConfigError, match=message):
        case_from_dict(data, "fifo-mixed.yaml")


def test_a_machine_without_slurm_gets_one_line_saying_what_is_missing(monkeypatch):
    harness = _harness()
    monkeypatch.setattr(harness.os, "geteuid", lambda: 1000)
    monkeypatch.setattr(harness, "_which", lambda program: None)
    case = case_from_dict(read_yaml(CASES / "qos-preemption.yaml", "case"), "qos")
    with pytest.raises(harness.Missing) as info:
        harness.check_machine(case)
    text = str(info.value)
    assert "\n" not in text and "root (running as" in text and "slurmctld" in text and "slurmdbd" in text
    assert "apt-get install slurm-wlm munge slurmdbd mariadb-server" in text


def test_compare_prints_each_job_and_the_inversions(capsys):
    harness = _harness()
    assert harness.main(["compare", str(ROOT / "tests" / "data" / "slurm" / "fifo-mixed.yaml"),
                         "--policies", "fcfs+easy,slurm"]) == 0
    out = capsys.readouterr().out
    assert "fifo-mixed  slurm: max |start diff|" in out and "0 order inversions" in out
    assert out.count("  job    slurm      sim  |diff|") == 2
