"""Reading a live run's folder back (evaluation.slurm_logs), on lines copied from the qos-preemption run's
slurmctld.log and jobcomp.txt: job 5 (QOS low) was requeued by preemption and ran again; job 6 (QOS high) ran once."""

from __future__ import annotations

import pytest

from evaluation.slurm_logs import ctld_events, read_run
from evaluation.slurm_replay import SlurmCase

CTLD_LOG = """\
[2026-12-01T19:17:02.081] slurmctld version 22.05.8 started on cluster gpusched
[2026-12-01T19:17:03.079] priority/multifactor: _read_last_decay_ran: No last decay (state) to recover
[2026-12-01T19:17:15.776] _slurm_rpc_submit_batch_job: JobId=5 InitPrio=1 usec=279
[2026-12-01T19:17:45.779] _slurm_rpc_submit_batch_job: JobId=6 InitPrio=10000 usec=3005
[2026-12-01T19:17:45.869] sched: Allocate JobId=6 NodeList=vm #CPUs=1 Partition=main
[2026-12-01T19:18:25.895] _job_complete: JobId=6 WEXITSTATUS 0
[2026-12-01T19:18:25.895] _job_complete: JobId=6 done
[2026-12-01T19:18:26.238] sched/backfill: _start_job: Started JobId=5 in main on vm
[2026-12-01T19:18:45.845] preempted JobId=5 has been requeued to reclaim resources for JobId=8
[2026-12-01T19:20:56.490] sched: Allocate JobId=5 NodeList=vm #CPUs=1 Partition=main
[2026-12-01T19:21:56.517] _job_complete: JobId=5 WEXITSTATUS 0
[2026-12-01T19:21:56.517] _job_complete: JobId=5 done
"""
JOBCOMP = """\
JobId=6 Name=g6 JobState=COMPLETED Partition=main TimeLimit=1 StartTime=2026-12-01T19:17:45 EndTime=2026-12-01T19:18:25 SubmitTime=2026-12-01T19:17:45
JobId=5 Name=g5 JobState=PREEMPTED Partition=main TimeLimit=2 StartTime=2026-12-01T19:18:26 EndTime=2026-12-01T19:18:45 SubmitTime=2026-12-01T19:17:15
JobId=5 Name=g5 JobState=COMPLETED Partition=main TimeLimit=2 StartTime=2026-12-01T19:20:56 EndTime=2026-12-01T19:21:56 SubmitTime=2026-12-01T19:18:45
"""  # noqa: E501
CASE = SlurmCase("qos", ({"id": 5, "gpus": 4, "time_min": 2, "run_s": 60, "qos": "low", "account": "a"},
                         {"id": 6, "gpus": 8, "time_min": 1, "run_s": 40, "qos": "high", "account": "a"}))


def folder(tmp_path, log: str = CTLD_LOG, jobcomp: str = JOBCOMP):
    (tmp_path / "slurmctld.log").write_text(log)
    (tmp_path / "jobcomp.txt").write_text(jobcomp)
    return tmp_path


def test_times_are_the_logs_milliseconds_from_slurmctlds_start(tmp_path):
    marks, jobs = read_run(CASE, folder(tmp_path))
    assert marks["decay"] - marks["origin"] == pytest.approx(0.998)
    by_id = {j["id"]: j for j in jobs}
    assert {k: by_id[6][k] for k in ("slurm_id", "submit_s", "start_s", "end_s", "started_by", "state")} == {
        "slurm_id": 6, "submit_s": 43.698, "start_s": 43.788, "end_s": 83.814, "started_by": "main",
        "state": "COMPLETED"}
    assert (by_id[5]["submit_s"], by_id[5]["start_s"], by_id[5]["end_s"]) == (13.695, 234.409, 294.436)
    assert by_id[5]["earlier_runs"] == [{"start_s": 84.157, "end_s": 103.764, "started_by": "backfill",
                                         "state": "REQUEUED"}]
    assert "earlier_runs" not in by_id[6]


def test_a_log_without_slurmctlds_start_is_refused(tmp_path):
    with pytest.raises(RuntimeError, match=r"no 'slurmctld version \.\.\. started' line"):
        ctld_events(folder(tmp_path, CTLD_LOG.split("\n", 1)[1]) / "slurmctld.log")


def test_a_log_that_disagrees_with_jobcomp_is_refused(tmp_path):
    late = CTLD_LOG.replace("19:18:25.895] _job_complete: JobId=6 done", "19:18:27.895] _job_complete: JobId=6 done")
    with pytest.raises(RuntimeError, match=r"Slurm job 6: slurmctld\.log and jobcomp\.txt disagree on its EndTime"):
        read_run(CASE, folder(tmp_path, late))
