"""The harness end to end: the CLI's run folder, backend independence, and the rlscheduler suite's peer rows."""

from __future__ import annotations

import csv
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
from paths import LUBLIN, ROOT

from envs.core import ConfigError
from evaluation.backends import execute
from evaluation.report import write_csv
from evaluation.runner import check
from evaluation.suites import suite_specs

SMALL = ["--workload", "small", "--cluster", "tiny", "--seeds", "0,1", "--policies", "fifo,sjf+easy/pack"]


def evaluate(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "evaluate.py"), *args], cwd=ROOT, capture_output=True,
                          text=True, check=True)


def test_cli_writes_the_run_folder_and_prints_a_table(tmp_path):
    done = evaluate(*SMALL, "--out", str(tmp_path), "--workers", "1")
    assert "| fifo | small | 2 |" in done.stdout and "sjf+easy/pack" in done.stdout
    for name in ("results.csv", "timing.csv", "summary.json"):
        assert (tmp_path / name).stat().st_size > 0
    rows = list(csv.DictReader((tmp_path / "results.csv").open()))
    assert len(rows) == 4 and {r["policy"] for r in rows} == {"fifo", "sjf+easy/pack"}
    if importlib.util.find_spec("matplotlib"):
        for name in ("wait_cdf.png", "bars.png", "utilization.png", "gantt.png"):
            assert (tmp_path / name).read_bytes()[:4] == b"\x89PNG"


def test_json_flag_prints_only_the_summary(tmp_path):
    done = evaluate(*SMALL, "--out", str(tmp_path), "--json", "--no-plots")
    summary = json.loads(done.stdout)
    assert [r["policy"] for r in summary["results"]] == ["fifo", "sjf+easy/pack"]
    entry = summary["results"][0]
    required = {"mean_wait_s", "p95_wait_s", "mean_bsld", "mean_jct_s", "utilization", "makespan_s"}
    assert entry["n_seeds"] == 2 and required <= set(entry["metrics"]) and set(entry["ci95"]) == set(entry["metrics"])
    assert "mean_wait_s" in summary["metric_docs"] and "fifo" in summary["decision_latency_us"]


