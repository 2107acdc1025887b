"""The workload inspector: every shared trace through ``python -m envs.workload PATH --json``, and its logic.

All trace commands start at once, and their results are cached, so each trace (LLNL and Philly are the big ones)
is loaded exactly once per session and the runs overlap.
"""

from __future__ import annotations

import functools
import gzip
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from paths import ROOT

from envs.core.job import Job, TraceOutcome
from envs.workload import Workload
from envs.workload.inspect import format_report, gpu_mix_buckets, inspect_workload, main

TRACE_FILES = {
    "lublin": "lublin-synthetic/lublin_256.swf",
    "nasa": "pwa-nasa-ipsc/NASA-iPSC-1993-3.1-cln.swf.gz",
    "llnl": "pwa-llnl-atlas/LLNL-Atlas-2006-2.1-cln.swf.gz",
    "philly": "philly-rfold/philly_trace.csv.gz",
    "openb_default": "alibaba-openb-gpu-v2023/openb_pod_list_default.csv",
    "openb_gpuspec33": "alibaba-openb-gpu-v2023/openb_pod_list_gpuspec33.csv",
    "tiresias": "tiresias-sim/60_job.csv",
    "openb_nodes": "alibaba-openb-gpu-v2023/openb_node_list_gpu_node.csv",
}


