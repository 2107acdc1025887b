"""report.html and the tidy run-folder files: job tables, summary.json as records, run.json, the case's parts as
columns, the page's sections and charts, and its rebuild from a run folder (no browser here:
test_report_browser.py opens the page)."""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys

import pytest
from paths import ROOT

from envs.core import JobState
from evaluation.aggregate import aggregate
from evaluation.html_report import render
from evaluation.jobs import JOB_COLUMNS, job_rows, job_table
from evaluation.report import read_summary, summary_entries, summary_records, write_run_folder
from evaluation.report_charts import TIME_COLUMNS, metric_bars, wait_cdf
from evaluation.runner import RunSpec, run
from evaluation.training_report import curve_figures, learning_curves

pytest.importorskip("plotly", reason="report.html needs plotly (extra 'plot')")


@pytest.fixture(scope="module")
def small_runs():
    """Two policies × two seeds on the small workload (tiresias preempts), as evaluate.py runs them."""
    return [run(RunSpec(policy, "small", "tiny", seed=seed)) for policy in ("fifo", "tiresias") for seed in (0, 1)]


def test_the_job_table_holds_every_job_with_its_runs_and_none_for_missing_times(small_runs):
    (_, trace, _) = small_runs[2]  # tiresias, seed 0
    table = trace["jobs"]
    assert list(table) == list(JOB_COLUMNS)
    rows = list(job_rows(table))
    assert len(rows) == trace["jobs"]["job_id"].__len__() > 0
    preempted = [row for row in rows if row["preemptions"]]
    assert preempted, "tiresias preempts on the small workload"
    for row in rows:
        assert row["state"] == "completed" and row["wait_s"] == pytest.approx(row["start_s"] - row["submit_s"])
        assert row["runs"][0][0] == row["start_s"] and row["runs"][-1][1] == row["finish_s"]
        assert len(row["runs"]) == 1 + row["preemptions"] + row["failures"]
        assert len(row["gpus"]) == row["n_gpus"]
    json.dumps(table, allow_nan=False)  # a browser's JSON.parse reads it


def test_a_rejected_job_has_no_times_and_says_why():
    from envs.core import Job, JobLog
    from envs.core.job import RejectReason
    from envs.core.joblog import JobRecord

    job = Job(job_id=7, submit_time_s=5.0, runtime_s=10.0, runtime_estimate_s=20.0, n_gpus=4, user="ann")
    log = JobLog("c", 2, (JobRecord(job, JobState.REJECTED, RejectReason.TOO_MANY_GPUS),), 0.0, 0.0, 0.0)
    (row,) = job_rows(job_table(log))
    assert row == {**row, "job_id": 7, "user": "ann", "state": "rejected", "reason": "too_many_gpus",
                   "start_s": None, "finish_s": None, "wait_s": None, "gpus": [], "runs": [], "n_gpus": 4}
    json.dumps(job_table(log), allow_nan=False)


def test_job_rows_refuses_a_broken_table():
    with pytest.raises(ValueError, match="lacks the column"):
        list(job_rows({"job_id": [1]}))
    table = {key: [1] for key in JOB_COLUMNS} | {"user": []}
    with pytest.raises(ValueError, match="differ in length"):
        list(job_rows(table))


def test_summary_records_round_trip_and_pandas_reads_summary_json(small_runs, tmp_path):
    pandas = pytest.importorskip("pandas")
    rows = [row for row, _, _ in small_runs]
    entries = aggregate(rows)
    assert summary_entries(summary_records(entries)) == entries
    write_run_folder(tmp_path, rows, [trace for _, trace, _ in small_runs],
                     [{"policy": r["policy"], "workload": r["workload"], "seed": r["seed"], **t}
                      for r, _, t in small_runs], plots=False)
    table = pandas.read_json(tmp_path / "summary.json")
    assert len(table) == len(entries) * len(entries[0]["metrics"])
    wait = table[(table.policy == "fifo") & (table.metric == "mean_wait_s")].iloc[0]
    assert wait["mean"] == pytest.approx(entries[0]["metrics"]["mean_wait_s"])
    assert [wait.ci95_low, wait.ci95_high] == pytest.approx(entries[0]["ci95"]["mean_wait_s"])
    assert {wait.scenario, wait.window, wait.load} == {"none", "", 1.0}
    document = read_summary(tmp_path)
    assert document["results"] == entries and document["runs"] == 4 and "mean_wait_s" in document["metric_docs"]


