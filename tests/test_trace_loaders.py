"""Trace loaders: exact field mapping on small hand-written files, skip counts, malformed input, gzip, detection.

The real traces are checked here only where they are small (Lublin, NASA, openb, Tiresias); the big ones (LLNL,
Philly) are loaded once, through the inspector command, in ``test_workload_inspector.py``.
"""

from __future__ import annotations

import csv
import dataclasses
import gzip
from collections import Counter
from pathlib import Path

import pytest

from envs.core.errors import ConfigError, TraceFormatError
from envs.core.job import TraceOutcome
from envs.workload import (
    Workload,
    detect_format,
    load_openb,
    load_openb_cluster,
    load_philly,
    load_swf,
    load_tiresias,
    load_trace,
)
from envs.workload.loaders import UnknownTraceFormat

SWF_TEXT = """\
; Version: 2
; MaxNodes: 16
; MaxProcs: 64
1 0 5 100 4 -1 -1 8 200 -1 1 7 3 -1 -1 -1 -1 -1
2 10 -1 50 2 -1 -1 -1 -1 -1 1 -1 -1 -1 -1 -1 -1 -1

3 10 -1 0 2 -1 -1 -1 -1 -1 5 1 1 -1 -1 -1 -1 -1
4 20 -1 -1 2 -1 -1 -1 -1 -1 5 1 1 -1 -1 -1 -1 -1
5 20 -1 30 -1 -1 -1 -1 -1 -1 5 1 1 -1 -1 -1 -1 -1
   6   5.5  -1  12.5  1.0  -1 -1 -1 7.25 -1 1 2.0 1 -1 -1 -1 -1 -1
0 10 -1 40 3 -1 -1 0 -1 -1 1 1 1 -1 -1 -1 -1 -1
; a comment between records
7 -1 -1 40 3 -1 -1 -1 -1 -1 1 1 1 -1 -1 -1 -1 -1
"""

PHILLY_TEXT = """\
#job id,arrival time (sec),topology,shape,size,duration (sec)
0,0.0,CLOS,1,1,3613033.0
1,266563.5,CLOS,8+8,16,120.0
2,266563.5,CLOS,2+2+2+2,8,0.0
3,300000.0,CLOS,4,4,60.0
"""

OPENB_PODS_TEXT = """\
name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time
openb-pod-0000,12000,16384,1,1000,,LS,Running,0,12537496,0
openb-pod-0001,6000,12288,1,460,T4|V100M16|V100M16,BE,Failed,427061,427161,427071
openb-pod-0002,8000,4096,0,0,,BE,Succeeded,500,600,500
openb-pod-0003,4000,8192,1,300,,BE,Pending,600,900,
openb-pod-0004,32001,100001,8,1000,G2,Guaranteed,Succeeded,700,1700,710
openb-pod-0005,1000,1024,1,500,,LS,Running,800,800,800
"""

OPENB_NODES_TEXT = """\
sn,cpu_milli,memory_mib,gpu,model
openb-node-0000,32000,262144,0,
openb-node-0001,64000,262144,2,P100
openb-node-0002,96000,393216,8,G2
"""

TIRESIAS_TEXT = """\
job_id,num_gpu,submit_time,iterations,model_name,duration,interval
0,1,0,606,vgg19,164,30
1,8,30,133,vgg11,147,23
2,0,53,157,inception4,127,26
3,2,79,513,vgg16,0,20
"""


def write(tmp_path: Path, name: str, text: str | bytes) -> Path:
    """Write a fixture file (gzip-compressed when ``name`` ends in .gz)."""
    data = text.encode() if isinstance(text, str) else text
    path = tmp_path / name
    path.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    return path


