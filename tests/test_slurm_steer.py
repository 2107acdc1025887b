"""The Slurm steering daemon offline: its mirror of a real Slurm 22.05's ``squeue --json`` / ``sinfo --json``, its
dry-run plan and writes computed by hand, idempotence, retry on a timed-out command, refusal of every command but
its reads and SiteFactor/Priority writes; and the simulated twin (the slurm policy with a Steering) on a schedule
computed by hand."""

from __future__ import annotations

import copy
import io
import json
import subprocess
import sys

import pytest
from paths import ROOT

from baselines.registry import make
from bridges.slurm_state import SlurmOutputError, mirror, snapshot
from bridges.slurm_steer import (
    CONFIG,
    SINFO,
    SPRIO,
    SQUEUE,
    Daemon,
    RefusedCommand,
    SlurmUnavailable,
    checked,
    plan,
    run_command,
)
from envs.core.errors import ConfigError
from evaluation.slurm_replay import compare

LIVE = ROOT / "tests" / "data" / "slurm" / "live"
NOW = 1796219490.0  # 10 s after the first submission of the fixture
MULTIFACTOR = "PriorityType            = priority/multifactor\nPrioritySiteFactorPlugin = (null)\n"


def squeue() -> dict:
    """The real snapshot (job 1 running on all 8 GPUs, jobs 2 and 3 pending with 5-minute limits, job 3 holding
    site factor 5000) plus job 4, pending with a 2-minute limit."""
    data = json.loads((LIVE / "squeue.json").read_text())
    extra = copy.deepcopy(data["jobs"][2])
    extra.update(job_id=4, time_limit=2, priority=1, submit_time=extra["submit_time"] + 1)
    data["jobs"].append(extra)
    return data


class FakeSlurm:
    """Answers the daemon's reads from fixtures and records every command it is given."""

    def __init__(self, sprio: str = "2 0\n3 5000\n4 0\n", config: str = MULTIFACTOR) -> None:
        self.outputs = {SQUEUE: json.dumps(squeue()), SINFO: (LIVE / "sinfo.json").read_text(), SPRIO: sprio,
                        CONFIG: config}
        self.calls: list[tuple[str, ...]] = []
        self.fail: list[Exception] = []  # raised, first first, by the next commands

    def __call__(self, argv, timeout_s):
        self.calls.append(tuple(argv))
        if self.fail:
            raise self.fail.pop(0)
        return self.outputs.get(tuple(argv), "")

    @property
    def writes(self) -> list[tuple[str, ...]]:
        return [c for c in self.calls if c[:2] == ("scontrol", "update")]


def daemon(slurm: FakeSlurm, policy: str = "sjf", **kwargs) -> tuple[Daemon, io.StringIO, io.StringIO]:
    out, err = io.StringIO(), io.StringIO()
    return Daemon(make(policy), runner=slurm, clock=lambda: NOW, out=out, err=err, **kwargs), out, err


def test_the_mirror_holds_the_running_job_on_its_gpus_and_the_pending_jobs():
    snap = snapshot(squeue(), json.loads((LIVE / "sinfo.json").read_text()))
    assert snap.cluster.n_gpus == 8 and [n.name for n in snap.cluster.nodes] == ["vm"]
    assert [(j.slurm_id, j.state, j.gpus, j.time_limit_s) for j in snap.jobs] == [
        (1, "RUNNING", 8, 300.0), (2, "PENDING", 8, 300.0), (3, "PENDING", 8, 300.0), (4, "PENDING", 8, 120.0)]
    view = mirror(snap, NOW).view
    assert view.time_s == 10.0  # time 0 = job 1's submission
    assert list(view.pending) == [2, 3, 4] and list(view.running) == [1]
    assert not view.gpu_free_milli.any()  # job 1 holds the 8 GPUs of gres_detail IDX:0-7
    assert view.running[1].job.runtime_s == 293.0  # until its limit: started 7 s before now, 5 minutes


def test_a_dry_run_prints_the_plan_computed_by_hand_and_writes_nothing():
    slurm = FakeSlurm()
    steer, out, _ = daemon(slurm, dry_run=True)
    steer.tick()
    # sjf: job 4 (2 min) first, then 2 and 3 (5 min, by submit time then id); values 1000 x (3 - rank)
    assert out.getvalue().splitlines() == [
        "would set JobId=4 SiteFactor=3000 (now 0; rank 1 of 3)",
        "would set JobId=2 SiteFactor=2000 (now 0; rank 2 of 3)",
        "would set JobId=3 SiteFactor=1000 (now 5000; rank 3 of 3)",
    ]
    assert slurm.writes == []


