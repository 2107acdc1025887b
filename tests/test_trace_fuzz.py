"""Fuzzing the trace loaders: corrupt one line of a valid file; loading succeeds or raises TraceFormatError.

The operator exports (sacct, Helios, scontrol, sinfo, kubectl) are fuzzed the same way, a field at a time.
A TraceFormatError must name the file and a line, and that line must be the corrupted one (or one it was split
into by an inserted newline); the exceptions are a record whose corrupted id repeats a later record's (the error
is at the later line and names the corrupted one) and a header whose field count changed (the first data row is
blamed, naming the header). No other exception may escape. A successful load accounts for every record.
"""

from __future__ import annotations

import gzip
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from envs.core.errors import TraceFormatError
from envs.workload import (
    Workload,
    load_openb,
    load_openb_cluster,
    load_philly,
    load_swf,
    load_tiresias,
    load_trace,
)
from envs.workload.operators.kubectl_nodes import read_kubectl_nodes
from envs.workload.operators.slurm_nodes import read_scontrol_nodes, read_sinfo_nodes

SAMPLES: dict[str, tuple[str, str, Callable[[Path], Any]]] = {
    # format: (file name, valid content, loader)
    "swf": (
        "fuzz_trace.swf",
        "; Version: 2\n; MaxNodes: 16\n; MaxProcs: 64\n"
        "1 0 5 100 4 -1 -1 8 200 -1 1 7 3 -1 -1 -1 -1 -1\n"
        "2 10 -1 50 2 -1 -1 -1 -1 -1 1 -1 -1 -1 -1 -1 -1 -1\n"
        "3 10 -1 0 2 -1 -1 -1 -1 -1 5 1 1 -1 -1 -1 -1 -1\n"
        "4 20.5 -1 12.5 1 -1 -1 -1 7.25 -1 1 2 1 -1 -1 -1 -1 -1\n",
        load_swf,
    ),
    "philly": (
        "fuzz_philly.csv",
        "#job id,arrival time (sec),topology,shape,size,duration (sec)\n"
        "0,0.0,CLOS,1,1,3613033.0\n1,266563.5,CLOS,8+8,16,120.0\n2,266563.5,CLOS,2+2,4,0.0\n3,300000.0,CLOS,4,4,60.0\n",
        load_philly,
    ),
    "openb": (
        "fuzz_pods.csv",
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,"
        "scheduled_time\n"
        "openb-pod-0000,12000,16384,1,1000,,LS,Running,0,12537496,0\n"
        "openb-pod-0001,6000,12288,1,460,T4|V100M16,BE,Failed,427061,427161,427071\n"
        "openb-pod-0002,8000,4096,0,0,,BE,Succeeded,500,600,500\n"
        "openb-pod-0003,4000,8192,1,300,,BE,Pending,600,900,\n"
        "openb-pod-0004,32001,100001,8,1000,G2,Guaranteed,Succeeded,700,1700,710\n",
        load_openb,
    ),
    "openb_nodes": (
        "fuzz_nodes.csv",
        "sn,cpu_milli,memory_mib,gpu,model\nopenb-node-0000,32000,262144,0,\n"
        "openb-node-0001,64000,262144,2,P100\nopenb-node-0002,96000,393216,8,G2\nopenb-node-0003,16000,1024,1,T4\n",
        load_openb_cluster,
    ),
    "tiresias": (
        "fuzz_tiresias.csv",
        "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n"
        "0,1,0,606,vgg19,164,30\n1,8,30,133,vgg11,147,23\n2,0,53,157,inception4,127,26\n3,2,79,513,vgg16,0,20\n",
        load_tiresias,
    ),
}

GARBAGE = [
    "", " ", "nan", "NaN", "inf", "-inf", "-1", "-7", "0", "0.5", "1e400", "-1e400", "9" * 400, "1e308", "abc",
    "١٢", "１２", "\x00", "+", "1_000", ",", ";", "|", "+", "\u2028", "\x85", "\r", "é", "🙂", "#", '"',
]  # fmt: skip

texts = st.text(max_size=6) | st.sampled_from(GARBAGE)


@st.composite
def corrupted_file(draw: st.DrawFn, fmt: str) -> tuple[bytes, int, int]:
    """(file bytes, 1-based number of the corrupted line, newlines the corruption inserted)."""
    lines = SAMPLES[fmt][1].splitlines()
    index = draw(st.integers(0, len(lines) - 1))
    line = lines[index].encode()
    sep = " " if fmt == "swf" else ","
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["delete", "insert", "insert_bytes", "drop", "replace", "duplicate", "line"]))
        text = line.decode("utf-8", errors="surrogateescape")
        fields = text.split(sep)
        at = draw(st.integers(0, len(fields) - 1))
        if op == "delete" and line:
            start = draw(st.integers(0, len(line) - 1))
            line = line[:start] + line[start + draw(st.integers(1, 8)) :]
        elif op in ("insert", "insert_bytes"):
            pos = draw(st.integers(0, len(line)))
            extra = draw(st.binary(max_size=4)) if op == "insert_bytes" else draw(texts).encode()
            line = line[:pos] + extra + line[pos:]
        elif op in ("drop", "replace", "duplicate"):
            new = {"drop": [], "replace": [draw(texts)], "duplicate": [fields[at], fields[at]]}[op]
            fields[at : at + 1] = new
            line = sep.join(fields).encode("utf-8", errors="surrogateescape")
        elif op == "line":
            line = draw(texts).encode()
    data = b"\n".join([*(x.encode() for x in lines[:index]), line, *(x.encode() for x in lines[index + 1 :])]) + b"\n"
    return data, index + 1, line.count(b"\n")


