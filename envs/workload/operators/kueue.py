"""Kueue history: the ``Workload`` objects of ``kubectl get workloads.kueue.x-k8s.io -A -o json`` as a workload
(format ``kueue``). Field names are those of Kueue's ``kueue.x-k8s.io/v1beta1`` API (``apis/kueue/v1beta1/
workload_types.go`` of kubernetes-sigs/kueue).

Each finished Workload that asks for GPUs becomes one job (a Workload is Kueue's unit of admission: all its pods are
admitted together, so a multi-pod Workload is a gang job). Times are seconds from the earliest creation among the
jobs:

- submit: ``metadata.creationTimestamp``; start: the ``lastTransitionTime`` of its ``Admitted`` condition (Kueue
  unsuspends the job's pods on admission); end: that of its ``Finished`` condition (RFC 3339 times). A Workload
  evicted and admitted again keeps its last admission: the earlier runs are not in the object;
- GPUs: over ``spec.podSets``, the pods of a set (``status.admission.podSetAssignments[].count`` where Kueue admitted
  fewer, else ``count``) times the GPUs of its ``template.spec`` (``nvidia.com/gpu`` limits, else requests, summed
  over containers, as for pods); a one-pod Workload asking for one MIG instance is a MIG job of that profile;
- ``spec.priority`` is the job's priority and ``spec.priorityClassName`` its QoS label;
- ``status.admission.clusterQueue`` (the queue that holds the quota) is its team, ``metadata.namespace`` its user;
  ``spec.queueName`` (the LocalQueue) is checked, not used;
- a node pool named by the first pod set's ``nodeSelector`` (:data:`~envs.workload.operators.kubectl_nodes.
  NODE_POOL_LABELS`) is its partition: a pool the cluster lacks makes a rejected job, counted by evaluate.py;
- the outcome is the ``Finished`` condition's reason: ``Succeeded`` passed, ``Failed`` failed.

Skipped, and counted by reason: Workloads not finished (``not_finished``), finished without an admission (deactivated
or rejected before they ran: ``never_started``), finished with another reason (older Kueue's ``JobFinished`` says
nothing of success: ``unknown_outcome``), without GPUs (``no_gpus``) or run time (``zero_runtime``), and MIG beside
whole GPUs or on several pods (``mig_mix``). Malformed input is a :class:`~envs.core.errors.TraceFormatError` naming
the file and the line of the Workload.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from envs.core.errors import TraceFormatError
from envs.core.job import TraceOutcome
from envs.workload.operators.kube_objects import SEVERAL_MIG, kubectl_items, node_pool, pod_gpus, rfc3339_s
from envs.workload.operators.kubectl_nodes import json_object, whole_count
from envs.workload.reader import JobCollector, PendingJob, add_from_first_submit, check_comm_sensitivity, show
from envs.workload.table import Workload

_OUTCOMES = {"Succeeded": TraceOutcome.PASS, "Failed": TraceOutcome.FAILED}
WORKLOADS_EXPECTED = "the output of kubectl get workloads -o json: an object with an items list of Kueue Workloads"
"""What a Workloads file must be, as its error says."""


def load_kueue_workloads(path: str | Path, comm_sensitivity: float = 0.5) -> Workload:
    """Read Kueue Workloads (module docstring); ``comm_sensitivity`` in [0, 1] goes to multi-GPU jobs."""
    comm = check_comm_sensitivity(comm_sensitivity)
    where = str(path)
    collector = JobCollector(path)
    jobs = []
    for number, (item, name, line) in enumerate(kubectl_items(path, "Workload", WORKLOADS_EXPECTED)):
        if item.get("kind", "Workload") != "Workload":
            raise TraceFormatError(where, line, f"items[{number}] is a {show(str(item.get('kind')))}, not a Workload")
        job = _job(item, item["metadata"], number + 1, f"workload {name!r}", where, line, collector)
        if job is not None:
            jobs.append(job)
    add_from_first_submit(collector, jobs, comm)
    return collector.workload()


def _condition_times(status: dict[str, Any], what: str, where: str, line: int) -> dict[str, tuple[float, str]]:
    """{condition type: (lastTransitionTime [s], reason)} of the conditions whose status is ``True``."""
    conditions = status.get("conditions") or []
    if not isinstance(conditions, list) or not all(isinstance(c, dict) for c in conditions):
        raise TraceFormatError(where, line, f"{what} status.conditions is not a list of objects")
    return {str(c.get("type")): (rfc3339_s(c.get("lastTransitionTime"), f"{what} {c.get('type')} lastTransitionTime",
                                           where, line), str(c.get("reason") or ""))
            for c in conditions if c.get("status") == "True"}


def _gpus(spec: dict[str, Any], status: dict[str, Any], what: str, where: str, line: int) -> tuple[int, str, str]:
    """(GPUs, MIG resource or "" or SEVERAL_MIG, node pool) over the pod sets, with the admitted pod counts."""
    pod_sets = spec.get("podSets")
    if not isinstance(pod_sets, list) or not pod_sets or not all(isinstance(s, dict) for s in pod_sets):
        raise TraceFormatError(where, line, f"{what} spec.podSets is not a non-empty list of objects")
    admission = json_object(status, "admission", f"{what} status.admission", where, line)
    assignments = admission.get("podSetAssignments") or []
    if not isinstance(assignments, list) or not all(isinstance(a, dict) for a in assignments):
        raise TraceFormatError(where, line, f"{what} status.admission.podSetAssignments is not a list of objects")
    admitted = {a.get("name"): a["count"] for a in assignments if "count" in a}
    gpus, migs, pods, pool = 0, [], 0, ""
    for index, pod_set in enumerate(pod_sets):
        part = f"{what} podSets[{index}]"
        count = whole_count(pod_set.get("count", 1), f"{part} count", where, line)
        if pod_set.get("name") in admitted:
            count = whole_count(admitted[pod_set.get("name")], f"{part} admitted count", where, line)
        template = json_object(pod_set, "template", f"{part} template", where, line)
        pod_spec = json_object(template, "spec", f"{part} template.spec", where, line)
        per_pod, mig = pod_gpus(pod_spec, part, where, line)
        gpus += count * per_pod
        pods += count
        migs += [mig] * count if mig else []
        pool = pool or (node_pool(pod_spec, part, where, line) if index == 0 else "")
    if not migs:
        return gpus, "", pool
    return gpus, migs[0] if len(migs) == 1 and pods == 1 and not gpus else SEVERAL_MIG, pool


def _job(item: dict[str, Any], metadata: dict[str, Any], job_id: int, what: str, where: str, line: int,
         collector: JobCollector) -> PendingJob | None:
    """The job of one Workload, or None when it is skipped (counted in ``collector``)."""
    spec = json_object(item, "spec", f"{what} spec", where, line)
    status = json_object(item, "status", f"{what} status", where, line)
    created = rfc3339_s(metadata.get("creationTimestamp"), f"{what} creationTimestamp", where, line)
    for key in ("queueName", "priorityClassName"):
        if not isinstance(spec.get(key, ""), str):
            raise TraceFormatError(where, line, f"{what} spec.{key} {show(str(spec[key]))} is not a string")
    priority = spec.get("priority", 0)
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise TraceFormatError(where, line, f"{what} spec.priority {show(str(priority))} is not an integer")
    gpus, mig, pool = _gpus(spec, status, what, where, line)
    conditions = _condition_times(status, what, where, line)
    finished = conditions.get("Finished")
    reason = ("not_finished" if finished is None else
              "never_started" if "Admitted" not in conditions else
              "unknown_outcome" if finished[1] not in _OUTCOMES else
              "mig_mix" if mig == SEVERAL_MIG else "")
    if reason:
        collector.skip(line, job_id, reason)
        return None
    start, end = conditions["Admitted"][0], finished[0]
    if end < start:
        raise TraceFormatError(where, line, f"{what} is Finished before it was Admitted")
    collector.claim(line, job_id)
    if collector.skipped_as_empty(line, job_id, gpus or (1 if mig else 0), end - start):
        return None
    cluster_queue = json_object(status, "admission", f"{what} status.admission", where, line).get("clusterQueue")
    fields = {"job_id": job_id, "runtime_s": end - start, "runtime_estimate_s": end - start,
              "n_gpus": gpus or 1, "user": str(metadata.get("namespace") or "-"),
              "team": str(cluster_queue or metadata.get("namespace") or "-"), "priority": priority,
              "qos": str(spec.get("priorityClassName") or ""), "partition": pool, "outcome": _OUTCOMES[finished[1]]}
    if mig:
        fields["mig_profile"] = mig
    return PendingJob(line, created, fields)