# ---- SWF -------------------------------------------------------------------------------------------------
def test_swf_maps_fields_by_the_project_reading_rules(tmp_path: Path) -> None:
    w = load_swf(write(tmp_path, "tiny.swf", SWF_TEXT))
    assert isinstance(w, Workload)
    assert (w.name, w.source, w.machine_gpus) == ("tiny", str(tmp_path / "tiny.swf"), 64)
    by_id = {j.job_id: j for j in w.jobs}
    first = by_id[1]
    assert (first.submit_time_s, first.runtime_s, first.runtime_estimate_s) == (0, 100, 200)
    assert (first.n_gpus, first.user, first.team, first.comm_sensitivity) == (8, "u7", "g3", 0.0)
    second = by_id[2]  # requested processors and time unknown: allocated processors, perfect estimate
    assert (second.n_gpus, second.runtime_estimate_s, second.user, second.team) == (2, 50, "u-1", "g-1")
    floats = by_id[6]
    assert (floats.submit_time_s, floats.runtime_s, floats.runtime_estimate_s, floats.n_gpus) == (5.5, 12.5, 7.25, 1)
    assert floats.user == "u2"
    assert by_id[0].n_gpus == 3  # field 8 = 0 is not > 0: falls back to field 5


def test_swf_orders_by_submit_then_id_and_counts_every_skip(tmp_path: Path) -> None:
    w = load_swf(write(tmp_path, "tiny.swf", SWF_TEXT))
    assert [j.job_id for j in w.jobs] == [1, 6, 0, 2]
    assert w.skipped == {"no_processors": 1, "unknown_runtime": 1, "unknown_submit": 1, "zero_runtime": 1}
    n_records = sum(1 for line in SWF_TEXT.splitlines() if line.strip() and not line.startswith(";"))
    assert len(w) + sum(w.skipped.values()) == n_records


@pytest.mark.parametrize(
    ("headers", "machine_gpus"),
    [
        ("; MaxProcs: 64\n; MaxNodes: 16\n", 64),
        ("; MaxNodes: 16\n", 16),
        ("; MaxProcs: 0\n; MaxNodes: 16\n", 16),
        ("; MaxNodes: 128  (of 128 used)\n", 128),
        ("; Version: 2\n", 0),
    ],
)
def test_swf_machine_size_comes_from_maxprocs_then_maxnodes(tmp_path: Path, headers: str, machine_gpus: int) -> None:
    path = write(tmp_path, "m.swf", headers + "1 0 -1 10 1 -1 -1 -1 -1 -1 1 1 1 -1 -1 -1 -1 -1\n")
    assert load_swf(path).machine_gpus == machine_gpus


SWF_STATUS_TEXT = """\
; MaxProcs: 8
1 0 -1 10 1 -1 -1 -1 -1 -1 1 1 1 -1 1 -1 -1 -1
2 1 -1 10 1 -1 -1 -1 -1 -1 0 1 1 -1 2 -1 -1 -1
3 2 -1 10 1 -1 -1 -1 -1 -1 5 1 1 -1 -1 -1 -1 -1
4 3 -1 10 1 -1 -1 -1 -1 -1 -1 1 1 -1 3 -1 -1 -1
5 4 -1 10 1 -1 -1 -1 -1 -1 2 1 1 -1 1 -1 -1 -1
6 5 -1 10 1 -1 -1 -1 -1 -1 3 1 1 -1 2.0 -1 -1 -1
7 6 -1 10 1 -1 -1 -1 -1 -1 4 1 1 -1 7 -1 -1 -1
8 7 -1 10 1 -1 -1 -1 -1 -1 9 1 1 -1 1 -1 -1 -1
9 8 -1 10 1 -1 -1 -1 -1 -1 1.5 1 1 -1 1 -1 -1 -1
10 9 -1 0 1 -1 -1 -1 -1 -1 5 1 1 -1 1 -1 -1 -1
"""