def test_scenario_load_and_window_are_columns_of_their_own(tmp_path):
    trace = tmp_path / "t.swf"
    trace.write_text("; MaxProcs: 8\n" + "".join(f"{i} {60 * i} 0 100 1 -1 -1 1 200 -1 1 1 -1 -1 -1 -1 -1 -1\n"
                                                 for i in range(1, 41)))
    out = tmp_path / "out"
    subprocess.run([sys.executable, str(ROOT / "evaluate.py"), "--workload", f"swf:{trace}", "--cluster", "tiny",
                    "--policies", "fifo", "--seeds", "0", "--starts", "0,10", "--length", "20", "--load", "1.5",
                    "--scenario", "high", "--workers", "1", "--no-plots", "--out", str(out)],
                   cwd=ROOT, check=True, capture_output=True)
    rows = list(csv.DictReader((out / "results.csv").open()))
    assert [(r["workload"], r["scenario"], r["load"], r["window"]) for r in rows] == [
        ("t.swf[0:20]@1.5 (high)", "high", "1.5", "0:20"), ("t.swf[10:30]@1.5 (high)", "high", "1.5", "10:30")]


def test_the_page_holds_the_run_the_table_the_charts_and_the_gantt_data(small_runs, tmp_path):
    rows = [row for row, _, _ in small_runs]
    document = {"results": aggregate(rows), "command": "python evaluate.py --x </script>", "seeds": [0, 1],
                "inputs": {"w.swf": "ab" * 32}, "metrics_window": [0.1, 0.1], "skipped_records": {}}
    page = render(document, [trace for _, trace, _ in small_runs], rows)
    assert not re.search(r'<(script|link)[^>]*(src|href)="https?:', page)  # self-contained: nothing fetched
    assert "--x &lt;/script&gt;" in page and "w.swf: <code>" + "ab" * 32 in page
    assert "Steady state: the metrics leave out the first 10% and the last 10%" in page
    reference = min(document["results"], key=lambda e: e["metrics"]["mean_wait_s"])["policy"]
    assert f'<tr class="reference"><td title="{reference}">' in page
    assert '1.000<br><span class="ci">[1.000, 1.000]</span>' in page  # the reference's ratio to itself
    assert page.count('class="plotly-graph-div"') == 2 + 5  # wait CDF, utilization; five metric bars
    data = page.split('<script type="application/json" id="gantt-data">')[1].split("</script>")[0]
    runs = json.loads(data)["runs"]
    assert [(r["policy"], r["seed"]) for r in runs] == [("fifo", 0), ("tiresias", 0), ("fifo", 1), ("tiresias", 1)]
    jobs = small_runs[0][1]["jobs"]
    assert runs[0]["jobs"]["start_s"] == [round(t, 1) for t in jobs["start_s"]]  # times to a tenth of a second
    assert {k: v for k, v in runs[0]["jobs"].items() if k not in (*TIME_COLUMNS, "runs")} == {
        k: v for k, v in jobs.items() if k not in (*TIME_COLUMNS, "runs")}


def test_degenerate_charts_say_why_and_slowdowns_start_at_1(small_runs):
    traces = [{**trace, "wait_s": [0.0] * 5} for _, trace, _ in small_runs]
    notes = [a.text for a in wait_cdf(traces, "small").layout.annotations]
    assert notes == ["every job started at once: all 20 waits are 0 s"]
    empty = [{**trace, "wait_s": []} for trace in traces]
    assert [a.text for a in wait_cdf(empty, "small").layout.annotations] == ["no completed jobs"]
    bars = metric_bars(aggregate([row for row, _, _ in small_runs]), "mean_bsld")
    assert bars.layout.yaxis.range[0] == 1 and bars.layout.yaxis.title.text == "Mean bounded slowdown"


def test_the_report_is_rebuilt_from_the_run_folder(tmp_path):
    out = tmp_path / "run"
    subprocess.run([sys.executable, str(ROOT / "evaluate.py"), "--workload", "small", "--cluster", "tiny", "--seeds",
                    "0", "--policies", "fifo,sjf", "--workers", "1", "--out", str(out)], cwd=ROOT, check=True,
                   capture_output=True)
    first = (out / "report.html").read_text()
    (out / "report.html").unlink()
    done = subprocess.run([sys.executable, "-m", "evaluation.report", str(out)], cwd=ROOT, capture_output=True,
                          text=True)
    assert done.returncode == 0 and done.stdout == f"wrote {out / 'report.html'}\n"
    assert (out / "report.html").read_text() == first
    run_info = json.loads((out / "run.json").read_text())
    assert run_info["command"].startswith("python evaluate.py --workload small") and run_info["seeds"] == [0]
    assert len(run_info["run_keys"]) == 2 and len(run_info["code_version"]) == 64


