"""Kueue history: ``kubectl get workloads -A -o json`` as a workload (format ``kueue``), computed by hand from the
sample, replayed through evaluate.py on a ``kubectl:`` cluster, and malformed Workloads named by file and line."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from paths import ROOT

from envs.core.errors import TraceFormatError
from envs.core.job import TraceOutcome
from envs.workload.loaders import load_trace

WORKLOADS = ROOT / "tests" / "data" / "exports" / "kueue_workloads.json"
NODES = ROOT / "tests" / "data" / "exports" / "kubectl_nodes.json"


def test_finished_workloads_become_gang_jobs_with_their_queue_priority_and_admission():
    workload = load_trace(WORKLOADS, "kueue")
    # job-waiting: QuotaReserved False; job-stopped: Finished without Admitted; job-preproc: no GPU
    assert workload.skipped == {"not_finished": 1, "never_started": 1, "no_gpus": 1}
    rows = [(j.job_id, j.submit_time_s, j.runtime_s, j.n_gpus, j.mig_profile, j.priority, j.qos, j.user, j.team,
             j.partition, j.outcome) for j in workload.jobs]
    assert rows == [
        # a PyTorchJob: master 1 x 1 GPU + workers 3 x 2 GPUs; created 08:00, admitted 08:02, finished 09:02
        (1, 0.0, 3600.0, 7, "", 100, "high", "nlp", "research", "", TraceOutcome.PASS),
        # partial admission: 4 pods asked, 2 admitted (podSetAssignments count), readmitted 08:15 after eviction
        (2, 300.0, 600.0, 2, "", 0, "", "nlp", "research", "", TraceOutcome.PASS),
        # 08:10:05-08:40:05, reason Failed, nodeSelector gke-nodepool a100-pool
        (3, 600.0, 1800.0, 1, "", 0, "", "vision", "research", "a100-pool", TraceOutcome.FAILED),
        # one nvidia.com/mig-1g.10gb instance, cluster queue interactive
        (4, 1200.0, 1800.0, 1, "1g.10gb", 10, "low", "vision", "interactive", "", TraceOutcome.PASS),
    ]


def test_a_kueue_history_replays_on_a_kubectl_cluster(tmp_path):
    done = subprocess.run([sys.executable, str(ROOT / "evaluate.py"), "--workload", f"kueue:{WORKLOADS}",
                           "--cluster", f"kubectl:{NODES}", "--policies", "fcfs+easy", "--seeds", "0", "--workers",
                           "1", "--no-plots", "--json", "--out", str(tmp_path / "out")],
                          cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    metrics = json.loads(done.stdout)["results"][0]["metrics"]
    assert metrics["n_jobs"] == 4 and metrics["n_completed"] == 4 and metrics["n_rejected"] == 0
    assert "3 trace records skipped (never_started 1, no_gpus 1, not_finished 1)" in done.stderr


def _mutated(tmp_path, change):
    data = json.loads(WORKLOADS.read_text())
    change(data["items"])
    path = tmp_path / "workloads.json"
    path.write_text(json.dumps(data, indent=2))
    return path


def _condition(item, kind):
    return next(c for c in item["status"]["conditions"] if c["type"] == kind)


@pytest.mark.parametrize("change, fragment", [
    (lambda items: items[1]["metadata"].update(creationTimestamp="08:05"),
     "workload 'job-partial-2c9d0' creationTimestamp '08:05' is not an RFC 3339 time"),
    (lambda items: _condition(items[0], "Finished").update(lastTransitionTime="soon"),
     "workload 'pytorchjob-bert-7f3a1' Finished lastTransitionTime 'soon' is not an RFC 3339 time"),
    (lambda items: _condition(items[2], "Finished").update(lastTransitionTime="2026-11-30T08:00:00Z"),
     "workload 'job-eval-5e8b2' is Finished before it was Admitted"),
    (lambda items: items[0]["spec"].update(podSets=[]), "workload 'pytorchjob-bert-7f3a1' spec.podSets is not a"),
    (lambda items: items[0]["spec"]["podSets"][1].update(count=-3),
     "workload 'pytorchjob-bert-7f3a1' podSets[1] count '-3' is not a whole number"),
    (lambda items: items[3]["spec"].update(priority=1.5), "workload 'job-notebook-1d4c7' spec.priority '1.5' is not"),
    (lambda items: items[2].update(kind="Pod"), "items[2] is a 'Pod', not a Workload"),
])
def test_malformed_workloads_name_the_file_and_the_workload_line(tmp_path, change, fragment):
    path = _mutated(tmp_path, change)
    with pytest.raises(TraceFormatError, match=re.escape(fragment)) as raised:
        load_trace(path, "kueue")
    text = path.read_text().splitlines()
    index = int(m[1]) if (m := re.match(r"items\[(\d+)\]", fragment)) else None
    name = (re.search(r"workload '([^']+)'", fragment)[1] if index is None
            else json.loads(path.read_text())["items"][index]["metadata"]["name"])
    assert raised.value.line == next(i for i, line in enumerate(text, 1) if f'"name": "{name}"' in line)


def test_a_file_that_is_no_workload_list_is_refused_at_line_1(tmp_path):
    path = tmp_path / "nodes.json"
    path.write_text('{"kind": "NodeList", "itemz": []}\n')
    with pytest.raises(TraceFormatError, match="an items list of Kueue Workloads") as raised:
        load_trace(path, "kueue")
    assert raised.value.line == 1