def test_swf_status_gives_the_recorded_outcome(tmp_path: Path) -> None:
    w = load_swf(write(tmp_path, "status.swf", SWF_STATUS_TEXT))
    pass_, failed, killed, unknown = TraceOutcome.PASS, TraceOutcome.FAILED, TraceOutcome.KILLED, TraceOutcome.UNKNOWN
    assert {j.job_id: j.outcome for j in w.jobs} == {
        1: pass_,  # 1 completed
        2: failed,  # 0 failed
        3: killed,  # 5 cancelled
        4: unknown,  # -1 unknown
        5: unknown,  # 2 partial execution, continued later
        6: pass_,  # 3 last partial execution, completed
        7: failed,  # 4 last partial execution, failed
        8: unknown,  # 9 no such code
        9: unknown,  # 1.5 no such code
    }
    assert w.skipped == {"zero_runtime": 1}  # the outcome does not decide what is skipped
    assert {j.priority for j in w.jobs} == {0}  # no queue_priority: queue numbers carry no order


def test_swf_queue_priority_maps_queue_numbers_to_priority_classes(tmp_path: Path) -> None:
    path = write(tmp_path, "status.swf", SWF_STATUS_TEXT)
    w = load_swf(path, queue_priority={1: 2, 2: 1, 3: 0, -1: 5})
    # queues: job 1 -> 1, 2 -> 2, 3 -> -1, 4 -> 3, 5 -> 1, 6 -> 2.0, 7 -> 7 (absent: 0), 8 -> 1, 9 -> 1
    assert {j.job_id: j.priority for j in w.jobs} == {1: 2, 2: 1, 3: 5, 4: 0, 5: 2, 6: 1, 7: 0, 8: 2, 9: 2}
    assert [j.priority for j in load_swf(path, queue_priority={}).jobs] == [0] * 9
    unmapped = load_swf(path).jobs
    assert [dataclasses.replace(j, priority=0) for j in w.jobs] == list(unmapped)  # nothing else changes


def test_swf_queue_priority_needs_whole_queue_numbers_and_integer_classes(tmp_path: Path) -> None:
    path = write(tmp_path, "q.swf", "1 0 -1 10 1 -1 -1 -1 -1 -1 1 1 1 -1 2.5 -1 -1 -1\n")
    assert load_swf(path).jobs[0].priority == 0  # the queue is not read without a mapping
    with pytest.raises(TraceFormatError, match=r"line 1: field 15 \(queue number\) '2.5' is not a whole number"):
        load_swf(path, queue_priority={2: 1})
    for bad in ({1: 1.5}, {"1": 1}, {1: True}, [(1, 2)]):
        with pytest.raises(ConfigError, match="queue_priority"):
            load_swf(path, queue_priority=bad)  # type: ignore[arg-type]


def test_gzip_is_read_transparently_whatever_the_name(tmp_path: Path) -> None:
    plain = load_swf(write(tmp_path, "tiny.swf", SWF_TEXT))
    gz = load_swf(write(tmp_path, "tiny.swf.gz", SWF_TEXT))
    disguised = write(tmp_path, "disguised.swf", gzip.compress(SWF_TEXT.encode()))
    assert gz.jobs == plain.jobs == load_swf(disguised).jobs
    assert gz.name == "tiny"
    philly = write(tmp_path, "p.csv.gz", PHILLY_TEXT)
    assert load_philly(philly).jobs == load_philly(write(tmp_path, "p.csv", PHILLY_TEXT)).jobs


# ---- Philly, openb, Tiresias -----------------------------------------------------------------------------
def test_philly_maps_size_duration_and_gives_multi_gpu_jobs_the_comm_sensitivity(tmp_path: Path) -> None:
    w = load_philly(write(tmp_path, "philly.csv", PHILLY_TEXT), comm_sensitivity=0.8)
    assert [j.job_id for j in w.jobs] == [0, 1, 3]
    assert w.skipped == {"zero_runtime": 1}
    assert w.machine_gpus == 0
    one, sixteen = w.jobs[0], w.jobs[1]
    assert (one.n_gpus, one.runtime_s, one.runtime_estimate_s, one.comm_sensitivity) == (1, 3613033, 3613033, 0.0)
    assert (sixteen.submit_time_s, sixteen.n_gpus, sixteen.runtime_s, sixteen.comm_sensitivity) == (
        266563.5,
        16,
        120,
        0.8,
    )
    assert load_philly(write(tmp_path, "philly.csv", PHILLY_TEXT)).jobs[1].comm_sensitivity == 0.5
    assert {(j.outcome, j.priority, j.preemptible) for j in w.jobs} == {(TraceOutcome.UNKNOWN, 0, False)}  # no status


