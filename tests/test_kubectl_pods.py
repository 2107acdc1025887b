"""Kubernetes history: ``kubectl get pods -A -o json`` as a workload (format ``pods``), computed by hand from the
sample, replayed through evaluate.py on a ``kubectl:`` cluster, and malformed pods named by file and line."""

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

PODS = ROOT / "tests" / "data" / "exports" / "kubectl_pods.json"
NODES = ROOT / "tests" / "data" / "exports" / "kubectl_nodes.json"


def test_finished_gpu_pods_become_jobs_and_a_pytorchjob_is_one_gang():
    workload = load_trace(PODS, "pods")
    assert workload.skipped == {"no_gpus": 1, "not_finished": 2}  # web-d; train-e running, train-f pending
    rows = [(j.job_id, j.submit_time_s, j.runtime_s, j.n_gpus, j.mig_profile, j.priority, j.qos, j.team, j.outcome,
             j.partition) for j in workload.jobs]
    assert rows == [
        # train-a: 08:00:10-09:00:10, nodeSelector cloud.google.com/gke-nodepool: a100-pool
        (1, 0.0, 3600.0, 2, "", 1000, "high", "vision", TraceOutcome.PASS, "a100-pool"),
        # eval-b: created 08:05, ran 10 min, in a pool (v100-pool) the sample's nodes lack
        (2, 300.0, 600.0, 1, "", 0, "", "nlp", TraceOutcome.FAILED, "v100-pool"),
        # ddp-worker-0/1 (one controller): created 08:10:00, first start 08:12:00, last end 10:13:00, 4 + 4 GPUs
        (3, 600.0, 7260.0, 8, "", 0, "", "nlp", TraceOutcome.PASS, ""),
        (4, 1200.0, 1800.0, 1, "3g.20gb", 0, "", "vision", TraceOutcome.PASS, ""),  # notebook-c: one MIG instance
    ]


def test_a_pod_history_replays_on_a_kubectl_cluster(tmp_path):
    done = subprocess.run([sys.executable, str(ROOT / "evaluate.py"), "--workload", f"pods:{PODS}", "--cluster",
                           f"kubectl:{NODES}", "--policies", "fcfs+easy", "--seeds", "0", "--workers", "1",
                           "--no-plots", "--json", "--out", str(tmp_path / "out")],
                          cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    metrics = json.loads(done.stdout)["results"][0]["metrics"]
    assert metrics["n_jobs"] == 4 and metrics["n_completed"] == 3  # eval-b's pool is not in the cluster:
    assert metrics["n_rejected"] == 1  # reported, not dropped
    assert "3 trace records skipped (not_finished 2, no_gpus 1)" in done.stderr
    assert "1 of 4 jobs were rejected at submission, in 1 of 1 runs (unknown_partition 1)" in done.stderr


def _mutated(tmp_path, change):
    data = json.loads(PODS.read_text())
    change(data["items"])
    path = tmp_path / "pods.json"
    path.write_text(json.dumps(data, indent=2))
    return path


@pytest.mark.parametrize("change, fragment", [
    (lambda items: items[1]["metadata"].update(creationTimestamp="yesterday"),
     "pod 'eval-b' creationTimestamp 'yesterday' is not an RFC 3339 time"),
    (lambda items: items[0]["spec"]["containers"][0]["resources"]["limits"].update({"nvidia.com/gpu": "٢"}),
     "pod 'train-a' nvidia.com/gpu '٢' is not a whole number"),
    (lambda items: items[2]["status"].update(phase="Done"), "pod 'ddp-worker-0' status.phase 'Done' is not a pod"),
    (lambda items: items[0]["spec"].update(priority="high"), "pod 'train-a' spec.priority 'high' is not an integer"),
    (lambda items: items[0]["spec"].update(nodeSelector={"eks.amazonaws.com/nodegroup": 3}),
     "pod 'train-a' node pool selector '3' is not a string"),
])
def test_malformed_pods_name_the_file_and_the_pod_line(tmp_path, change, fragment):
    path = _mutated(tmp_path, change)
    with pytest.raises(TraceFormatError, match=re.escape(fragment)) as raised:
        load_trace(path, "pods")
    name = re.search(r"pod '([^']+)'", fragment)[1]
    text = path.read_text().splitlines()
    assert raised.value.line == next(i for i, line in enumerate(text, 1) if f'"name": "{name}"' in line)