def count_records(data: bytes, fmt: str) -> int:
    """Data records of a successfully read file: non-blank, non-comment (SWF) or after the header (CSV)."""
    lines = [x for x in data.decode("utf-8").removeprefix("\ufeff").split("\n") if x.strip()]
    return sum(1 for x in lines if not x.strip().startswith(";")) if fmt == "swf" else len(lines) - 1


def check_error(exc: TraceFormatError, path: Path, line: int, inserted: int) -> None:
    message = str(exc)
    assert exc.path == str(path) and path.name in message
    assert message.startswith(f"{path} line {exc.line}: ")
    blamed = range(line, line + inserted + 1)
    named = any(re.search(rf"\bline {n}\b", message) for n in blamed)
    assert named or (line == 1 and "header" in message), message


@pytest.fixture(scope="module")
def fuzz_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One folder for the fuzzed files (each example overwrites its format's file)."""
    return tmp_path_factory.mktemp("fuzz")


@pytest.mark.parametrize("fmt", list(SAMPLES))
def test_valid_samples_load(fuzz_dir: Path, fmt: str) -> None:
    name, text, loader = SAMPLES[fmt]
    (fuzz_dir / name).write_text(text)
    assert loader(fuzz_dir / name)


@pytest.mark.parametrize("fmt", list(SAMPLES))
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_corrupted_line_loads_or_raises_trace_format_error_naming_it(
    fuzz_dir: Path, fmt: str, data: st.DataObject
) -> None:
    content, line, inserted = data.draw(corrupted_file(fmt))
    name, _, loader = SAMPLES[fmt]
    path = fuzz_dir / name
    path.write_bytes(content)
    try:
        result = loader(path)
    except TraceFormatError as exc:
        check_error(exc, path, line, inserted)
        return
    if isinstance(result, Workload):
        assert len(result) + sum(result.skipped.values()) == count_records(content, fmt)
        keys = [(j.submit_time_s, j.job_id) for j in result.jobs]
        assert keys == sorted(keys)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(fmt=st.sampled_from(["swf", "philly", "openb"]), cut=st.floats(0, 1), flips=st.lists(st.integers(0, 10**6)))
def test_damaged_gzip_loads_or_raises_trace_format_error(
    fuzz_dir: Path, fmt: str, cut: float, flips: list[int]
) -> None:
    name, text, loader = SAMPLES[fmt]
    raw = bytearray(gzip.compress(text.encode() * 3, mtime=0))
    for flip in flips:
        raw[flip % len(raw)] ^= 0xFF
    path = fuzz_dir / (name + ".gz")
    path.write_bytes(bytes(raw[: max(1, int(len(raw) * cut))]))
    try:
        loader(path)
    except TraceFormatError as exc:
        assert path.name in str(exc) and re.search(r" line \d+: ", str(exc))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(content=st.binary(max_size=200) | st.text(max_size=200).map(str.encode))
def test_detecting_and_loading_arbitrary_bytes_raises_only_trace_format_error(fuzz_dir: Path, content: bytes) -> None:
    path = fuzz_dir / "arbitrary.csv"
    path.write_bytes(content)
    try:
        load_trace(path)
    except TraceFormatError as exc:
        assert path.name in str(exc)


EXPORTS = Path(__file__).resolve().parent / "data" / "exports"


EXPORT_LOADERS: dict[str, Callable[[Path], Any]] = {
    "sacct.txt": lambda p: load_trace(p, "sacct"),
    "helios_cluster_log.csv": lambda p: load_trace(p, "helios"),
    "scontrol_nodes.txt": read_scontrol_nodes,
    "sinfo_nodes.txt": read_sinfo_nodes,
    "kubectl_nodes.json": read_kubectl_nodes,
    "kubectl_pods.json": lambda p: load_trace(p, "pods"),
    "kueue_workloads.json": lambda p: load_trace(p, "kueue"),
}
"""Each operator export of tests/data/exports and its loader."""


@pytest.mark.parametrize("name", list(EXPORT_LOADERS))
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_mutated_export_loads_or_raises_trace_format_error(fuzz_dir: Path, name: str, data: st.DataObject) -> None:
    lines = (EXPORTS / name).read_text().splitlines()
    index = data.draw(st.integers(0, len(lines) - 1))
    pieces = re.split(r"([|,= :\"\[\]{}])", lines[index])  # fields and their separators
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(pieces) - 1))
        pieces[at] = data.draw(texts)
    lines[index] = "".join(pieces)
    path = fuzz_dir / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8", errors="surrogateescape")
    try:
        EXPORT_LOADERS[name](path)
    except TraceFormatError as exc:
        assert path.name in str(exc) and re.search(r" line \d+: ", str(exc))
