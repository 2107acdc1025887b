"""Nothing silently wrong: rejected jobs and skipped records are counted and said, a run that schedules nothing is an
error, and the utilization over time never exceeds the cluster."""

from __future__ import annotations

import subprocess
import sys

from paths import ROOT

from evaluation.report import read_summary
from evaluation.runner import RunSpec, run

SWF = "{id} {submit} -1 100 {procs} -1 -1 {procs} 100 -1 1 1 1 -1 1 -1 -1 -1"


def evaluate(tmp_path, records: list[str], *args: str) -> subprocess.CompletedProcess:
    trace = tmp_path / "jobs.swf"
    trace.write_text("\n".join(records) + "\n")
    return subprocess.run([sys.executable, str(ROOT / "evaluate.py"), "--workload", f"swf:{trace}", "--cluster",
                           "tiny", "--policies", "fcfs", "--seeds", "0", "--workers", "1", "--no-plots",
                           "--out", str(tmp_path / "out"), *args], cwd=ROOT, capture_output=True, text=True)


def test_a_run_whose_jobs_are_all_rejected_is_an_error(tmp_path):
    done = evaluate(tmp_path, [SWF.format(id=i, submit=10 * i, procs=64) for i in range(1, 4)], "--json")
    errors = [line for line in done.stderr.splitlines() if "error" in line]
    assert done.returncode == 2 and len(errors) == 1 and done.stdout == ""
    assert "all 3 jobs were rejected at submission (too_many_gpus 3), so nothing was scheduled" in done.stderr


def test_rejected_jobs_and_skipped_records_are_said_and_counted(tmp_path):
    records = [SWF.format(id=1, submit=0, procs=2), SWF.format(id=2, submit=5, procs=64),
               SWF.format(id=3, submit=9, procs=1).replace(" -1 100 1 ", " -1 0 1 ", 1)]  # a run time of 0
    done = evaluate(tmp_path, records)
    assert done.returncode == 0, done.stderr
    assert "1 trace records skipped (zero_runtime 1)" in done.stderr
    assert "1 of 2 jobs were rejected at submission, in 1 of 1 runs (too_many_gpus 1)" in done.stderr
    assert "n_rejected" in done.stdout.splitlines()[0]  # the table shows the column when a job was rejected
    summary = read_summary(tmp_path / "out")
    assert list(summary["skipped_records"].values()) == [{"zero_runtime": 1}]
    metrics = summary["results"][0]["metrics"]
    assert metrics["n_rejected"] == 1 and metrics["rejected_too_many_gpus"] == 1


def test_utilization_over_time_counts_only_the_time_jobs_held_gpus():
    row, trace, _ = run(RunSpec("tiresias", "small", "tiny", seed=0))
    assert row["preemptions"] > 0
    events = sorted([(a, share) for a, _, share in trace["intervals"]]
                    + [(b, -share) for _, b, share in trace["intervals"]])  # at one time, ends before starts
    held = peak = 0.0
    for _, change in events:
        held += change
        peak = max(peak, held)
    assert peak <= trace["total_gpus"] + 1e-9
    assert len(trace["intervals"]) > row["n_completed"]  # a preempted job's runs are drawn apart
    busy = sum((b - a) * share for a, b, share in trace["intervals"])
    assert busy <= row["makespan_s"] * trace["total_gpus"]


def test_a_scenario_naming_a_missing_node_fails_before_any_run(tmp_path):
    scenario = tmp_path / "bad.yaml"
    scenario.write_text("failures:\n  schedule:\n    - {node: 99, fail_s: 10, repair_s: 60}\n")
    done = subprocess.run([sys.executable, str(ROOT / "evaluate.py"), "--workload", "small", "--cluster", "tiny",
                           "--policies", "fifo,sjf", "--scenario", f"none,{scenario}", "--seeds", "0",
                           "--workers", "1", "--no-plots", "--out", str(tmp_path / "out")], cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 2 and "failures.schedule[0].node: 99 is not a node of tiny (0..1)" in done.stderr
    assert not (tmp_path / "out" / "runs.jsonl").exists()  # not after the scenario-free runs had run