def test_openb_pods_map_shares_types_and_per_gpu_resources(tmp_path: Path) -> None:
    w = load_openb(write(tmp_path, "pods.csv", OPENB_PODS_TEXT))
    assert w.skipped == {"cpu_only": 1, "never_scheduled": 1, "zero_runtime": 1}
    by_id = {j.job_id: j for j in w.jobs}
    assert sorted(by_id) == [0, 1, 4]
    frac = by_id[1]
    assert (frac.n_gpus, frac.gpu_milli, frac.is_fractional, frac.qos) == (1, 460, True, "BE")
    assert frac.gpu_types == frozenset({"T4", "V100M16"})
    assert (frac.submit_time_s, frac.runtime_s, frac.runtime_estimate_s) == (427061, 90, 90)  # deletion - scheduled
    assert (frac.cpu_milli_per_gpu, frac.ram_mib_per_gpu, frac.comm_sensitivity) == (6000, 12288, 0.0)
    eight = by_id[4]
    assert (eight.n_gpus, eight.gpu_milli, eight.gpu_types, eight.qos) == (8, 1000, frozenset({"G2"}), "Guaranteed")
    assert (eight.cpu_milli_per_gpu, eight.ram_mib_per_gpu) == (4001, 12501)  # rounded up
    assert (eight.runtime_s, eight.comm_sensitivity) == (990, 0.5)
    assert by_id[0].gpu_types == frozenset()


OPENB_PHASES_TEXT = """\
name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time
p1,1000,1024,1,1000,,LS,Succeeded,0,10,0
p2,1000,1024,1,500,,BE,Failed,1,10,1
p3,1000,1024,2,1000,,Burstable,Running,2,10,2
p4,1000,1024,1,1000,,Guaranteed,Pending,3,10,4
p5,1000,1024,1,1000,,BE,Unknown,4,10,5
p6,1000,1024,1,250,,LS,Pending,5,10,
"""


def test_openb_pod_phase_gives_the_outcome_and_qos_the_priority_class(tmp_path: Path) -> None:
    w = load_openb(write(tmp_path, "pods.csv", OPENB_PHASES_TEXT))
    assert w.skipped == {"never_scheduled": 1}
    got = {j.job_id: (j.qos, j.priority, j.preemptible, j.outcome) for j in w.jobs}
    assert got == {
        1: ("LS", 3, False, TraceOutcome.PASS),
        2: ("BE", 0, True, TraceOutcome.FAILED),
        3: ("Burstable", 1, False, TraceOutcome.UNKNOWN),  # still running when the phase was recorded
        4: ("Guaranteed", 2, False, TraceOutcome.UNKNOWN),
        5: ("BE", 0, True, TraceOutcome.UNKNOWN),
    }
    fixture = load_openb(write(tmp_path, "p.csv", OPENB_PODS_TEXT))
    assert {j.job_id: (j.priority, j.preemptible, j.outcome) for j in fixture.jobs} == {
        0: (3, False, TraceOutcome.UNKNOWN),  # LS, Running
        1: (0, True, TraceOutcome.FAILED),  # BE, Failed
        4: (2, False, TraceOutcome.PASS),  # Guaranteed, Succeeded
    }


def test_openb_pod_without_a_number_in_its_name_takes_its_row_index(tmp_path: Path) -> None:
    text = OPENB_PODS_TEXT.splitlines()[0] + "\nalpha,1000,1024,1,1000,,LS,Running,0,10,0\n"
    assert [j.job_id for j in load_openb(write(tmp_path, "pods.csv", text)).jobs] == [0]