def test_it_writes_only_changed_site_factors_and_a_second_tick_writes_nothing():
    slurm = FakeSlurm(sprio="2 2000\n3 5000\n4 0\n")
    steer, _, _ = daemon(slurm)
    steer.tick()
    assert slurm.writes == [("scontrol", "update", "JobId=4", "SiteFactor=3000"),
                            ("scontrol", "update", "JobId=3", "SiteFactor=1000")]  # job 2 already holds 2000
    slurm.outputs[SPRIO] = "2 2000\n3 1000\n4 3000\n"
    slurm.calls.clear()
    steer.tick()
    assert slurm.writes == []


def test_priority_mode_writes_the_priority_itself_never_zero():
    slurm = FakeSlurm()
    steer, _, _ = daemon(slurm, field="Priority", max_updates=2)
    steer.tick()
    assert slurm.writes == [("scontrol", "update", "JobId=4", "Priority=3001"),
                            ("scontrol", "update", "JobId=2", "Priority=2001")]  # capped at 2 writes
    assert SPRIO not in slurm.calls  # the priority comes from squeue


def test_a_timed_out_command_is_a_one_line_warning_and_a_retry():
    slurm = FakeSlurm()
    slurm.fail = [SlurmUnavailable("squeue --json timed out after 10 s")]
    slurm.outputs[CONFIG] = MULTIFACTOR
    steer, _, err = daemon(slurm, period_s=0.01)
    slurm.fail.insert(0, SlurmUnavailable("scontrol show config timed out after 10 s"))
    assert steer.loop(cycles=3) == 1
    assert err.getvalue().splitlines() == [
        "slurm_steer: warning: scontrol show config timed out after 10 s; retrying in 0.01 s",
        "slurm_steer: warning: squeue --json timed out after 10 s; retrying in 0.02 s",
    ]
    assert len(slurm.writes) == 3  # the third tick went through


def test_a_real_command_past_its_timeout_raises_slurm_unavailable():
    with pytest.raises(SlurmUnavailable, match=r"timed out after 0\.2 s"):
        run_command([sys.executable, "-c", "import time; time.sleep(5)"], 0.2)
    with pytest.raises(SlurmUnavailable, match="no-such-slurm-command"):
        run_command(["no-such-slurm-command", "--json"], 1.0)


@pytest.mark.parametrize("argv", [
    ("scancel", "3"),
    ("scontrol", "hold", "3"),
    ("scontrol", "requeue", "3"),
    ("scontrol", "update", "JobId=3", "TimeLimit=5"),
    ("scontrol", "update", "JobId=3", "Partition=other"),
    ("scontrol", "update", "JobId=3", "SiteFactor=5", "Priority=1"),
    ("scontrol", "update", "JobId=3;rm", "SiteFactor=5"),
    ("scontrol", "update", "JobId=3", "SiteFactor=5x"),
    ("scontrol", "update", "JobId=3", "Priority=-1"),
    ("squeue",),
    ("sh", "-c", "squeue --json"),
])
def test_it_refuses_every_command_but_its_reads_and_priority_writes(argv):
    with pytest.raises(RefusedCommand, match="refused to run"):
        checked(argv)


def test_every_command_a_tick_runs_passes_the_check():
    slurm = FakeSlurm()
    steer, _, _ = daemon(slurm)
    steer.tick()
    assert slurm.calls and all(checked(c) == c for c in slurm.calls)
    assert {c[3].split("=")[0] for c in slurm.writes} == {"SiteFactor"}
    assert {int(c[2].removeprefix("JobId=")) for c in slurm.writes} <= {2, 3, 4}  # pending jobs only


def test_a_stop_during_a_tick_leaves_the_rest_unwritten():
    slurm = FakeSlurm()
    steer, _, _ = daemon(slurm)
    original = slurm.__call__

    def stop_after_first_write(argv, timeout_s):
        result = original(argv, timeout_s)
        if argv[:2] == ("scontrol", "update"):
            steer.stop.set()
        return result
    steer._runner = stop_after_first_write
    steer.tick()
    assert slurm.writes == [("scontrol", "update", "JobId=4", "SiteFactor=3000")]


@pytest.mark.parametrize("config, field, message", [
    ("PriorityType = priority/basic\n", "SiteFactor", "steering needs priority/multifactor"),
    ("PriorityType = priority/multifactor\nPrioritySiteFactorPlugin = site_factor/example\n", "SiteFactor",
     "it would overwrite the site factors"),
])
def test_it_refuses_a_slurm_that_would_not_keep_its_values(config, field, message):
    steer, _, _ = daemon(FakeSlurm(config=config), field=field)
    with pytest.raises(ConfigError, match=message):
        steer.tick()


def test_a_value_past_slurms_range_is_refused():
    with pytest.raises(ConfigError, match="lower --scale"):
        plan(list(range(3000)), {}, "SiteFactor", 1_000_000, 10)


