"""Kubernetes history: the pods of ``kubectl get pods -A -o json`` as a workload (format ``pods``).

Each finished pod that asks for GPUs becomes a job (times in seconds from the earliest creation among the jobs):

- submit: ``metadata.creationTimestamp``; start: ``status.startTime``; end: the latest
  ``status.containerStatuses[].state.terminated.finishedAt`` (RFC 3339 times, e.g. ``2026-11-30T08:00:00Z``);
- GPUs: the sum over ``spec.containers`` of ``resources.limits`` (else ``requests``) of ``nvidia.com/gpu``; one
  MIG instance (``nvidia.com/mig-3g.20gb: 1``) makes a MIG job of that profile;
- ``spec.priority`` (the value kube-scheduler resolved from the priority class) is the job's priority, and
  ``spec.priorityClassName`` its QoS label; the namespace is its team, and its user too;
- a node pool named by ``spec.nodeSelector`` (:data:`~envs.workload.operators.kubectl_nodes.NODE_POOL_LABELS`) is
  its partition: a pool the cluster lacks makes a rejected job, counted by evaluate.py;
- the outcome is the phase: ``Succeeded`` passed, ``Failed`` failed.

Pods that share a controller ``ownerReferences`` entry (a PyTorchJob's or MPIJob's workers, a Job's pods) form one
gang job: submitted at the first creation, started at the first start, ended at the last end, holding the sum of
their GPUs, failed if any pod failed. Skipped, and counted by reason: pods not finished (``Pending``, ``Running``,
``Unknown``: ``not_finished``), never started (``never_started``), without GPUs (``no_gpus``) or without a run time
(``zero_runtime``), and pods asking for several MIG instances or MIG and whole GPUs (``mig_mix``). Malformed input
is a :class:`~envs.core.errors.TraceFormatError` naming the file and the line of the pod.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envs.core.errors import TraceFormatError
from envs.core.job import TraceOutcome
from envs.workload.operators.kube_objects import SEVERAL_MIG, kubectl_items, node_pool, pod_gpus, rfc3339_s
from envs.workload.operators.kubectl_nodes import json_object
from envs.workload.reader import JobCollector, PendingJob, add_from_first_submit, check_comm_sensitivity, show
from envs.workload.table import Workload

PODS_EXPECTED = "the output of kubectl get pods -o json: an object with an items list of Pods"
"""What a pods file must be, as its error says."""
_PHASES = {"Succeeded": TraceOutcome.PASS, "Failed": TraceOutcome.FAILED}
_UNFINISHED = ("Pending", "Running", "Unknown")


@dataclass
class _Pod:
    """What one pod contributes to its (gang) job."""

    line: int
    created_s: float
    started_s: float | None
    finished_s: float | None
    gpus: int
    mig: str
    outcome: TraceOutcome | None  # None: not finished
    priority: int
    qos: str
    team: str
    partition: str


@dataclass
class _Group:
    """The pods of one job: one pod, or a gang that shares a controller."""

    pods: list[_Pod] = field(default_factory=list)


def load_kubectl_pods(path: str | Path, comm_sensitivity: float = 0.5) -> Workload:
    """Read ``kubectl get pods -A -o json`` (module docstring); ``comm_sensitivity`` in [0, 1] goes to multi-GPU
    jobs."""
    comm = check_comm_sensitivity(comm_sensitivity)
    where = str(path)
    groups: dict[str, _Group] = {}
    for item, name, line in kubectl_items(path, "Pod", PODS_EXPECTED):
        metadata = item["metadata"]
        pod = _read_pod(item, metadata, f"pod {name!r}", where, line)
        groups.setdefault(_owner(metadata, name, where, line), _Group()).pods.append(pod)
    collector = JobCollector(path)
    jobs = [job for job_id, group in enumerate(groups.values(), start=1)
            if (job := _job(group, job_id, collector)) is not None]
    add_from_first_submit(collector, jobs, comm)
    return collector.workload()


def _owner(metadata: dict[str, Any], name: str, where: str, line: int) -> str:
    """The key of a pod's job: its controller's uid (a gang's pods share it), else the pod's own namespace/name."""
    owners = metadata.get("ownerReferences") or []
    if not isinstance(owners, list) or not all(isinstance(o, dict) for o in owners):
        raise TraceFormatError(where, line, f"pod {name!r} metadata.ownerReferences is not a list of objects")
    controller = next((o for o in owners if o.get("controller")), None)
    if controller is not None and isinstance(controller.get("uid"), str) and controller["uid"]:
        return f"owner:{controller['uid']}"
    return f"pod:{metadata.get('namespace', '')}/{name}"


def _read_pod(item: dict[str, Any], metadata: dict[str, Any], what: str, where: str, line: int) -> _Pod:
    spec = json_object(item, "spec", f"{what} spec", where, line)
    status = json_object(item, "status", f"{what} status", where, line)
    phase = status.get("phase", "Unknown")
    if phase not in _PHASES and phase not in _UNFINISHED:
        raise TraceFormatError(where, line, f"{what} status.phase {show(str(phase))} is not a pod phase")
    gpus, mig = pod_gpus(spec, what, where, line)
    finished = [rfc3339_s(state["terminated"].get("finishedAt"), f"{what} finishedAt", where, line)
                for status_entry in status.get("containerStatuses") or []
                if isinstance(status_entry, dict) and isinstance(state := status_entry.get("state"), dict)
                and isinstance(state.get("terminated"), dict)]
    priority = spec.get("priority", 0)
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise TraceFormatError(where, line, f"{what} spec.priority {show(str(priority))} is not an integer")
    return _Pod(
        line=line,
        created_s=rfc3339_s(metadata.get("creationTimestamp"), f"{what} creationTimestamp", where, line),
        started_s=(rfc3339_s(status["startTime"], f"{what} startTime", where, line) if status.get("startTime")
                   else None),
        finished_s=max(finished) if finished else None,
        gpus=gpus,
        mig=mig,
        partition=node_pool(spec, what, where, line),
        outcome=_PHASES.get(phase),
        priority=priority,
        qos=str(spec.get("priorityClassName") or ""),
        team=str(metadata.get("namespace") or "-"),
    )


def _job(group: _Group, job_id: int, collector: JobCollector) -> PendingJob | None:
    """The job of a group of pods, or None when it is skipped (counted in ``collector``)."""
    pods, line = group.pods, group.pods[0].line
    reason = ("not_finished" if any(p.outcome is None for p in pods) else
              "never_started" if any(p.started_s is None or p.finished_s is None for p in pods) else
              "mig_mix" if any(p.mig == SEVERAL_MIG for p in pods) or (len(pods) > 1 and any(p.mig for p in pods))
              else "")
    if reason:
        collector.skip(line, job_id, reason)
        return None
    start = min(p.started_s for p in pods)
    end = max(p.finished_s for p in pods)
    gpus = sum(p.gpus for p in pods) or (1 if pods[0].mig else 0)
    if end < start:
        raise TraceFormatError(collector.path, line, "finishedAt is before startTime")
    collector.claim(line, job_id)
    if collector.skipped_as_empty(line, job_id, gpus, end - start):
        return None
    first = pods[0]
    fields = {"job_id": job_id, "runtime_s": end - start, "runtime_estimate_s": end - start, "n_gpus": gpus,
              "user": first.team, "team": first.team, "priority": max(p.priority for p in pods), "qos": first.qos,
              "partition": first.partition,
              "outcome": TraceOutcome.FAILED if any(p.outcome is TraceOutcome.FAILED for p in pods)
              else TraceOutcome.PASS}
    if first.mig:
        fields["mig_profile"] = first.mig
    return PendingJob(line, min(p.created_s for p in pods), fields)