def test_openb_node_list_keeps_gpu_nodes_one_island_each(tmp_path: Path) -> None:
    cluster = load_openb_cluster(write(tmp_path, "nodes.csv", OPENB_NODES_TEXT))
    assert [n.name for n in cluster.nodes] == ["openb-node-0001", "openb-node-0002"]
    p100, g2 = cluster.nodes
    assert (p100.gpu_type, p100.n_gpus, p100.islands) == ("P100", 2, ((0, 1),))
    assert (p100.cpu_milli, p100.ram_mib, p100.rack) == (64000, 262144, 0)
    assert (g2.gpu_type, g2.islands, g2.rack) == ("G2", (tuple(range(8)),), 0)
    assert (cluster.name, cluster.n_gpus) == ("nodes", 10)


def test_openb_node_list_puts_32_nodes_in_a_rack(tmp_path: Path) -> None:
    rows = [f"n{i},1000,1024,1,T4" for i in range(70)]
    cluster = load_openb_cluster(write(tmp_path, "nodes.csv", "sn,cpu_milli,memory_mib,gpu,model\n" + "\n".join(rows)))
    assert [n.rack for n in cluster.nodes][30:34] == [0, 0, 1, 1]
    assert cluster.n_racks == 3


def test_tiresias_maps_gpus_and_duration(tmp_path: Path) -> None:
    w = load_tiresias(write(tmp_path, "60_job.csv", TIRESIAS_TEXT), comm_sensitivity=0.25)
    assert w.skipped == {"no_gpus": 1, "zero_runtime": 1}
    assert [(j.job_id, j.n_gpus, j.submit_time_s, j.runtime_s, j.comm_sensitivity) for j in w.jobs] == [
        (0, 1, 0, 164, 0.0),
        (1, 8, 30, 147, 0.25),
    ]
    assert {(j.outcome, j.priority) for j in w.jobs} == {(TraceOutcome.UNKNOWN, 0)}  # no status or priority column


# ---- malformed input -------------------------------------------------------------------------------------
SWF_OK = "1 0 -1 10 1 -1 -1 -1 -1 -1 1 1 1 -1 -1 -1 -1 -1"
PHILLY_HEAD = PHILLY_TEXT.splitlines()[0]
PODS_HEAD = OPENB_PODS_TEXT.splitlines()[0]
NODES_HEAD = OPENB_NODES_TEXT.splitlines()[0]

