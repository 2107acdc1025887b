"""What cluster operators export: sacct and Helios job lists into workloads, scontrol / sinfo / kubectl node lists
into clusters. Exact field mapping on the hand-written samples of ``tests/data/exports/``, skip counts, malformed
input naming file and line, format detection, and evaluate.py end to end on the samples."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest
from paths import ROOT

from envs.core.errors import ConfigError, TraceFormatError
from envs.core.job import TraceOutcome
from envs.scenario import load_cluster
from envs.workload import (
    detect_format,
    load_helios,
    load_kubectl_cluster,
    load_sacct,
    load_scontrol_cluster,
    load_sinfo_cluster,
    load_trace,
)
from envs.workload.inspect import inspect_trace
from envs.workload.loaders import UnknownTraceFormat
from envs.workload.operators.kubectl_nodes import read_kubectl_nodes
from envs.workload.operators.node_inventory import UNKNOWN_GPU_MEMORY_GIB, gpu_type_for
from envs.workload.operators.sacct import slurm_duration
from envs.workload.operators.slurm_nodes import expand_hostlist, read_scontrol_nodes, read_sinfo_nodes

EXPORTS = Path(__file__).parent / "data" / "exports"
SACCT = EXPORTS / "sacct.txt"
HELIOS = EXPORTS / "helios_cluster_log.csv"
SCONTROL = EXPORTS / "scontrol_nodes.txt"
SINFO = EXPORTS / "sinfo_nodes.txt"
KUBECTL = EXPORTS / "kubectl_nodes.json"

PASS, FAILED, KILLED = TraceOutcome.PASS, TraceOutcome.FAILED, TraceOutcome.KILLED

# job id, submit [s], runtime [s], estimate [s], GPUs, GPU types, CPU per GPU [milli], RAM per GPU [MiB], user, team,
# partition, qos, outcome; submit times from 2026-11-30T08:00:00 (job 1001)
SACCT_JOBS = [
    (1001, 0, 3600, 7200, 2, set(), 8000, 61440, "alice", "vision", "gpu", "normal", PASS),  # steps folded
    (1002, 300, 7200, 86400, 8, {"A100-40GB"}, 8000, 51200, "bob", "nlp", "gpu", "high", FAILED),  # typed ReqTRES
    (1003, 1200, 600, 3600, 1, set(), 4000, 32768, "carol", "vision", "gpu", "normal", KILLED),  # array task 1003_2
    (1004, 1200, 1800, 3600, 1, set(), 4000, 32768, "carol", "vision", "gpu", "normal", PASS),  # array task 1003_0
    (1005, 1200, 3600, 3600, 1, set(), 4000, 32768, "carol", "vision", "gpu", "normal", KILLED),  # 1003_1 TIMEOUT
    (1006, 3600, 1810, 2700, 3, set(), 8000, 65536, "dave", "nlp", "gpu", "normal", PASS),  # het job 1006+0, 1006+1
    (1008, 4200, 1800, 1800, 1, set(), 8000, 61440, "alice", "vision", "debug", "normal", FAILED),  # UNLIMITED, OOM
    (1013, 6000, 600, 14400, 2, set(), 8000, 61440, "dave", "nlp", "gpu", "low", KILLED),  # PREEMPTED
    (1014, 6605, 1800, 3600, 1, set(), 8000, 61440, "carol", "vision", "gpu", "normal", PASS),  # the run after REQUEUED
    (1016, 7500, 300, 300, 1, set(), 8000, 61440, "bob", "nlp", "gpu", "normal", KILLED),  # DEADLINE
    (1018, 8400, 1800, 172800, 4, {"V100"}, 8000, 65536, "dave", "nlp", "gpu", "normal", FAILED),  # NODE_FAIL
]
SACCT_SKIPPED = {"het_component": 1, "job_step": 5, "never_started": 1, "no_gpus": 1, "not_finished": 2,
                 "requeued_run": 1, "orphan_step": 1, "zero_runtime": 1}

SACCT_HEADER = "JobID|JobIDRaw|Submit|Start|End|Timelimit|NNodes|Partition|QOS|Account|User|State|ReqTRES|AllocTRES"
SACCT_ROW = ("7|7|2026-11-30T08:00:00|2026-11-30T08:01:00|2026-11-30T09:01:00|02:00:00|1|gpu|normal|lab|eve|COMPLETED"
             "|cpu=8,gres/gpu=1,mem=60G|cpu=8,gres/gpu=1,mem=60G")

HELIOS_HEADER = "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue"
HELIOS_ROW = "5,u1,vc1,2,8,1,COMPLETED,2020-04-01 00:00:07,2020-04-01 00:01:07,2020-04-01 01:01:07,3600,60"

SCONTROL_NODE = "NodeName=n1 CPUTot=64 RealMemory=512000 Gres=gpu:a100:8(S:0-1) State=IDLE Partitions=gpu"


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_sacct_maps_every_job_field():
    workload = load_sacct(SACCT)
    got = [(j.job_id, j.submit_time_s, j.runtime_s, j.runtime_estimate_s, j.n_gpus, set(j.gpu_types),
            j.cpu_milli_per_gpu, j.ram_mib_per_gpu, j.user, j.team, j.partition, j.qos, j.outcome)
           for j in workload.jobs]
    assert got == SACCT_JOBS
    assert [j.comm_sensitivity for j in workload.jobs] == [0.5 if j[4] > 1 else 0.0 for j in SACCT_JOBS]
    assert workload.name == "sacct" and workload.machine_gpus == 0


def test_sacct_counts_every_record_it_does_not_turn_into_a_job():
    workload = load_sacct(SACCT)
    assert dict(workload.skipped) == SACCT_SKIPPED
    data_lines = len(SACCT.read_text().splitlines()) - 1
    assert len(workload.jobs) + sum(workload.skipped.values()) == data_lines == 24
    assert inspect_trace(SACCT)["records"] == 24


def test_sacct_reads_parsable_output_with_a_trailing_delimiter_and_no_jobid_column(tmp_path):
    header = SACCT_HEADER.replace("JobID|", "", 1)
    het = [  # without the JobID column the two components of a heterogeneous job are two jobs
        "20|2026-11-30T08:00:00|2026-11-30T08:00:05|2026-11-30T08:10:05|10:00|1|gpu|normal|lab|eve|COMPLETED"
        "|gres/gpu=1|gres/gpu=1",
        "21|2026-11-30T08:00:00|2026-11-30T08:00:05|2026-11-30T08:10:05|10:00|1|gpu|normal|lab|eve|COMPLETED"
        "|gres/gpu=2|",
    ]
    path = write(tmp_path, "plain.txt", "\n".join(line + "|" for line in [header, *het]) + "\n")
    workload = load_sacct(path)
    assert [(j.job_id, j.n_gpus, j.runtime_s, j.runtime_estimate_s) for j in workload.jobs] == [
        (20, 1, 600, 600), (21, 2, 600, 600)]  # an empty AllocTRES: the count of ReqTRES
    assert dict(workload.skipped) == {}


def test_sacct_takes_the_count_of_alloctres_and_the_types_of_reqtres(tmp_path):
    row = SACCT_ROW.replace("|cpu=8,gres/gpu=1,mem=60G|cpu=8,gres/gpu=1,mem=60G",
                            "|gres/gpu:a100_80gb=1|cpu=16,gres/gpu:h100=2,gres/gpu=2,mem=1.5T")
    (job,) = load_sacct(write(tmp_path, "s.txt", f"{SACCT_HEADER}\n{row}\n")).jobs
    assert (job.n_gpus, job.gpu_types, job.cpu_milli_per_gpu, job.ram_mib_per_gpu) == (
        2, frozenset({"A100-80GB"}), 8000, 786432)
    only_alloc = f"{SACCT_HEADER.removesuffix('|ReqTRES|AllocTRES')}|AllocTRES\n" + row.replace(
        "|gres/gpu:a100_80gb=1|", "|")
    (job,) = load_sacct(write(tmp_path, "a.txt", only_alloc)).jobs
    assert (job.n_gpus, job.gpu_types) == (2, frozenset({"H100"}))


@pytest.mark.parametrize(("text", "seconds"), [
    ("05:30", 330), ("1:00:00", 3600), ("23:59:59", 86399), ("2-03:04:05", 183845), ("0:00", 0),
    ("UNLIMITED", None), ("Partition_Limit", None), ("partition_limit", None),
])
def test_slurm_durations_read_as_sacct_prints_them(text, seconds):
    assert slurm_duration(text, "f", 1, "Timelimit") == seconds


SACCT_BAD = [
    (SACCT_ROW.replace("2026-11-30T08:00:00", "2026-11-30 8:00"), 2, "Submit '2026-11-30 8:00' is not a time"),
    (SACCT_ROW.rsplit("|", 1)[0], 2, "13 fields, but the header has 14"),
    (SACCT_ROW.replace("02:00:00", "1:75"), 2, "Timelimit '1:75' is not"),
    (SACCT_ROW.replace("02:00:00", "two hours"), 2, "Timelimit 'two hours' is not"),
    (SACCT_ROW.replace("7|7|", "7|x7|"), 2, "JobIDRaw 'x7' is not N or N.STEP"),
    (SACCT_ROW.replace("7|7|", "7+a|7|"), 2, "het offset"),
    (SACCT_ROW.replace("COMPLETED", "DONE"), 2, "state 'DONE' is not a Slurm job state"),
    (SACCT_ROW.replace("mem=60G|cpu", "mem=lots|cpu"), 2, "ReqTRES mem 'lots' is not a size"),
    (SACCT_ROW.replace("gres/gpu=1,mem=60G", "gres/gpu=x,mem=60G"), 2, "gres/gpu 'x' is not a number"),
    (SACCT_ROW.replace(",mem=60G|", ",mem|"), 2, "entry 'mem' is not NAME=VALUE"),
    (SACCT_ROW.replace("2026-11-30T09:01:00", "2026-11-30T07:01:00"), 2, "End is before Start"),
    (SACCT_ROW.replace("2026-11-30T09:01:00", "Unknown"), 2, "End 'Unknown' of a finished job"),
    (SACCT_ROW.replace("|1|gpu|", "|-1|gpu|"), 2, "NNodes '-1' must be >= 0"),
]


@pytest.mark.parametrize(("row", "line", "fragment"), SACCT_BAD, ids=[f[2][:24] for f in SACCT_BAD])
def test_malformed_sacct_lines_name_file_and_line(tmp_path, row, line, fragment):
    path = write(tmp_path, "bad.txt", f"{SACCT_HEADER}\n{row}\n")
    with pytest.raises(TraceFormatError) as info:
        load_sacct(path)
    assert (info.value.path, info.value.line) == (str(path), line) and fragment in str(info.value)


def test_a_sacct_header_without_the_required_columns_is_malformed(tmp_path):
    path = write(tmp_path, "bad.txt", SACCT_HEADER.replace("|State|ReqTRES|AllocTRES", "") + "\n")
    with pytest.raises(TraceFormatError, match=r"bad.txt line 1: header lacks column\(s\) State, ReqTRES or Alloc"):
        load_sacct(path)


def test_helios_maps_every_job_field():
    workload = load_helios(HELIOS)
    got = [(j.job_id, j.submit_time_s, j.runtime_s, j.runtime_estimate_s, j.n_gpus, j.cpu_milli_per_gpu, j.user,
            j.team, j.outcome, j.comm_sensitivity) for j in workload.jobs]
    assert got == [  # submit times from 2020-06-09 18:41:01
        (1425511, 0, 3600, 3600, 1, 6000, "uXBbc", "vcJkd", PASS, 0.0),
        (1425512, 26, 249, 249, 4, 4000, "uVMrF", "vchbv", FAILED, 0.5),
        (1425514, 539, 7200, 7200, 8, 8000, "uXBbc", "vcJkd", KILLED, 0.5),  # CANCELLED
        (1425515, 1139, 3600, 3600, 2, 4000, "uVMrF", "vchbv", KILLED, 0.5),  # TIMEOUT
        (1425517, 2339, 14400, 14400, 16, 8000, "uXBbc", "vcJkd", PASS, 0.5),
    ]
    assert dict(workload.skipped) == {"never_started": 1, "no_gpus": 1, "not_finished": 1, "zero_runtime": 1}


HELIOS_BAD = [
    (HELIOS_ROW.replace("2020-04-01 00:00:07", "2020/04/01 00:00:07"), 2, "submit_time '2020/04/01 00:00:07'"),
    (HELIOS_ROW + ",extra", 2, "13 fields, but the header has 12"),
    (HELIOS_ROW.replace("vc1,2,8", "vc1,-1,8"), 2, "gpu_num '-1' must be >= 0"),
    (HELIOS_ROW.replace("COMPLETED", "DONE"), 2, "state 'DONE'"),
    (HELIOS_ROW.replace("2020-04-01 01:01:07", "2020-03-31 01:01:07"), 2, "end_time is before start_time"),
    (HELIOS_ROW.replace(",3600,", ",abc,"), 2, "duration 'abc' is not a number"),
    (f"{HELIOS_ROW}\n{HELIOS_ROW}", 3, "job id 5 repeats the id of line 2"),
]


@pytest.mark.parametrize(("rows", "line", "fragment"), HELIOS_BAD, ids=[f[2][:24] for f in HELIOS_BAD])
def test_malformed_helios_rows_name_file_and_line(tmp_path, rows, line, fragment):
    path = write(tmp_path, "cluster_log.csv", f"{HELIOS_HEADER}\n{rows}\n")
    with pytest.raises(TraceFormatError) as info:
        load_helios(path)
    assert (info.value.path, info.value.line) == (str(path), line) and fragment in str(info.value)


def test_format_detection_picks_sacct_and_helios():
    assert detect_format(SACCT) == "sacct" and detect_format(HELIOS) == "helios"
    assert [j.job_id for j in load_trace(SACCT).jobs] == [j[0] for j in SACCT_JOBS]
    assert len(load_trace(HELIOS).jobs) == 5


@pytest.mark.parametrize(("path", "spec"), [(SCONTROL, "scontrol:PATH"), (SINFO, "sinfo:PATH"),
                                            (KUBECTL, "kubectl:PATH")])
def test_node_exports_are_no_workload_and_detection_says_so(path, spec):
    with pytest.raises(UnknownTraceFormat, match=spec):
        detect_format(path)


def nodes_of(cluster):
    return [(n.name, n.gpu_type, n.n_gpus, n.cpu_milli, n.ram_mib, n.mig) for n in cluster.nodes]


def partitions_of(cluster):
    return [(p.name, p.nodes, p.default) for p in cluster.governance.partitions]


def test_scontrol_cluster_keeps_gpu_nodes_down_ones_included():
    cluster = load_scontrol_cluster(SCONTROL)
    assert nodes_of(cluster) == [
        ("gpu01", "A100-40GB", 8, 64000, 515000, False),  # gpu:a100:8(S:0-1)
        ("gpu02", "gpu", 4, 32000, 256000, False),  # untyped gpu:4, State=DOWN+DRAIN+NOT_RESPONDING
        ("gpu03", "V100", 4, 48000, 384000, False),  # gpu:v100:4(S:0-1),mps:400(S:0-1)
    ]
    assert partitions_of(cluster) == [("gpu", (0, 1, 2), False), ("debug", (0,), False)]  # "cpu" has no GPU node
    assert cluster.gpu_types["gpu"].memory_gib == UNKNOWN_GPU_MEMORY_GIB and cluster.name == "scontrol_nodes"
    assert {n.rack for n in cluster.nodes} == {0} and all(len(n.islands) == 1 for n in cluster.nodes)
    assert read_scontrol_nodes(SCONTROL).skipped == {"no_gpus": 1}


def test_scontrol_records_without_oneliner_read_the_same(tmp_path):
    multi = "\n\n".join("NodeName=" + "\n   ".join(line.removeprefix("NodeName=").split(" State="))
                        for line in SCONTROL.read_text().splitlines())
    path = write(tmp_path, "multi.txt", multi + "\n")
    assert nodes_of(load_scontrol_cluster(path)) == nodes_of(load_scontrol_cluster(SCONTROL))


def test_sinfo_cluster_expands_hostlists_and_merges_partitions():
    cluster = load_sinfo_cluster(SINFO)
    a100 = ("A100-40GB", 8, 64000, 515000, False)
    rtx = ("rtx6000", 4, 32000, 256000, False)
    assert nodes_of(cluster) == [(n, *a100) for n in ("gpu01", "gpu02", "gpu03", "gpu04", "gpu07")] + [
        (n, *rtx) for n in ("gpu08", "gpu09")]
    assert partitions_of(cluster) == [("gpu", (0, 1, 2, 3, 4, 5, 6), True), ("debug", (0, 4), False)]
    assert cluster.gpu_types["rtx6000"].memory_gib == UNKNOWN_GPU_MEMORY_GIB
    assert read_sinfo_nodes(SINFO).skipped == {"no_gpus": 2}


@pytest.mark.parametrize(("text", "names"), [
    ("gpu[01-03,07]", ["gpu01", "gpu02", "gpu03", "gpu07"]),
    ("n[8-10]", ["n8", "n9", "n10"]),
    ("a[1-2]-ib,b", ["a1-ib", "a2-ib", "b"]),
    ("r[1-2]n[1-2]", ["r1n1", "r1n2", "r2n1", "r2n2"]),
    ("single", ["single"]),
])
def test_hostlist_expressions_expand_like_slurm(text, names):
    assert expand_hostlist(text, "f", 1) == names


def test_kubectl_cluster_reads_products_pools_and_mig():
    cluster = load_kubectl_cluster(KUBECTL)
    assert nodes_of(cluster) == [
        ("gke-a100-pool-7f3c-0", "A100-80GB", 8, 95500, 1029296, False),  # allocatable, not capacity
        ("gke-t4-pool-19ab-0", "T4", 1, 7910, 27648, False),  # cordoned: kept
        ("gke-mig-pool-5c2a-0", "A100-40GB", 4, 64000, 524288, True),  # single strategy: 28 x 1g.5gb = 4 GPUs
        ("ip-10-0-3-17.ec2.internal", "H100", 8, 191450, 2097152, False),  # mixed: 6 full GPUs, gpu.count 8
    ]
    assert partitions_of(cluster) == [("a100-pool", (0,), False), ("t4-pool", (1,), False),
                                      ("mig-pool", (2,), False), ("h100-group", (3,), False)]
    assert read_kubectl_nodes(KUBECTL).skipped == {"no_gpus": 1} and cluster.name == "kubectl_nodes"


def k8s_node(name="n1", labels=None, gpus="8", cpu="64", memory="256Gi", **resources):
    labels = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB", **(labels or {})}
    allocatable = {"cpu": cpu, "memory": memory, "nvidia.com/gpu": gpus, **resources}
    return {"kind": "Node", "metadata": {"name": name, "labels": labels}, "status": {"allocatable": allocatable}}


def test_kubectl_mixed_strategy_without_a_count_label_takes_the_fewest_gpus(tmp_path):
    node = k8s_node(gpus="0", **{"nvidia.com/mig-3g.20gb": "2", "nvidia.com/mig-1g.5gb": "3"})  # 8 + 3 slices
    node["metadata"]["labels"]["nvidia.com/mig.strategy"] = "mixed"
    cluster = load_kubectl_cluster(write(tmp_path, "one.json", json.dumps(node)))  # one Node object
    assert nodes_of(cluster) == [("n1", "A100-40GB", 2, 64000, 262144, True)]


def listing(*nodes) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": list(nodes)}, indent=2)


MIG_SINGLE = {"nvidia.com/mig.strategy": "single"}
KUBECTL_BAD = [
    ('{"items": [\n  {"metadata": }\n]}', 2, "not JSON"),
    ("[]", 1, "expected the output of kubectl get nodes -o json"),
    (listing({"metadata": {}}), 1, "items[0] has no metadata.name"),
    (listing(k8s_node(cpu="lots")), 8, "node 'n1' cpu 'lots' is not a Kubernetes quantity"),
    (listing(k8s_node(memory="12XB")), 8, "memory '12XB' is not a Kubernetes quantity"),
    (listing(k8s_node(gpus="eight")), 8, "nvidia.com/gpu 'eight' is not a whole number"),
    (listing(k8s_node(gpus="8", labels={**MIG_SINGLE, "nvidia.com/gpu.product": "A100-SXM4-40GB-MIG-3g.40gb"})), 8,
     "type A100-40GB offers no MIG profile 3g.40gb"),
    (listing(k8s_node(gpus="27", labels={**MIG_SINGLE, "nvidia.com/gpu.product": "A100-SXM4-40GB-MIG-1g.5gb"})), 8,
     "27 1g.5gb devices are not whole GPUs of 7"),
    (listing(k8s_node(), k8s_node()), 24, "node 'n1' repeats the node of line 8"),
    (listing(k8s_node(gpus="0")), 22, "the export lists no GPU node (1 no_gpus)"),
]


@pytest.mark.parametrize(("text", "line", "fragment"), KUBECTL_BAD, ids=[f[2][:24] for f in KUBECTL_BAD])
def test_malformed_kubectl_json_names_file_and_line(tmp_path, text, line, fragment):
    path = write(tmp_path, "nodes.json", text)
    with pytest.raises(TraceFormatError) as info:
        load_kubectl_cluster(path)
    assert (info.value.path, info.value.line) == (str(path), line) and fragment in str(info.value)


SCONTROL_BAD = [
    (SCONTROL_NODE.replace("gpu:a100:8", "gpu:a100:x"), 1, "count 'x' is not a number"),
    (SCONTROL_NODE.replace("gpu:a100:8(S:0-1)", "gpu:a100:4,gpu:v100:4"), 1, "holds GPUs of 2 types"),
    (SCONTROL_NODE.replace("gpu:a100:8(S:0-1)", "gpu:a:b:8"), 1, "is not gpu:COUNT or gpu:TYPE:COUNT"),
    (SCONTROL_NODE.replace("(S:0-1)", "(S:0-1"), 1, "unbalanced ()"),
    (SCONTROL_NODE.replace("CPUTot=64 ", ""), 1, "node record lacks CPUTot="),
    (SCONTROL_NODE.replace("CPUTot=64", "CPUTot=many"), 1, "CPUTot 'many' is not a number"),
    (SCONTROL_NODE.replace("State=IDLE", "State=IDLE CPUTot=32"), 1, "key CPUTot= repeats"),
    ("Nodes in the system:\n" + SCONTROL_NODE, 1, "expected a node record starting with NodeName="),
    (f"{SCONTROL_NODE}\n{SCONTROL_NODE}", 2, "node 'n1' repeats the node of line 1"),
    (SCONTROL_NODE.replace("gpu:a100:8(S:0-1)", "(null)"), 1, "the export lists no GPU node (1 no_gpus)"),
]


@pytest.mark.parametrize(("text", "line", "fragment"), SCONTROL_BAD, ids=[f[2][:24] for f in SCONTROL_BAD])
def test_malformed_scontrol_records_name_file_and_line(tmp_path, text, line, fragment):
    path = write(tmp_path, "nodes.txt", text + "\n")
    with pytest.raises(TraceFormatError) as info:
        load_scontrol_cluster(path)
    assert (info.value.path, info.value.line) == (str(path), line) and fragment in str(info.value)


SINFO_HEADER = "NODELIST PARTITION CPUS MEMORY GRES"
SINFO_BAD = [
    ("NODELIST PARTITION CPUS MEMORY\nn1 gpu 64 512000", 1, "header lacks column(s) GRES"),
    (f"{SINFO_HEADER}\nn1 gpu 64 512000", 2, "4 fields, but the header has 5"),
    (f"{SINFO_HEADER}\ngpu[01- gpu 64 512000 gpu:8", 2, "unbalanced [] in 'gpu[01-'"),
    (f"{SINFO_HEADER}\ngpu[a-b] gpu 64 512000 gpu:8", 2, "hostlist range 'a-b'"),
    (f"{SINFO_HEADER}\ngpu[03-01] gpu 64 512000 gpu:8", 2, "hostlist range '03-01'"),
    (f"{SINFO_HEADER}\ngpu[01-02] gpu 64+ 512000 gpu:8", 2, "CPUS '64+' is the smallest of a group"),
    (f"{SINFO_HEADER}\nn1 gpu 64 512000 gpu:8\nn1 debug 32 512000 gpu:8", 3, "differ from line 2"),
    (f"{SINFO_HEADER}\nn1 gpu* 64 512000 gpu:8\nn2 debug* 64 512000 gpu:8", 3, "two default partitions"),
    (f"{SINFO_HEADER}\nn1 gpu 64 lots gpu:8", 2, "MEMORY 'lots' is not a number"),
]


@pytest.mark.parametrize(("text", "line", "fragment"), SINFO_BAD, ids=[f[2][:24] for f in SINFO_BAD])
def test_malformed_sinfo_lines_name_file_and_line(tmp_path, text, line, fragment):
    path = write(tmp_path, "sinfo.txt", text + "\n")
    with pytest.raises(TraceFormatError) as info:
        load_sinfo_cluster(path)
    assert (info.value.path, info.value.line) == (str(path), line) and fragment in str(info.value)


def test_slurm_mig_gres_nodes_are_left_out_and_counted(tmp_path):
    text = f"{SCONTROL_NODE}\n" + SCONTROL_NODE.replace("n1", "n2").replace("gpu:a100:8", "gpu:a100_3g.20gb:4")
    inventory = read_scontrol_nodes(write(tmp_path, "mig.txt", text + "\n"))
    assert [n.name for n in inventory.nodes] == ["n1"] and inventory.skipped == {"mig_gres": 1}


@pytest.mark.parametrize(("name", "memory_mib", "expected"), [
    ("a100", None, "A100-40GB"),
    ("A100", None, "A100-40GB"),
    ("a100_80gb", None, "A100-80GB"),
    ("NVIDIA-A100-SXM4-80GB", 81920, "A100-80GB"),
    ("NVIDIA-A100-PCIE-40GB", 40960, "A100-40GB"),
    ("Tesla-V100-SXM2-16GB", 16160, "V100"),
    ("Tesla-V100-SXM2-32GB", 32510, "V100M32"),
    ("v100", None, "V100"),
    ("NVIDIA-H100-80GB-HBM3", 81559, "H100"),
    ("h100", None, "H100"),
    ("Tesla-T4", 15360, "T4"),
])
def test_gpu_model_names_resolve_to_the_built_in_types(name, memory_mib, expected):
    from envs.core.gpu_types import DEFAULT_GPU_TYPES

    assert gpu_type_for(name, DEFAULT_GPU_TYPES, memory_mib).name == expected


def test_an_unknown_gpu_model_becomes_a_type_of_its_own():
    from envs.core.gpu_types import DEFAULT_GPU_TYPES

    h200 = gpu_type_for("NVIDIA-H200", DEFAULT_GPU_TYPES, 143771)
    assert (h200.name, round(h200.memory_gib, 1), h200.speed) == ("NVIDIA-H200", 140.4, 1.0)
    assert gpu_type_for("rtx6000", DEFAULT_GPU_TYPES).memory_gib == UNKNOWN_GPU_MEMORY_GIB


@pytest.mark.parametrize(("spec", "n_gpus"), [(f"scontrol:{SCONTROL}", 16), (f"sinfo:{SINFO}", 48),
                                              (f"kubectl:{KUBECTL}", 21)])
def test_cluster_specs_name_node_exports(spec, n_gpus):
    assert load_cluster(spec).n_gpus == n_gpus


def test_a_node_export_spec_needs_a_path():
    with pytest.raises(ConfigError, match="expected kubectl:PATH"):
        load_cluster("kubectl:")


def evaluate_once(tmp_path: Path, workload: str, cluster: str) -> list[dict[str, str]]:
    subprocess.run([sys.executable, str(ROOT / "evaluate.py"), "--workload", workload, "--cluster", cluster,
                    "--seeds", "0", "--policies", "fcfs+easy", "--no-plots", "--workers", "1", "--out", str(tmp_path)],
                   cwd=ROOT, capture_output=True, text=True, check=True)
    return list(csv.DictReader((tmp_path / "results.csv").open()))


@pytest.mark.parametrize(("workload", "cluster", "n_jobs"), [
    ("sacct:tests/data/exports/sacct.txt", "scontrol:tests/data/exports/scontrol_nodes.txt", 11),
    ("helios:tests/data/exports/helios_cluster_log.csv", "kubectl:tests/data/exports/kubectl_nodes.json", 5),
])
def test_evaluate_replays_operator_exports_to_the_end(tmp_path, workload, cluster, n_jobs):
    (row,) = evaluate_once(tmp_path, workload, cluster)
    assert (row["n_jobs"], row["n_completed"], row["n_rejected"]) == (str(n_jobs), str(n_jobs), "0")
    assert float(row["makespan_s"]) > 0