def test_rebuilding_a_folder_that_is_not_a_run_is_one_line(tmp_path):
    done = subprocess.run([sys.executable, "-m", "evaluation.report", str(tmp_path)], cwd=ROOT, capture_output=True,
                          text=True)
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [
        f"evaluation.report: error: {tmp_path / 'summary.json'}: cannot read (No such file or directory)"]


def write_events(folder, scalars):
    """TensorBoard events in ``folder``: ``scalars`` = {tag: [(step, value), ...]}."""
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(folder))
    for tag, points in scalars.items():
        for step, value in points:
            writer.add_scalar(tag, value, step)
    writer.close()


def test_learning_curves_join_the_sessions_of_a_resumed_run(tmp_path):
    write_events(tmp_path / "tb" / "ppo_0", {"eval/mean_wait_s": [(0, 9.0), (100, 7.0)], "rollout/ep_rew_mean":
                                              [(100, -3.0)]})
    write_events(tmp_path / "tb" / "ppo_1", {"eval/mean_wait_s": [(100, 6.5), (200, 5.0)],
                                              "eval/heuristic_mean_wait_s": [(200, 5.5)]})
    curves = learning_curves(tmp_path / "tb")
    assert curves == {"eval/heuristic_mean_wait_s": ([200], [5.5]),
                      "eval/mean_wait_s": ([0, 100, 200], [9.0, 6.5, 5.0]), "rollout/ep_rew_mean": ([100], [-3.0])}
    figures = curve_figures(curves)
    assert [f.layout.title.text for f in figures] == ["eval/mean_wait_s", "rollout/ep_rew_mean"]
    assert [(t.name, t.line.dash) for t in figures[0].data] == [("agent", None), ("teacher heuristic", "dash")]


def test_a_training_folder_gets_its_curves_beside_its_final_table(tmp_path):
    run_dir = tmp_path / "train"
    (run_dir / "tb").mkdir(parents=True)
    (run_dir / "config.yaml").write_text("env:\n  cluster: tiny\n")
    write_events(run_dir / "tb" / "ppo_0", {"eval/mean_wait_s": [(0, 9.0), (100, 7.0)]})
    done = subprocess.run([sys.executable, "-m", "evaluation.report", str(run_dir)], cwd=ROOT, capture_output=True,
                          text=True)
    assert done.returncode == 0 and done.stdout == f"wrote {run_dir / 'report.html'}\n"
    page = (run_dir / "report.html").read_text()
    assert "No final evaluation yet" in page and "cluster: tiny" in page and 'id="curve-0"' in page
    subprocess.run([sys.executable, str(ROOT / "evaluate.py"), "--workload", "small", "--cluster", "tiny", "--seeds",
                    "0", "--policies", "fifo,sjf", "--workers", "1", "--no-plots", "--out", str(run_dir / "eval")],
                   cwd=ROOT, check=True, capture_output=True)
    done = subprocess.run([sys.executable, "-m", "evaluation.report", str(run_dir)], cwd=ROOT, capture_output=True,
                          text=True)
    assert done.stdout.splitlines() == [f"wrote {run_dir / 'eval' / 'report.html'}", f"wrote {run_dir / 'report.html'}"]
    page = (run_dir / "report.html").read_text()
    assert 'href="eval/report.html"' in page and '<tr class="reference"><td title="sjf">' in page


def test_a_rebuild_changes_no_input_and_refuses_bad_run_keys(tmp_path):
    out = tmp_path / "run"
    subprocess.run([sys.executable, str(ROOT / "evaluate.py"), "--workload", "small", "--cluster", "tiny", "--seeds",
                    "0", "--policies", "fifo", "--workers", "1", "--no-plots", "--out", str(out)], cwd=ROOT,
                   check=True, capture_output=True)
    runs = out / "runs.jsonl"
    runs.write_bytes(runs.read_bytes()[:300])  # a run cut short by a kill
    done = subprocess.run([sys.executable, "-m", "evaluation.report", str(out)], cwd=ROOT, capture_output=True,
                          text=True)
    assert done.returncode == 2 and len(runs.read_bytes()) == 300  # said, and the file left as it was
    assert "skipped a last record cut short (300 bytes)" in done.stderr and "1 of the 1 runs" in done.stderr
    info = json.loads((out / "run.json").read_text())
    (out / "run.json").write_text(json.dumps({**info, "run_keys": 5}))
    done = subprocess.run([sys.executable, "-m", "evaluation.report", str(out)], cwd=ROOT, capture_output=True,
                          text=True)
    assert done.returncode == 2 and done.stderr.strip().splitlines()[-1] == (
        f"evaluation.report: error: {out / 'run.json'}: run_keys: expected a list of run keys (text)")
