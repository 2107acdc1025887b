"""The Batsim export: interval sets, a hand-made log's rows computed by hand, and the files of an evaluate.py run
read back with evalys (``pip install 'gpusched[interop]'``; the evalys test skips without it)."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys

import pytest
from paths import ROOT

from envs.core import Job, JobLog, JobState
from envs.core.job import RejectReason
from envs.core.joblog import Interruptions, JobRecord
from evaluation.batsim import BATSIM_COLUMNS, batsim_rows, interval_set, write_batsim
from evaluation.jobs import job_table


@pytest.mark.parametrize(("indices", "text"), [([], ""), ([3], "3"), ([0, 1, 2, 3, 8], "0-3 8"),
                                               ([9, 4, 5, 4, 11, 10], "4-5 9-11")])
def test_interval_sets_are_batsims(indices, text):
    assert interval_set(indices) == text


def hand_log() -> JobLog:
    """Four jobs on 8 GPUs: one ran once, one was killed at its wall time, one failed after a failure and a
    restart, one was rejected."""
    ran = JobRecord(Job(1, 0.0, 100.0, 200.0, n_gpus=4, user="ann", team="a"), JobState.COMPLETED,
                    start_time_s=10.0, finish_time_s=110.0, gpus=(0, 1, 2, 3))
    killed = JobRecord(Job(2, 5.0, 500.0, 50.0, gpu_milli=500, priority=2), JobState.COMPLETED, start_time_s=5.0,
                       finish_time_s=55.0, gpus=(5,), timed_out=True)
    failed = JobRecord(Job(3, 20.0, 300.0, 400.0, n_gpus=2), JobState.FAILED, start_time_s=40.0,
                       finish_time_s=180.0, gpus=(6, 7),
                       interruptions=Interruptions(2, 0, 120.0, 0.0, 240.0, 0.0, ((40.0, 100.0), (120.0, 180.0)),
                                                   ((4, 5), (6, 7)), ("failure", "failure")))
    rejected = JobRecord(Job(4, 30.0, 10.0, 10.0, n_gpus=64), JobState.REJECTED, RejectReason.TOO_MANY_GPUS)
    return JobLog("hand", 8, (ran, killed, failed, rejected), 0.0, 0.0, 0.0)


def test_the_rows_of_a_hand_made_log_are_computed_by_hand():
    trace = {"policy": "p", "workload": "w", "seed": 0, "jobs": job_table(hand_log())}
    rows = batsim_rows(trace)
    assert [list(row) for row in rows] == [list(BATSIM_COLUMNS)] * 4  # the rejected job never ran: left out
    ran, killed, failed_once, failed = rows
    assert ran == {**ran, "job_id": 1, "workload_name": "w", "profile": "delay", "submission_time": 0.0,
                   "requested_number_of_resources": 4, "requested_time": 200.0, "success": 1,
                   "final_state": "COMPLETED_SUCCESSFULLY", "starting_time": 10.0, "execution_time": 100.0,
                   "finish_time": 110.0, "waiting_time": 10.0, "turnaround_time": 110.0, "stretch": 1.1,
                   "consumed_energy": -1, "allocated_resources": "0-3"}
    assert (killed["success"], killed["final_state"], killed["stretch"], killed["allocated_resources"]) == (
        0, "COMPLETED_WALLTIME_REACHED", 1.0, "5")
    assert json.loads(killed["metadata"])["gpu_share"] == 0.5 and json.loads(killed["metadata"])["priority"] == 2
    assert failed_once == {**failed_once, "job_id": 3, "submission_time": 20.0, "starting_time": 40.0,
                           "finish_time": 100.0, "execution_time": 60.0, "waiting_time": 20.0, "turnaround_time": 80.0,
                           "final_state": "COMPLETED_KILLED", "success": 0, "allocated_resources": "4-5"}
    assert failed == {**failed, "job_id": "3#1", "submission_time": 100.0, "starting_time": 120.0,
                      "finish_time": 180.0, "execution_time": 60.0, "waiting_time": 20.0, "turnaround_time": 80.0,
                      "final_state": "COMPLETED_FAILED", "success": 0, "allocated_resources": "6-7"}
    assert json.loads(failed["metadata"]) == {"user": "-", "team": "-", "priority": 0, "gpu_share": 2.0, "job_id": 3,
                                              "run": 2, "runs": 2, "ended_by": "failure"}


def test_runs_sharing_a_prefix_get_files_of_their_own(tmp_path):
    trace = {"policy": "sjf+easy/pack", "workload": "w (high)", "seed": 1, "jobs": job_table(hand_log())}
    paths, left_out = write_batsim(tmp_path, [trace, trace])
    assert [p.name for p in paths] == ["sjf-easy-pack_w-high-_seed1_jobs.csv", "sjf-easy-pack_w-high-_seed1-2_jobs.csv"]
    assert left_out == 2 and paths[0].read_text() == paths[1].read_text()


def test_evalys_reads_the_export_of_an_evaluate_run(tmp_path):
    jobset = pytest.importorskip("evalys.jobset", reason="evalys is the optional extra 'interop'")
    out = tmp_path / "run"
    subprocess.run([sys.executable, str(ROOT / "evaluate.py"), "--workload", "small", "--cluster", "tiny", "--seeds",
                    "0", "--policies", "fifo,tiresias", "--workers", "1", "--no-plots", "--export", "batsim",
                    "--out", str(out)], cwd=ROOT, check=True, capture_output=True)
    files = sorted((out / "batsim").glob("*_jobs.csv"))
    assert [f.name for f in files] == ["fifo_small_seed0_jobs.csv", "tiresias_small_seed0_jobs.csv"]
    for path in files:
        jobs = jobset.JobSet.from_csv(str(path))
        runs = 200 + sum(json.loads(m)["run"] > 1 for m in jobs.df.metadata)  # a row per run of the 200 jobs
        assert len(jobs.df) == runs and jobs.MaxProcs == 8  # the small workload's jobs on the tiny cluster's GPUs
        assert (jobs.df.proc_alloc == jobs.df.requested_number_of_resources).all()
        assert (jobs.df.waiting_time >= 0).all() and jobs.utilisation.load.iloc[-1] == 0
        whole = jobs.df[[json.loads(m)["gpu_share"] >= 1 for m in jobs.df.metadata]]
        for gpu in range(8):  # a whole GPU runs one job at a time: the runs on it, read back by evalys, never overlap
            spans = sorted((r.starting_time, r.finish_time) for r in whole.itertuples() if gpu in r.allocated_resources)
            assert all(end <= start + 1e-6 for (_, end), (start, _) in itertools.pairwise(spans))


def test_an_export_folder_that_cannot_be_made_fails_before_the_runs(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "batsim").write_text("a file")
    done = subprocess.run([sys.executable, str(ROOT / "evaluate.py"), "--workload", "small", "--cluster", "tiny",
                           "--seeds", "0", "--policies", "fifo", "--workers", "1", "--no-plots", "--export", "batsim",
                           "--out", str(out)], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 2 and not (out / "runs.jsonl").exists()  # nothing ran
    assert done.stderr.strip().splitlines()[-1] == (f"evaluate.py: error: --export batsim: {out / 'batsim'} exists "
                                                    "and is not a folder")
