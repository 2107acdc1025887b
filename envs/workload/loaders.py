"""One entry point for every trace format: detect the format of a file and load it into a :class:`Workload`.

Formats: ``swf`` (:mod:`envs.workload.swf`), ``philly``, ``openb``, ``tiresias``, ``sacct`` (Slurm's
``sacct --parsable2``, :mod:`envs.workload.operators.sacct`), ``helios`` (SenseTime's ``cluster_log.csv``,
:mod:`envs.workload.operators.helios`), ``pods`` (``kubectl get pods -A -o json``,
:mod:`envs.workload.operators.kubectl_pods`) and ``kueue`` (Kueue Workloads, :mod:`envs.workload.operators.kueue`);
the two JSON formats are named, never detected.

Detection (:func:`detect_format`), first match wins: a name ending in ``.swf`` or ``.swf.gz`` → ``swf``; else the
first non-blank line: ``;`` (an SWF header comment) → ``swf``, ``#job id`` → ``philly``, ``name,cpu_milli`` →
``openb``, ``job_id,num_gpu,submit_time`` → ``tiresias``, a ``|``-separated header naming ``JobIDRaw`` →
``sacct``, a comma-separated header naming every column of :data:`~envs.workload.operators.helios.HELIOS_COLUMNS` →
``helios``. Anything else raises :class:`UnknownTraceFormat`; a cluster file (an openb node list, ``scontrol`` or
``sinfo`` output, ``kubectl`` JSON) gets a hint to give it as a cluster instead.

:func:`natural_cluster` is the cluster a trace is replayed on when none is given: an SWF trace's own machine, the
openb node list beside the pod list, the ``philly-like`` preset for Philly.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from envs.core.cluster import ClusterSpec, swf_machine
from envs.core.errors import ConfigError, TraceFormatError
from envs.core.presets import load_preset
from envs.workload.openb import OPENB_NODE_LIST, load_openb, load_openb_cluster
from envs.workload.operators.helios import HELIOS_COLUMNS, load_helios
from envs.workload.operators.kubectl_pods import load_kubectl_pods
from envs.workload.operators.kueue import load_kueue_workloads
from envs.workload.operators.sacct import load_sacct
from envs.workload.philly import load_philly
from envs.workload.reader import check_comm_sensitivity, first_line
from envs.workload.swf import load_swf
from envs.workload.table import Workload
from envs.workload.tiresias import load_tiresias

TRACE_FORMATS: dict[str, Callable[..., Workload]] = {
    "swf": lambda path, comm_sensitivity: load_swf(path),  # SWF jobs are rigid: no communication sensitivity
    "philly": load_philly,
    "openb": load_openb,
    "tiresias": load_tiresias,
    "sacct": load_sacct,
    "helios": load_helios,
    "pods": load_kubectl_pods,  # kubectl get pods -A -o json
    "kueue": load_kueue_workloads,  # kubectl get workloads.kueue.x-k8s.io -A -o json
}
"""Loader of each format name, called as ``loader(path, comm_sensitivity)``."""

PHILLY_CLUSTER = "philly-like"
"""The cluster preset a Philly trace is replayed on (the trace does not publish its cluster)."""

_HEADER_PREFIXES = (
    (";", "swf"),
    ("#job id", "philly"),
    ("name,cpu_milli", "openb"),
    ("job_id,num_gpu,submit_time", "tiresias"),
)
_CLUSTER_HINTS = (
    ("sn,cpu_milli", "an openb node list: a cluster, not a workload; give it as openb:PATH"),
    ("NodeName=", "scontrol show node output: a cluster, not a workload; give it as scontrol:PATH"),
    ("NODELIST", "sinfo output: a cluster, not a workload; give it as sinfo:PATH"),
    ("{", "JSON: kubectl get nodes -o json is a cluster (kubectl:PATH); pods and Kueue Workloads are workloads "
          "named by their format (pods:PATH, kueue:PATH)"),
)


class UnknownTraceFormat(TraceFormatError):
    """A file whose trace format cannot be recognized."""


def detect_format(path: str | Path) -> str:
    """The format name of a trace file, from its name and first line; see the module docstring."""
    name = Path(path).name.lower()
    if name.endswith((".swf", ".swf.gz")):
        return "swf"
    head = first_line(path)
    for prefix, fmt in _HEADER_PREFIXES:
        if head.startswith(prefix):
            return fmt
    if "JobIDRaw" in head.split("|"):
        return "sacct"
    if set(HELIOS_COLUMNS) <= {c.strip() for c in head.split(",")}:
        return "helios"
    hint = next((f" (this is {what})" for prefix, what in _CLUSTER_HINTS if head.startswith(prefix)), "")
    shown = head if len(head) <= 60 else head[:60] + "..."
    raise UnknownTraceFormat(
        str(path), 1, f"unknown trace format{hint}; first line {shown!r}; known formats: {', '.join(TRACE_FORMATS)}"
    )


def load_trace(path: str | Path, fmt: str | None = None, *, comm_sensitivity: float = 0.5) -> Workload:
    """Load a trace of format ``fmt`` (detected from the file when None) into a :class:`Workload`.

    ``comm_sensitivity`` in [0, 1] goes to the multi-GPU jobs of GPU traces; SWF ignores it (its jobs are rigid).
    """
    check_comm_sensitivity(comm_sensitivity)
    fmt = detect_format(path) if fmt is None else fmt
    loader = TRACE_FORMATS.get(fmt)
    if loader is None:
        raise ConfigError(f"trace format: unknown format {fmt!r} (known: {', '.join(TRACE_FORMATS)})")
    return loader(path, comm_sensitivity)


def natural_cluster(fmt: str, path: str | Path, trace: Workload) -> tuple[ClusterSpec | None, str]:
    """(the cluster the trace ``trace`` of format ``fmt``, read from ``path``, is replayed on by default, where it
    comes from); (None, why) when the trace does not tell.

    SWF: the machine of its ``MaxProcs``/``MaxNodes`` header. openb: the GPU nodes of ``openb_node_list_gpu_node.csv``
    beside the pod list. Philly: the ``philly-like`` cluster preset. Other formats: none.
    """
    if fmt == "swf":
        if trace.machine_gpus > 0:
            return swf_machine(trace.machine_gpus), "MaxProcs/MaxNodes header"
        return None, "the trace has no MaxProcs/MaxNodes header"
    if fmt == "openb":
        node_list = Path(path).parent / OPENB_NODE_LIST
        if node_list.is_file():
            return load_openb_cluster(node_list), f"GPU nodes of {node_list}"
        return None, f"no {OPENB_NODE_LIST} beside the trace"
    if fmt == "philly":
        try:
            return load_preset(PHILLY_CLUSTER), f"cluster preset {PHILLY_CLUSTER}"
        except ConfigError as exc:  # the preset ships with the package: only a damaged install lacks it
            return None, f"cluster preset {PHILLY_CLUSTER} unavailable: {exc}"
    return None, f"the {fmt} format does not say"