MALFORMED = [
    ("swf", f"; MaxProcs: 4\n{SWF_OK}\n1 0 -1 10 1 -1 -1 -1\n", 3, "8 fields, but an SWF record has 18"),
    ("swf", f"{SWF_OK}\n\n2 0 -1 ten 1 -1 -1 -1 -1 -1 1 1 1 -1 -1 -1 -1 -1\n", 3, "field 4 (run time) 'ten' is not"),
    ("swf", "2 0 -1 nan 1 -1 -1 -1 -1 -1 1 1 1 -1 -1 -1 -1 -1\n", 1, "field 4 (run time) 'nan' is not a number"),
    ("swf", "2 0 -1 1e999 1 -1 -1 -1 -1 -1 1 1 1 -1 -1 -1 -1 -1\n", 1, "not a finite number"),
    ("swf", "2.5 0 -1 10 1 -1 -1 -1 -1 -1 1 1 1 -1 -1 -1 -1 -1\n", 1, "field 1 (job number) '2.5' is not a whole"),
    ("swf", "2 0 -1 10 1.5 -1 -1 -1 -1 -1 1 1 1 -1 -1 -1 -1 -1\n", 1, "field 5 (allocated processors) '1.5'"),
    ("swf", f"{SWF_OK}\n{SWF_OK}\n", 2, "job id 1 repeats the id of line 1"),
    ("swf", f"; MaxProcs: lots\n{SWF_OK}\n", 1, "header MaxProcs 'lots' is not a number"),
    ("swf", b"; caf\xe9\n" + SWF_OK.encode(), 1, "is not UTF-8"),
    ("philly", "job,arrival\n0,1\n", 1, "header lacks column(s) #job id, arrival time (sec)"),
    ("philly", f"{PHILLY_HEAD}\n0,0,CLOS,4+4,16,10\n", 2, "shape '4+4' sums to 8 GPUs, but size is 16"),
    ("philly", f"{PHILLY_HEAD}\n0,0,CLOS,1,1,-5\n", 2, "duration '-5' must be >= 0"),
    ("philly", f"{PHILLY_HEAD}\n0,0,CLOS,2,two,10\n", 2, "size 'two' is not a number"),
    ("philly", f"{PHILLY_HEAD}\n0,0,CLOS,1,1\n", 2, "5 fields, but the header has 6"),
    ("openb", f"{PODS_HEAD}\np1,1000,1024,1,0,,LS,Running,0,10,0\n", 2, "gpu_milli '0' must be in 1..1000"),
    ("openb", f"{PODS_HEAD}\np1,1000,1024,1,500,,LS,Running,10,20,5\n", 2, "scheduled_time 5 is before creation"),
    ("openb", f"{PODS_HEAD}\np1,1000,1024,1,500,,LS,Running,10,20,30\n", 2, "deletion_time 20 is before scheduled"),
    ("openb", f"{PODS_HEAD}\np1,1000,1024,-1,500,,LS,Running,0,10,0\n", 2, "num_gpu '-1' must be >= 0"),
    ("openb", f"{PODS_HEAD}\np1,1000,1024,1,500,,LS,Running,0,10,0\nq1,1,1,1,500,,LS,Running,0,10,0\n", 3,
     "job id 1 repeats the id of line 2"),
    ("openb", f"{PODS_HEAD}\np1,1000,1024,1,500,,LS,Running,0,10,0\np2,1,1,1,500,,LS,Completed,0,10,0\n", 3,
     "pod_phase 'Completed' is not one of Succeeded, Failed, Running, Pending, Unknown"),
    ("openb", f"{PODS_HEAD}\np1,1000,1024,1,500,,LS,running,0,10,0\n", 2, "pod_phase 'running' is not one of"),
    ("openb", f"{PODS_HEAD}\np1,1000,1024,0,0,,LS,,0,10,0\n", 2, "pod_phase '' is not one of"),  # even if skipped
    ("openb", f"{PODS_HEAD}\np1,1000,1024,1,500,,Gold,Running,0,10,0\n", 2,
     "qos 'Gold' is not one of LS, Guaranteed, Burstable, BE"),
    ("tiresias", f"{TIRESIAS_TEXT.splitlines()[0]}\n0,1.5,0,1,m,10,1\n", 2, "num_gpu '1.5' is not a whole number"),
]  # fmt: skip

NODE_MALFORMED = [
    (f"{NODES_HEAD}\nn0,1000,1024,2,Z9\n", 2, "model 'Z9' is not a known GPU type"),
    (f"{NODES_HEAD}\nn0,1000,1024,2,T4\nn0,1000,1024,2,T4\n", 3, "node sn 'n0' repeats the sn of line 2"),
    (f"{NODES_HEAD}\nn0,1000,1024,2,\n", 2, "model '' is not a known GPU type"),
    (f"{NODES_HEAD}\nn0,1000,1024,0,\nn1,1000,1024,0,\n", 3, "the node list has no GPU node"),
    (f"{NODES_HEAD}\nn0,1000,1024,100000,T4\n", 2, "must be <= 256 per node"),
]

LOADERS = {"swf": load_swf, "philly": load_philly, "openb": load_openb, "tiresias": load_tiresias}


@pytest.mark.parametrize(("fmt", "text", "line", "fragment"), MALFORMED)
def test_malformed_record_names_file_line_field_and_value(
    tmp_path: Path, fmt: str, text: str | bytes, line: int, fragment: str
) -> None:
    path = write(tmp_path, f"bad.{fmt}", text)
    with pytest.raises(TraceFormatError) as info:
        LOADERS[fmt](path)
    assert (info.value.path, info.value.line) == (str(path), line)
    assert str(info.value).startswith(f"{path} line {line}: ")
    assert fragment in str(info.value)