def test_bad_arguments_exit_2_with_a_message():
    done = subprocess.run([sys.executable, str(ROOT / "evaluate.py"), "--policies", "nope"], cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 2 and "unknown order" in done.stderr


def results_csv(tmp_path: Path, name: str, **kwargs) -> str:
    specs = suite_specs("default", ["fifo", "fcfs+easy/pack", "fairshare/topology"], ["small"], "tiny", (0, 1, 2))
    rows = [row for row, _, _ in execute(specs, progress=False, **kwargs)]
    write_csv(tmp_path / name, rows)
    return (tmp_path / name).read_text()


def test_results_do_not_depend_on_workers_or_backend(tmp_path):
    one = results_csv(tmp_path, "one.csv", workers=1)
    assert one == results_csv(tmp_path, "two.csv", workers=2)
    if importlib.util.find_spec("ray") is None:
        pytest.skip("Ray is not installed (pip install 'gpusched[ray]')")
    assert one == results_csv(tmp_path, "ray.csv", workers=2, backend="ray")


PUBLISHED = {  # the peer's README row for Lublin-1 (reference/README.md)
    "rls:fcfs": 7273.77, "rls:sjf": 277.35, "rls:wfp3-peer": 19753.53, "rls:unicep-peer": 22274.74, "rls:f1": 258.37,
    "rls:fcfs+rlsbackfill": 235.82, "rls:sjf+rlsbackfill": 73.31, "rls:wfp3-peer+rlsbackfill": 133.87,
    "rls:unicep-peer+rlsbackfill": 307.23, "rls:f1+rlsbackfill": 75.07,
}


@pytest.mark.skipif(not LUBLIN.exists(), reason=f"lublin trace not found at {LUBLIN}")
def test_rlscheduler_suite_reproduces_the_ten_published_peer_numbers(tmp_path):
    done = evaluate("--suite", "rlscheduler", "--workload", f"swf:{LUBLIN}", "--json", "--no-plots",
                    "--policies", ",".join(PUBLISHED), "--out", str(tmp_path))
    results = json.loads(done.stdout)["results"]
    assert all(r["n_seeds"] == 10 for r in results)
    means = {r["policy"]: r["metrics"]["mean_bsld"] for r in results}
    assert means == pytest.approx(PUBLISHED, abs=0.005)


@pytest.mark.skipif(not LUBLIN.exists(), reason=f"lublin trace not found at {LUBLIN}")
def test_rls_window_past_the_trace_is_an_error():
    done = subprocess.run([sys.executable, str(ROOT / "evaluate.py"), "--suite", "rlscheduler", "--workload",
                           f"swf:{LUBLIN}", "--starts", "9500", "--policies", "rls:fcfs", "--no-plots"],
                          cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 2 and "outside" in done.stderr


def test_two_runs_with_the_same_name_and_seed_are_refused():
    from evaluation.aggregate import aggregate

    row = {"policy": "fifo", "workload": "trace.swf", "cluster": "c", "seed": 0, "load": 1.0, "mean_wait_s": 1.0}
    with pytest.raises(ValueError, match="distinct names"):
        aggregate([row, dict(row, mean_wait_s=2.0)])


def test_default_suite_runs_windows_of_a_trace_workload_with_starts():
    specs = suite_specs("default", ["fifo", "sjf"], ["philly:x.csv", "small"], "tiny", (7,), (1.0, 2.0),
                        starts=(10, 50), length=20)
    trace = [(s.policy, s.seed, s.load, s.window) for s in specs if s.workload == "philly:x.csv"]
    assert sorted(trace) == sorted((p, i, load, (start, 20)) for p in ("fifo", "sjf") for load in (1.0, 2.0)
                                   for i, start in enumerate((10, 50)))
    synthetic = [(s.seed, s.window) for s in specs if s.workload == "small"]
    assert synthetic == [(7, None)] * 4  # generator workloads keep their seeds, windows apply to traces only


def test_scenarios_run_the_same_runs_under_failures_and_outages(tmp_path):
    # Two policies under "flaky": each seed's failures and outages are the same for both (drawn from the seed), so
    # the scheduler's downtime, which no policy can change while jobs remain, agrees within a seed when both runs
    # last past the same outages; the static rows are those of a run without --scenario.
    scenario = tmp_path / "down.yaml"
    scenario.write_text("outages: {windows: [[600, 1800]]}\nfailures: {node_mtbf_s: 20000, mttr_s: 600}\n")
    done = evaluate(*SMALL, "--scenario", f"none,{scenario}", "--out", str(tmp_path / "out"), "--no-plots")
    assert "| fifo | small (down) | 2 |" in done.stdout and "| fifo | small | 2 |" in done.stdout
    rows = list(csv.DictReader((tmp_path / "out" / "results.csv").open()))
    down = [r for r in rows if r["workload"] == "small (down)"]
    assert len(down) == 4 and all(float(r["scheduler_downtime_s"]) == 1800 for r in down)
    assert all(float(r["failed_gpu_hours"]) > 0 for r in down)
    evaluate(*SMALL, "--out", str(tmp_path / "static"), "--no-plots")
    plain = list(csv.DictReader((tmp_path / "static" / "results.csv").open()))
    assert [r for r in rows if r["workload"] == "small"] == plain


def test_unknown_scenarios_and_peer_runs_with_dynamics_are_refused():
    bad = subprocess.run([sys.executable, str(ROOT / "evaluate.py"), *SMALL, "--scenario", "nope"], cwd=ROOT,
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "scenario 'nope': no such scenario (known: flaky, high, low, none, outages)" \
        in bad.stderr
    specs = suite_specs("rlscheduler", ["rls:fcfs"], [f"swf:{LUBLIN}"], starts=[0], length=16, dynamics=["low"])
    with pytest.raises(ConfigError, match="the peer engine has no failures or outages"):
        check(specs[0])


def test_metrics_window_is_recorded_and_a_rerun_with_another_window_computes_again(tmp_path):
    out = tmp_path / "out"
    evaluate(*SMALL, "--out", str(out), "--no-plots")
    whole = list(csv.DictReader((out / "results.csv").open()))
    assert "metrics_window" not in whole[0]  # the whole run's rows are as they were
    assert json.loads((out / "run.json").read_text())["metrics_window"] == [0.0, 0.0]

    done = evaluate(*SMALL, "--out", str(out), "--no-plots", "--metrics-window", "0.1")
    assert "already in" not in done.stderr and "steady state (--metrics-window): the first 10%" in done.stdout
    steady = list(csv.DictReader((out / "results.csv").open()))
    assert [r["metrics_window"] for r in steady] == ["0.1,0.1"] * 4
    assert all(int(s["n_jobs"]) == int(w["n_jobs"]) * 8 // 10 for s, w in zip(steady, whole, strict=True))
    assert [s["mean_wait_s"] for s in steady] != [w["mean_wait_s"] for w in whole]
    summary = json.loads((out / "run.json").read_text())
    assert summary["metrics_window"] == [0.1, 0.1] and "kept jobs" in summary["window_docs"]["mean_wait_s"]

    again = evaluate(*SMALL, "--out", str(out), "--no-plots", "--metrics-window", "0.1,0.1")
    assert "4 of 4 runs are already in" in again.stderr
    assert list(csv.DictReader((out / "results.csv").open())) == steady
    evaluate(*SMALL, "--out", str(out), "--no-plots", "--metrics-window", "0.05,0.2")
    assert {r["metrics_window"] for r in csv.DictReader((out / "results.csv").open())} == {"0.05,0.2"}
    assert len((out / "runs.jsonl").read_text().splitlines()) == 12  # three windows, each run once
    assert "4 of 4 runs are already in" in evaluate(*SMALL, "--out", str(out), "--no-plots").stderr
    assert list(csv.DictReader((out / "results.csv").open())) == whole


@pytest.mark.parametrize("window", ["-0.1", "0.5", "abc", "0.1,0.2,0.3", "nan", ""])
def test_bad_metrics_windows_exit_2_with_one_line(window):
    done = subprocess.run([sys.executable, str(ROOT / "evaluate.py"), *SMALL, "--metrics-window", window],
                          cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [f"evaluate.py: error: argument --metrics-window: expected a fraction F or "
                                        f"HEAD,TAIL, each >= 0 and < 0.5, got {window!r}"]


def test_a_window_with_an_empty_period_is_one_line(tmp_path):
    trace = tmp_path / "burst.swf"  # four jobs submitted at once: no period between the first and last kept
    trace.write_text("; MaxProcs: 4\n" + "".join(f"{i} 0 0 60 1 -1 -1 1 100 -1 1 1 -1 -1 -1 -1 -1 -1\n"
                                                  for i in range(1, 5)))
    done = subprocess.run([sys.executable, str(ROOT / "evaluate.py"), "--workload", f"swf:{trace}", "--policies",
                           "fifo", "--seeds", "0", "--json", "--out", str(tmp_path / "out"), "--metrics-window",
                           "0.25"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == ["evaluate.py: error: metrics window 0.25,0.25: the 2 kept jobs of 4 were "
                                        "all submitted at 0 s, so the period is empty"]


def test_the_steady_state_comparison_is_callable_from_another_script(tmp_path):
    sys.path.insert(0, str(ROOT / "docs" / "results"))
    try:
        from default_suite import steady_state_changes, steady_state_summaries, steady_state_table
    finally:
        sys.path.remove(str(ROOT / "docs" / "results"))
    whole, steady = steady_state_summaries(tmp_path, *SMALL, "--no-plots", "--workers", "1")
    lines = steady_state_table(whole, steady).splitlines()
    assert lines[0].startswith("| policy | workload | seeds | mean_wait_s (whole run) | mean_wait_s (steady state) |")
    assert [line.split(" | ")[0] for line in lines[2:]] == ["| fifo", "| sjf+easy/pack"]
    assert steady["metrics_window"] == [0.1, 0.1] and "utilization is higher for" in steady_state_changes(whole, steady)


def test_a_one_summary_comparison_is_the_plain_table():
    from evaluation.aggregate import aggregate, comparison_table, markdown_table

    rows = [{"policy": p, "workload": "w", "cluster": "c", "seed": s, "load": 1.0, "mean_wait_s": 10.0 * s + i}
            for i, p in enumerate(("fifo", "sjf")) for s in range(3)]
    summary = aggregate(rows)
    assert comparison_table({"": summary}, ["mean_wait_s"]) == markdown_table(summary, ["mean_wait_s"])
    both = comparison_table({"a": summary, "b": summary[:1]}, ["mean_wait_s"]).splitlines()
    assert both[0] == "| policy | workload | seeds | mean_wait_s (a) | mean_wait_s (b) |"
    assert both[3].endswith(" | — |")  # sjf is not in b


def test_learning_suite_names_the_validation_best_as_reference_before_the_test_seeds(tmp_path):
    done = evaluate("--suite", "learning", "--cases", "whole-gpu@2.0", "--policies", "fcfs+greedy/pack,sjf+greedy/pack",
                    "--planners", "none", "--out", str(tmp_path), "--workers", "1")
    learning = json.loads((tmp_path / "learning.json").read_text())
    records = [json.loads(line) for line in (tmp_path / "runs.jsonl").read_text().splitlines()]
    validation = {p: [r["row"]["mean_wait_s"] for r in records if r["row"]["policy"] == p and r["row"]["seed"] < 2000]
                  for p in ("fcfs+greedy/pack", "sjf+greedy/pack")}
    best = min(validation, key=lambda p: sum(validation[p]))
    assert all(len(v) == 10 for v in validation.values())  # validation seeds 1000-1009
    assert learning["references"] == {"whole-gpu@2.0": best}
    assert [r["row"]["seed"] < 2000 for r in records] == [True] * 20 + [False] * 24  # validation runs first
    assert f"reference for whole-gpu@2.0: {best}" in done.stdout.splitlines()[0]
    other = next(e for e in learning["paired"] if e["policy"] != best)
    assert other["n"] == 12 and other["ratio_ci"][0] <= other["ratio"] <= other["ratio_ci"][1]
    assert f"| whole-gpu@2.0 | {best} | 12 |" in done.stdout and "±" not in done.stdout


@pytest.mark.parametrize(("args", "message"), [
    (["--cases", "nope"], "--cases: unknown nope"),
    (["--workload", "small"], "its cases fix workloads"),
    (["--planners", "lookahead-Z"], "--planners: unknown lookahead-Z"),
])
def test_learning_suite_bad_arguments_are_one_line_errors(args, message):
    done = subprocess.run([sys.executable, str(ROOT / "evaluate.py"), "--suite", "learning", *args], cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr
