"""Alibaba openb GPU traces (cluster-trace-gpu-v2023, Weng et al., ATC'23): pod lists and node lists.

**Pods** (:func:`load_openb`), columns
``name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time``;
one pod is one job. Mapping (times in s from the trace start):

- ``job_id`` = the number ending the pod name (``openb-pod-0017`` → 17; its last 18 digits at most), else the
  0-based data-row index.
- ``submit_time_s`` = creation_time.
- ``runtime_s`` = deletion_time − scheduled_time: the time the pod held its GPUs. Not deletion − creation, which
  adds the wait the pod had in Alibaba's queue (median 2 s, mean 70 s, up to 4 h in the published trace);
  the simulator produces its own wait, so counting the recorded one again would inflate every job.
- ``runtime_estimate_s`` = runtime_s (no estimate in the trace; add noise with
  :meth:`Workload.with_estimate_noise`).
- ``n_gpus`` = num_gpu; ``gpu_milli`` = the gpu_milli column when num_gpu == 1 (a share of one GPU), else 1000.
- ``gpu_types`` = gpu_spec split on ``|`` (duplicates collapse; empty = any type).
- ``cpu_milli_per_gpu`` = ceil(cpu_milli / num_gpu), ``ram_mib_per_gpu`` = ceil(memory_mib / num_gpu): rounded
  up so that num_gpu × the per-GPU share never reserves less than the pod asked for.
- ``qos`` = qos; ``priority`` and ``preemptible`` from qos by :data:`OPENB_QOS_PRIORITY` (below).
- ``outcome`` = pod_phase by :data:`OPENB_PHASE_OUTCOME` (below). It is reported only: Running, Succeeded and Failed
  pods all held their GPUs for the recorded time, and a replay runs each for that time.
- ``comm_sensitivity`` = the loader's argument for multi-GPU pods, 0 otherwise.
- ``machine_gpus`` = 0 (the cluster is the node list; see :func:`load_openb_cluster`).

QoS → (priority class, preemptible), higher is more important; :data:`OPENB_QOS_PRIORITY`. It follows Alibaba's
co-location QoS (Koordinator's LS over BE) and the Kubernetes QoS classes (Guaranteed > Burstable > BestEffort):

- ``LS`` → 3, not preemptible: latency-sensitive, an online service; the class a co-location scheduler protects
  first.
- ``Guaranteed`` → 2, not preemptible: Kubernetes Guaranteed (requests == limits), without a co-location label.
- ``Burstable`` → 1, not preemptible: Kubernetes Burstable (requests below limits).
- ``BE`` → 0, preemptible: best effort, batch work run on what is left over and evicted first.
- Another value (the empty string included) is malformed.

The published pod list holds 4,647 LS, 3,398 BE, 100 Burstable and 7 Guaranteed pods (3,590 / 2,510 / 97 / 6 of
them loaded as jobs).

pod_phase → outcome (a Kubernetes pod phase; the published list holds 5,193 Running, 1,870 Failed, 897 Pending and
192 Succeeded pods; 4,149 / 1,869 / 0 / 185 of them loaded as jobs):

- ``Succeeded`` → :attr:`~envs.core.job.TraceOutcome.PASS`; ``Failed`` → ``FAILED``.
- ``Running`` → ``UNKNOWN``: the pod was still running when its phase was recorded, so how it ended is not known.
- ``Pending`` → ``UNKNOWN``: never scheduled (in the published list every Pending pod has an empty scheduled_time
  and is skipped as ``never_scheduled`` or ``cpu_only``).
- ``Unknown`` (the Kubernetes phase of a pod whose node stopped reporting) → ``UNKNOWN``.
- Another value (the empty string included) is malformed.

Pod skip reasons (checked in this order, each record counted once):

- ``cpu_only``: num_gpu == 0 (1,088 pods of the published trace).
- ``never_scheduled``: empty scheduled_time (Pending pods: they never ran, so they have no runtime).
- ``zero_runtime``: deletion_time == scheduled_time.

Malformed pod rows raise :class:`~envs.core.errors.TraceFormatError`: a header without these columns, another field
count, a count or time that is not a (whole, for counts) finite number >= 0, gpu_milli outside 1..1000 for a
one-GPU pod, scheduled_time before creation_time or deletion_time before scheduled_time, a qos or pod_phase not in
the lists above (matched exactly, case included), a repeated job id.

**Nodes** (:func:`load_openb_cluster`), columns ``sn,cpu_milli,memory_mib,gpu,model``; one row per node.
CPU-only nodes (gpu == 0) are left out: a GPU scheduler cannot place anything on them. Every node is one NVLink
island (the trace has no topology); ``rack`` = GPU-node index // 32, an illustrative 32 nodes per rack;
``gpu_type`` = model, ``cpu_milli`` and ``ram_mib`` = the file's. Malformed rows (bad numbers, more than 256
GPUs in a node, a GPU node without a model or with a model missing from the GPU-type table, a repeated ``sn``)
and a list without GPU nodes raise :class:`~envs.core.errors.TraceFormatError`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import TypeVar

from envs.core.cluster import MILLI_PER_GPU, ClusterSpec, NodeSpec, even_islands
from envs.core.errors import ConfigError, TraceFormatError
from envs.core.gpu_types import DEFAULT_GPU_TYPES, GPUType
from envs.core.job import TraceOutcome
from envs.workload.reader import (
    JobCollector,
    check_comm_sensitivity,
    csv_rows,
    read_lines,
    seconds,
    show,
    trace_name,
    whole,
)
from envs.workload.table import Workload

OPENB_POD_COLUMNS = (
    "name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec", "qos", "pod_phase",
    "creation_time", "deletion_time", "scheduled_time",
)  # fmt: skip
"""The columns an openb pod list's header must name."""