def run_cli(*args: str) -> subprocess.Popen[str]:
    """Start ``python -m envs.workload ARGS`` in the project root."""
    return subprocess.Popen(
        [sys.executable, "-m", "envs.workload", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@functools.lru_cache(maxsize=1)
def run_all_traces(traces: Path) -> dict[str, tuple[int, str, str]]:
    """(exit status, stdout, stderr) of ``--json`` on every shared trace, run in parallel, once per session."""
    procs = {key: run_cli(str(traces / rel), "--json") for key, rel in TRACE_FILES.items()}
    results = {}
    for key, proc in procs.items():
        out, err = proc.communicate(timeout=120)
        results[key] = (proc.returncode, out, err)
    return results


@pytest.fixture
def cli_runs(traces_dir: Path) -> dict[str, tuple[int, str, str]]:
    """The inspector's results on every shared trace (skips when the traces are absent)."""
    return run_all_traces(traces_dir)


def report(cli_runs: dict[str, tuple[int, str, str]], key: str) -> dict[str, Any]:
    """The parsed JSON report of one trace; the command must have succeeded and printed only that object."""
    status, out, err = cli_runs[key]
    assert status == 0, err
    parsed = json.loads(out)  # fails on anything but exactly one JSON document
    assert isinstance(parsed, dict)
    return parsed


@pytest.mark.parametrize(
    ("key", "records", "jobs", "skipped", "capacity"),
    [
        ("lublin", 10_000, 10_000, {}, 256),
        ("nasa", 18_239, 18_066, {"zero_runtime": 173}, 128),
        ("llnl", 43_778, 36_600, {"zero_runtime": 7_178}, 9_216),
        ("philly", 111_549, 111_539, {"zero_runtime": 10}, None),  # capacity: the preset, checked below
        ("openb_default", 8_152, 6_203, {"cpu_only": 1_088, "never_scheduled": 861}, 6_212),
        ("openb_gpuspec33", 8_152, 6_203, {"cpu_only": 1_088, "never_scheduled": 861}, 6_212),
        ("tiresias", 60, 60, {}, None),
    ],
)
def test_every_shared_trace_loads_through_the_inspector(
    cli_runs: dict[str, tuple[int, str, str]],
    key: str,
    records: int,
    jobs: int,
    skipped: dict[str, int],
    capacity: int | None,
) -> None:
    r = report(cli_runs, key)
    assert (r["records"], r["jobs"], r["skipped"], r["skipped_total"]) == (records, jobs, skipped, records - jobs)
    assert sum(r["gpu_mix"].values()) == sum(r["gpu_mix_buckets"].values()) == jobs
    assert r["submit_span_s"] == pytest.approx(r["submit_last_s"] - r["submit_first_s"])
    if capacity is not None:
        assert r["capacity_gpus"] == capacity
        assert r["offered_load"] == pytest.approx(r["gpu_hours"] * 3600 / (capacity * r["submit_span_s"]))


def test_swf_reports_match_the_published_logs(cli_runs: dict[str, tuple[int, str, str]]) -> None:
    lublin, nasa, llnl = (report(cli_runs, k) for k in ("lublin", "nasa", "llnl"))
    assert (lublin["machine_gpus"], lublin["submit_first_s"], lublin["submit_last_s"]) == (256, 5094, 7_711_701)
    assert lublin["offered_load"] == pytest.approx(1.061, abs=1e-3)
    assert (nasa["machine_gpus"], nasa["submit_span_s"]) == (128, 7_948_936)
    assert set(nasa["gpu_mix"]) == {"1", "2", "4", "8", "16", "32", "64", "128"}  # the iPSC's power-of-two cubes
    assert nasa["offered_load"] == pytest.approx(0.466, abs=1e-3)
    assert llnl["machine_gpus"] == 9_216
    assert all(int(k) % 8 == 0 for k in llnl["gpu_mix"])  # Atlas allocates whole 8-processor nodes
    assert llnl["offered_load"] == pytest.approx(0.703, abs=1e-3)


def test_philly_report_has_the_published_gpu_mix(cli_runs: dict[str, tuple[int, str, str]]) -> None:
    r = report(cli_runs, "philly")
    published = {"1": 96_662, "2": 2_522, "4": 5_487, "8": 5_716, "16": 852, "32": 212, "128": 11}
    published["1"] -= 10  # the ten zero-duration jobs are one-GPU jobs
    assert {k: r["gpu_mix"][k] for k in published} == published
    assert r["submit_span_s"] == 11_176_511
    if r["capacity_gpus"] is not None:  # from the philly-like preset, when envs.core.presets is there
        assert r["capacity_source"] == "cluster preset philly-like"
        assert r["offered_load"] > 0


def test_openb_report_counts_fractional_pods(cli_runs: dict[str, tuple[int, str, str]]) -> None:
    r = report(cli_runs, "openb_default")
    assert r["gpu_mix"] == {"1": 3_556, "2": 15, "4": 15, "8": 44, "fractional": 2_573}
    assert r["capacity_source"].startswith("GPU nodes of ")
    assert report(cli_runs, "tiresias")["offered_load"] is None


def test_reports_count_jobs_by_recorded_outcome_and_priority_class(
    cli_runs: dict[str, tuple[int, str, str]], traces_dir: Path
) -> None:
    # openb: pod phases and qos classes of the loaded pods (counted with the csv module in test_trace_loaders.py)
    for key in ("openb_default", "openb_gpuspec33"):
        r = report(cli_runs, key)
        assert r["outcomes"] == {"pass": 185, "failed": 1_869, "unknown": 4_149}
        assert r["priorities"] == {"0": 2_510, "1": 97, "2": 6, "3": 3_590}  # BE, Burstable, Guaranteed, LS
    # LLNL Atlas: the status field of the records the loader keeps (run time > 0), counted here from the text
    with gzip.open(traces_dir / TRACE_FILES["llnl"], "rt") as f:
        records = [line.split() for line in f if line.strip() and not line.startswith(";")]
    status = {code: sum(1 for r in records if float(r[3]) > 0 and r[10] == code) for code in ("1", "0", "5")}
    assert status == {"1": 19_949, "0": 9_820, "5": 6_831}
    llnl = report(cli_runs, "llnl")
    assert llnl["outcomes"] == {"pass": status["1"], "failed": status["0"], "killed": status["5"]}
    assert llnl["priorities"] == {"0": 36_600}
    assert report(cli_runs, "lublin")["outcomes"] == {"pass": 10_000}
    for key, jobs in (("nasa", 18_066), ("philly", 111_539), ("tiresias", 60)):  # no status recorded
        r = report(cli_runs, key)
        assert (r["outcomes"], r["priorities"]) == ({"unknown": jobs}, {"0": jobs})


def test_node_list_is_refused_with_exit_status_2(cli_runs: dict[str, tuple[int, str, str]]) -> None:
    status, out, err = cli_runs["openb_nodes"]
    assert (status, out) == (2, "")
    assert "openb node list" in err and "unknown trace format" in err


# ---- the command's options and errors (in-process: main() returns the exit status) -------------------------
SWF_LINE = "1 0 -1 100 4 -1 -1 -1 -1 -1 1 1 1 -1 -1 -1 -1 -1\n2 100 -1 50 2 -1 -1 -1 -1 -1 1 1 1 -1 -1 -1 -1 -1\n"


def test_capacity_option_overrides_the_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "t.swf"
    path.write_text("; MaxProcs: 4\n" + SWF_LINE)
    assert main([str(path), "--json"]) == 0
    default = json.loads(capsys.readouterr().out)
    assert (default["capacity_gpus"], default["capacity_source"]) == (4, "MaxProcs/MaxNodes header")
    assert default["offered_load"] == pytest.approx((4 * 100 + 2 * 50) / (4 * 100))
    assert main([str(path), "--json", "--capacity", "8"]) == 0
    given = json.loads(capsys.readouterr().out)
    assert (given["capacity_gpus"], given["capacity_source"]) == (8, "given")
    assert given["offered_load"] == pytest.approx(default["offered_load"] / 2)


def test_format_option_reads_a_file_detection_cannot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "jobs.dat"
    path.write_text(SWF_LINE)
    assert main([str(path)]) == 2
    assert "unknown trace format" in capsys.readouterr().err
    assert main([str(path), "--format", "swf"]) == 0
    text = capsys.readouterr().out
    assert "jobs loaded     2" in text
    assert "offered load    unknown" in text  # no MaxProcs header and no --capacity


def test_malformed_trace_exits_2_naming_file_and_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.swf"
    path.write_text(SWF_LINE + "3 x\n")
    assert main([str(path), "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert f"{path} line 3: 2 fields" in captured.err


def test_missing_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path / "nope.swf")]) == 2
    assert "nope.swf: No such file" in capsys.readouterr().err


def test_unknown_format_exits_2_from_the_command_line(tmp_path: Path) -> None:
    path = tmp_path / "x.csv"
    path.write_text("a,b\n1,2\n")
    out, err = (proc := run_cli(str(path))).communicate(timeout=60)
    assert (proc.returncode, out) == (2, "")
    assert "unknown trace format" in err


# ---- the summary logic -------------------------------------------------------------------------------------
def test_inspect_workload_summarizes_mix_span_demand_and_load() -> None:
    jobs = [
        Job(0, 0.0, 3600.0, 3600.0, n_gpus=2),
        Job(1, 100.0, 7200.0, 7200.0, gpu_milli=250),
        Job(2, 400.0, 1800.0, 1800.0, n_gpus=8),
        Job(3, 400.0, 60.0, 60.0),
    ]
    w = Workload("w", tuple(jobs), skipped={"zero_runtime": 3})
    r = inspect_workload(w, capacity_gpus=16)
    assert (r["records"], r["jobs"], r["skipped_total"]) == (7, 4, 3)
    assert r["gpu_mix"] == {"1": 1, "2": 1, "8": 1, "fractional": 1}
    assert (r["submit_first_s"], r["submit_last_s"], r["submit_span_s"]) == (0.0, 400.0, 400.0)
    assert r["gpu_hours"] == pytest.approx(2 + 0.5 + 4 + 1 / 60)
    assert r["offered_load"] == pytest.approx(w.offered_load(16))
    assert (r["runtime_median_s"], r["runtime_max_s"]) == (2700.0, 7200.0)
    assert inspect_workload(w)["offered_load"] is None
    assert json.loads(json.dumps(r)) == r
    assert "fractional: 1 (25.0%)" in format_report(r)


def test_inspect_workload_counts_outcomes_and_priority_classes() -> None:
    jobs = [
        Job(0, 0.0, 10.0, 10.0, outcome=TraceOutcome.FAILED, priority=3),
        Job(1, 1.0, 10.0, 10.0, outcome=TraceOutcome.PASS),
        Job(2, 2.0, 10.0, 10.0, outcome=TraceOutcome.KILLED, priority=3),
        Job(3, 3.0, 10.0, 10.0, outcome=TraceOutcome.PASS, priority=-1),
        Job(4, 4.0, 10.0, 10.0, priority=3),
    ]
    r = inspect_workload(Workload("w", tuple(jobs)))
    assert r["outcomes"] == {"pass": 2, "failed": 1, "killed": 1, "unknown": 1}  # TraceOutcome's order
    assert list(r["outcomes"]) == ["pass", "failed", "killed", "unknown"]
    assert r["priorities"] == {"-1": 1, "0": 1, "3": 3}
    assert list(r["priorities"]) == ["-1", "0", "3"]  # increasing class, not text order
    assert json.loads(json.dumps(r)) == r
    text = format_report(r)
    assert "  outcome         pass: 2 (40.0%), failed: 1 (20.0%), killed: 1 (20.0%), unknown: 1 (20.0%)" in text
    assert "  priority class  -1: 1 (20.0%), 0: 1 (20.0%), 3: 3 (60.0%)" in text
    only = inspect_workload(Workload("w", tuple(jobs[1:2])))
    assert (only["outcomes"], only["priorities"]) == ({"pass": 1}, {"0": 1})  # outcomes no job has are left out


def test_empty_workload_report_has_no_figures() -> None:
    r = inspect_workload(Workload("empty", (), skipped={"cpu_only": 2}), capacity_gpus=4)
    assert (r["jobs"], r["records"], r["gpu_mix"], r["submit_first_s"], r["offered_load"]) == (0, 2, {}, None, 0.0)
    assert (r["outcomes"], r["priorities"]) == ({}, {})
    text = format_report(r)
    assert "jobs loaded     0" in text
    assert "  outcome         -" in text and "  priority class  -" in text


def test_gpu_mix_buckets_group_by_powers_of_two() -> None:
    mix = {"1": 1, "2": 1, "3": 1, "4": 1, "5": 1, "8": 1, "9": 1, "fractional": 2}
    assert gpu_mix_buckets(mix) == {"1": 1, "2": 1, "3-4": 2, "5-8": 2, "9-16": 1, "fractional": 2}