@pytest.mark.parametrize(("text", "line", "fragment"), NODE_MALFORMED)
def test_malformed_node_list_names_file_line_and_value(tmp_path: Path, text: str, line: int, fragment: str) -> None:
    path = write(tmp_path, "nodes.csv", text)
    with pytest.raises(TraceFormatError, match=f"line {line}: ") as info:
        load_openb_cluster(path)
    assert fragment in str(info.value)


def test_truncated_gzip_is_a_trace_format_error(tmp_path: Path) -> None:
    data = gzip.compress((SWF_OK + "\n").encode() * 50)
    path = write(tmp_path, "cut.swf.gz", b"")
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(TraceFormatError, match="corrupt gzip data"):
        load_swf(path)


def test_bad_comm_sensitivity_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="comm_sensitivity"):
        load_philly(write(tmp_path, "p.csv", PHILLY_TEXT), comm_sensitivity=1.5)


# ---- detection and dispatch ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "text", "fmt"),
    [
        ("a.swf", SWF_OK, "swf"),
        ("a.swf.gz", SWF_OK, "swf"),
        ("a.txt", SWF_TEXT, "swf"),
        ("a.csv", PHILLY_TEXT, "philly"),
        ("a.csv.gz", PHILLY_TEXT, "philly"),
        ("a.csv", OPENB_PODS_TEXT, "openb"),
        ("a.csv", "\n" + TIRESIAS_TEXT, "tiresias"),
    ],
)
def test_detect_format_by_name_then_first_line(tmp_path: Path, name: str, text: str, fmt: str) -> None:
    path = write(tmp_path, name, text)
    assert detect_format(path) == fmt
    assert len(load_trace(path)) > 0


@pytest.mark.parametrize(("text", "fragment"), [(OPENB_NODES_TEXT, "openb node list"), ("a,b\n1,2\n", "'a,b'")])
def test_unknown_format_is_reported_with_the_known_ones(tmp_path: Path, text: str, fragment: str) -> None:
    path = write(tmp_path, "x.csv", text)
    with pytest.raises(UnknownTraceFormat, match="unknown trace format") as info:
        load_trace(path)
    assert fragment in str(info.value)
    assert "swf, philly, openb, tiresias" in str(info.value)


def test_load_trace_with_explicit_format_skips_detection(tmp_path: Path) -> None:
    path = write(tmp_path, "no_header.dat", SWF_OK + "\n")
    with pytest.raises(UnknownTraceFormat):
        load_trace(path)
    assert [j.job_id for j in load_trace(path, "swf").jobs] == [1]
    with pytest.raises(ConfigError, match="unknown format 'xml'"):
        load_trace(path, "xml")


# ---- the small real traces -------------------------------------------------------------------------------
def test_lublin_loads_every_job_on_a_256_processor_machine(traces_dir: Path) -> None:
    w = load_swf(traces_dir / "lublin-synthetic" / "lublin_256.swf")
    assert (len(w), w.skipped, w.machine_gpus) == (10_000, {}, 256)
    first = w.jobs[0]
    assert (first.job_id, first.submit_time_s, first.runtime_s, first.runtime_estimate_s, first.n_gpus) == (
        1,
        5094,
        12072,
        12072,
        16,
    )


def test_openb_pod_lists_load_with_the_published_counts(traces_dir: Path) -> None:
    folder = traces_dir / "alibaba-openb-gpu-v2023"
    default = load_openb(folder / "openb_pod_list_default.csv")
    assert default.skipped == {"cpu_only": 1088, "never_scheduled": 861}
    assert len(default) == 8152 - 1088 - 861
    pod1 = next(j for j in default.jobs if j.job_id == 1)
    assert (pod1.gpu_milli, pod1.cpu_milli_per_gpu, pod1.ram_mib_per_gpu, pod1.qos) == (460, 6000, 12288, "LS")
    assert pod1.runtime_s == 12902960 - 427061
    typed = load_openb(folder / "openb_pod_list_gpuspec33.csv")
    assert [j.job_id for j in typed.jobs] == [j.job_id for j in default.jobs]
    assert all(j.gpu_types <= {"A10", "G2", "G3", "P100", "T4", "V100M16", "V100M32"} for j in typed.jobs)
    assert 0.25 < sum(1 for j in typed.jobs if j.gpu_types) / len(typed) < 0.4