def test_malformed_slurm_output_names_what_is_wrong():
    data = squeue()
    data["jobs"][0]["gres_detail"] = ["gpu:8(IDX:0-9)"]
    with pytest.raises(SlurmOutputError, match="holds GPU 9 of node 'vm', which has 8"):
        mirror(snapshot(data, json.loads((LIVE / "sinfo.json").read_text())), NOW)
    data["jobs"][1]["time_limit"] = "soon"
    with pytest.raises(SlurmOutputError, match="job 2: time_limit must be a whole number"):
        snapshot(data, json.loads((LIVE / "sinfo.json").read_text()))


@pytest.mark.parametrize("argv, message", [
    (["--policy", "sjf", "--period", "-1"], "argument --period: must be a positive number of seconds, got -1.0"),
    (["--policy", "sjf", "--timeout", "nan"], "argument --timeout: must be a positive number of seconds, got nan"),
    (["--policy", "sjf", "--scale", "0"], "argument --scale: must be an integer >= 1, got 0"),
    (["--policy", "lookahead", "--once"], "policy 'lookahead': a lookahead planner draws its futures from a workload"),
    (["--policy", "sjf", "--log", "/nonexistent/folder/steer.jsonl"], "--log /nonexistent/folder/steer.jsonl: no such "
                                                                      "folder /nonexistent/folder"),
])
def test_the_cli_says_in_one_line_what_is_wrong(argv, message):
    done = subprocess.run([sys.executable, "-m", "bridges.slurm_steer", *argv], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1
    assert done.stderr.startswith(f"slurm_steer: error: {message}")


def test_a_last_tick_that_fails_says_it_gives_up():
    slurm = FakeSlurm()
    slurm.fail = [SlurmUnavailable("scontrol show config timed out after 10 s")]
    steer, _, err = daemon(slurm, period_s=0.01)
    assert steer.loop(cycles=1) == 0
    assert err.getvalue() == "slurm_steer: warning: scontrol show config timed out after 10 s; giving up (last tick)\n"


# --- the twin -------------------------------------------------------------------------------------------------

TWIN_CASE = {
    "name": "twin-by-hand",
    "slurm": {"PriorityType": "priority/multifactor", "PriorityCalcPeriod": 1},  # every weight 0: priority = site
    "jobs": [  # A runs 1-101; the daemon (sjf, ticks at 3, 8, ...) writes C 2000, B 1000 at 3: C 101-131, B 131-181
        {"id": 1, "submit_s": 0, "gpus": 8, "time_min": 10, "run_s": 100, "start_s": 1.0, "end_s": 101.0},
        {"id": 2, "submit_s": 1, "gpus": 8, "time_min": 10, "run_s": 50, "start_s": 131.0, "end_s": 181.0},
        {"id": 3, "submit_s": 2, "gpus": 8, "time_min": 2, "run_s": 30, "start_s": 101.0, "end_s": 131.0},
    ],
    "steering": {"policy": "sjf", "period_s": 5.0, "origin_s": 3.0},
}


def test_the_twin_starts_the_jobs_in_the_steered_order_computed_by_hand():
    result = compare(TWIN_CASE, "slurm")
    assert result.max_diff_s == 0.0 and result.inversions == 0
    unsteered = compare({k: v for k, v in TWIN_CASE.items() if k != "steering"}, "slurm")
    assert {j: sim for j, (_, sim) in unsteered.starts.items()} == {1: 1.0, 2: 101.0, 3: 151.0}  # B before C


class LatestFirst:
    """A policy without an order: starts the pending job of the highest id when the cluster has room for it."""

    name = "latest-first"

    def reset(self) -> None:
        self.resets = getattr(self, "resets", 0) + 1

    def act(self, view):
        from envs.sim.policy import WAIT, Start

        if not view.pending:
            return WAIT
        job = view.pending[max(view.pending)]
        free = view.gpu_free_milli.nonzero()[0]
        return Start(job.job_id, free[:job.n_gpus].tolist()) if len(free) >= job.n_gpus else WAIT


def test_a_policy_without_an_order_ranks_by_the_starts_it_makes_on_a_fork():
    from baselines.ranking import rank_jobs

    view = mirror(snapshot(squeue(), json.loads((LIVE / "sinfo.json").read_text())), NOW).view
    policy = LatestFirst()
    # the node is full until job 1's limit (293 s on); then 4 (its 2 minutes), 3, 2, one after the other
    assert rank_jobs(policy, view) == [4, 3, 2]
    assert policy.resets == 1 and view.time_s == 10.0 and list(view.pending) == [2, 3, 4]  # the mirror is untouched