OPENB_NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
"""The columns an openb node list's header must name."""

OPENB_NODE_LIST = "openb_node_list_gpu_node.csv"
"""File name of the published GPU node list, beside the pod lists."""

NODES_PER_RACK = 32
"""Illustrative rack size of an openb cluster (the trace does not say)."""

MAX_GPUS_PER_NODE = 256
"""Sanity bound on a node's GPU count (the published list has at most 8); a larger value is malformed."""

OPENB_QOS_PRIORITY: Mapping[str, tuple[int, bool]] = {
    "LS": (3, False),
    "Guaranteed": (2, False),
    "Burstable": (1, False),
    "BE": (0, True),
}
"""(priority class, preemptible) of each openb qos value; see the module docstring."""

OPENB_PHASE_OUTCOME: Mapping[str, TraceOutcome] = {
    "Succeeded": TraceOutcome.PASS,
    "Failed": TraceOutcome.FAILED,
    "Running": TraceOutcome.UNKNOWN,
    "Pending": TraceOutcome.UNKNOWN,
    "Unknown": TraceOutcome.UNKNOWN,
}
"""Recorded outcome of each openb (Kubernetes) pod phase; see the module docstring."""

_TRAILING_NUMBER = re.compile(r"[0-9]{1,18}$")  # at most 18 digits: an int64 id
_T = TypeVar("_T")


def load_openb(path: str | Path, comm_sensitivity: float = 0.5) -> Workload:
    """Read an openb pod list (plain or gzip); ``comm_sensitivity`` in [0, 1] is given to multi-GPU pods."""
    comm = check_comm_sensitivity(comm_sensitivity)
    where = str(path)
    collector = JobCollector(path)
    rows = csv_rows(path, read_lines(path), OPENB_POD_COLUMNS)
    for row_index, (lineno, row) in enumerate(rows):
        name, cpu_text, mem_text, n_text, milli_text, spec, qos, phase, created, deleted, scheduled = row
        match = _TRAILING_NUMBER.search(name)
        job_id = int(match.group()) if match else row_index
        cpu_milli = whole(cpu_text, where, lineno, "cpu_milli", minimum=0)
        ram_mib = whole(mem_text, where, lineno, "memory_mib", minimum=0)
        n_gpus = whole(n_text, where, lineno, "num_gpu", minimum=0)
        gpu_milli = whole(milli_text, where, lineno, "gpu_milli", minimum=0)
        created_s = seconds(created, where, lineno, "creation_time")
        deleted_s = seconds(deleted, where, lineno, "deletion_time")
        scheduled_s = seconds(scheduled, where, lineno, "scheduled_time") if scheduled else None
        if scheduled_s is not None:
            _check_order(created_s, scheduled_s, deleted_s, where, lineno)
        if n_gpus == 1 and not 1 <= gpu_milli <= MILLI_PER_GPU:
            raise TraceFormatError(where, lineno, f"gpu_milli {show(milli_text)} must be in 1..{MILLI_PER_GPU}")
        priority, preemptible = _lookup(OPENB_QOS_PRIORITY, qos, "qos", where, lineno)
        outcome = _lookup(OPENB_PHASE_OUTCOME, phase, "pod_phase", where, lineno)
        if n_gpus == 0:
            collector.skip(lineno, job_id, "cpu_only")
        elif scheduled_s is None:
            collector.skip(lineno, job_id, "never_scheduled")
        elif deleted_s == scheduled_s:
            collector.skip(lineno, job_id, "zero_runtime")
        else:
            collector.add(
                lineno,
                job_id=job_id,
                submit_time_s=created_s,
                runtime_s=deleted_s - scheduled_s,
                runtime_estimate_s=deleted_s - scheduled_s,
                n_gpus=n_gpus,
                gpu_milli=gpu_milli if n_gpus == 1 else MILLI_PER_GPU,
                gpu_types=frozenset(t.strip() for t in spec.split("|") if t.strip()),
                cpu_milli_per_gpu=-(-cpu_milli // n_gpus),
                ram_mib_per_gpu=-(-ram_mib // n_gpus),
                priority=priority,
                qos=qos,
                outcome=outcome,
                preemptible=preemptible,
                comm_sensitivity=comm if n_gpus > 1 else 0.0,
            )
    return collector.workload()


def _lookup(table: Mapping[str, _T], text: str, what: str, where: str, lineno: int) -> _T:
    """``table[text]``; a value not in the table is malformed (the error lists the known ones)."""
    try:
        return table[text]
    except KeyError:
        known = ", ".join(table)
        raise TraceFormatError(where, lineno, f"{what} {show(text)} is not one of {known}") from None


def _check_order(created_s: float, scheduled_s: float, deleted_s: float, where: str, lineno: int) -> None:
    if scheduled_s < created_s:
        raise TraceFormatError(where, lineno, f"scheduled_time {scheduled_s:g} is before creation_time {created_s:g}")
    if deleted_s < scheduled_s:
        raise TraceFormatError(where, lineno, f"deletion_time {deleted_s:g} is before scheduled_time {scheduled_s:g}")


def load_openb_cluster(path: str | Path, gpu_types: Mapping[str, GPUType] | None = None) -> ClusterSpec:
    """Read an openb node list into a cluster of its GPU nodes (``gpu_types``: the type table, default built-in)."""
    table = dict(DEFAULT_GPU_TYPES if gpu_types is None else gpu_types)
    where = str(path)
    nodes: list[NodeSpec] = []
    line_of_name: dict[str, int] = {}
    last_line = 1
    for lineno, (name, cpu_text, mem_text, gpu_text, model) in csv_rows(path, read_lines(path), OPENB_NODE_COLUMNS):
        last_line = lineno
        cpu_milli = whole(cpu_text, where, lineno, "cpu_milli", minimum=0)
        ram_mib = whole(mem_text, where, lineno, "memory_mib", minimum=0)
        n_gpus = whole(gpu_text, where, lineno, "gpu", minimum=0)
        if n_gpus > MAX_GPUS_PER_NODE:
            raise TraceFormatError(where, lineno, f"gpu {show(gpu_text)} must be <= {MAX_GPUS_PER_NODE} per node")
        first = line_of_name.setdefault(name, lineno)
        if first != lineno:
            raise TraceFormatError(where, lineno, f"node sn {show(name)} repeats the sn of line {first}")
        if n_gpus == 0:
            continue
        if model not in table:
            known = ", ".join(sorted(table))
            raise TraceFormatError(where, lineno, f"model {show(model)} is not a known GPU type (known: {known})")
        try:
            nodes.append(
                NodeSpec(
                    name=name,
                    gpu_type=model,
                    n_gpus=n_gpus,
                    islands=even_islands(n_gpus, n_gpus),
                    cpu_milli=cpu_milli,
                    ram_mib=ram_mib,
                    rack=len(nodes) // NODES_PER_RACK,
                )
            )
        except ConfigError as exc:
            raise TraceFormatError(where, lineno, str(exc)) from None
    if not nodes:
        raise TraceFormatError(where, last_line, "the node list has no GPU node (gpu > 0)")
    try:
        return ClusterSpec(name=trace_name(path), nodes=tuple(nodes), gpu_types=table)
    except ConfigError as exc:  # all checked above, row by row; kept so that no ConfigError can leak
        raise TraceFormatError(where, last_line, str(exc)) from None