def test_openb_node_lists_give_the_same_6212_gpus(traces_dir: Path) -> None:
    folder = traces_dir / "alibaba-openb-gpu-v2023"
    gpu_nodes = load_openb_cluster(folder / "openb_node_list_gpu_node.csv")
    all_nodes = load_openb_cluster(folder / "openb_node_list_all_node.csv")
    for cluster in (gpu_nodes, all_nodes):
        assert (cluster.n_nodes, cluster.n_gpus, cluster.n_racks) == (1213, 6212, 38)
        assert set(cluster.type_names) == {"A10", "G2", "G3", "P100", "T4", "V100M16", "V100M32"}


def _openb_outcomes_by_csv(path: Path) -> tuple[Counter[str], Counter[str]]:
    """(pod_phase counts, qos counts) of the pods the loader keeps, counted with the csv module."""
    with open(path, newline="") as f:
        kept = [r for r in csv.DictReader(f)
                if int(r["num_gpu"]) > 0 and r["scheduled_time"] and r["deletion_time"] != r["scheduled_time"]]
    return Counter(r["pod_phase"] for r in kept), Counter(r["qos"] for r in kept)


@pytest.mark.parametrize("name", ["openb_pod_list_default.csv", "openb_pod_list_gpuspec33.csv"])
def test_openb_outcome_and_priority_counts_match_the_csv(traces_dir: Path, name: str) -> None:
    path = traces_dir / "alibaba-openb-gpu-v2023" / name
    phases, qos = _openb_outcomes_by_csv(path)
    assert phases == {"Running": 4149, "Failed": 1869, "Succeeded": 185}  # no Pending pod was ever scheduled
    assert qos == {"LS": 3590, "BE": 2510, "Burstable": 97, "Guaranteed": 6}
    w = load_openb(path)
    outcomes = Counter(j.outcome for j in w.jobs)
    assert outcomes == {TraceOutcome.PASS: phases["Succeeded"], TraceOutcome.FAILED: phases["Failed"],
                        TraceOutcome.UNKNOWN: phases["Running"]}
    priorities = Counter((j.priority, j.preemptible) for j in w.jobs)
    assert priorities == {(3, False): qos["LS"], (2, False): qos["Guaranteed"], (1, False): qos["Burstable"],
                          (0, True): qos["BE"]}


@pytest.mark.parametrize(
    ("rel", "statuses"),
    [
        ("lublin-synthetic/lublin_256.swf", {1: 10_000}),
        ("pwa-nasa-ipsc/NASA-iPSC-1993-3.1-cln.swf.gz", {-1: 18_066}),
    ],
)
def test_swf_outcome_counts_match_the_status_field(traces_dir: Path, rel: str, statuses: dict[int, int]) -> None:
    path = traces_dir / rel
    opener = gzip.open if rel.endswith(".gz") else open
    with opener(path, "rt") as f:  # type: ignore[operator]
        records = [line.split() for line in f if line.strip() and not line.startswith(";")]
    kept = [r for r in records if float(r[1]) >= 0 and float(r[3]) > 0]  # what the loader keeps (all have processors)
    counted = Counter(int(r[10]) for r in kept)
    assert counted == statuses
    by_status = {1: TraceOutcome.PASS, 0: TraceOutcome.FAILED, 5: TraceOutcome.KILLED, -1: TraceOutcome.UNKNOWN}
    w = load_swf(path)
    assert Counter(j.outcome for j in w.jobs) == {by_status[k]: n for k, n in counted.items()}


def test_tiresias_example_loads_60_jobs(traces_dir: Path) -> None:
    w = load_trace(traces_dir / "tiresias-sim" / "60_job.csv")
    assert (len(w), w.skipped) == (60, {})
    assert {j.n_gpus for j in w.jobs} == {1, 2, 4, 8}
    assert {j.outcome for j in w.jobs} == {TraceOutcome.UNKNOWN}
