"""Workloads: the common job table, the synthetic generator and the trace loaders."""

from envs.workload.loaders import TRACE_FORMATS, UnknownTraceFormat, detect_format, load_trace
from envs.workload.openb import load_openb, load_openb_cluster
from envs.workload.operators.helios import load_helios
from envs.workload.operators.kubectl_nodes import load_kubectl_cluster
from envs.workload.operators.sacct import load_sacct
from envs.workload.operators.slurm_nodes import load_scontrol_cluster, load_sinfo_cluster
from envs.workload.philly import load_philly
from envs.workload.swf import load_swf
from envs.workload.table import Workload
from envs.workload.tiresias import load_tiresias

__all__ = [
    "TRACE_FORMATS",
    "UnknownTraceFormat",
    "Workload",
    "detect_format",
    "load_helios",
    "load_kubectl_cluster",
    "load_openb",
    "load_openb_cluster",
    "load_philly",
    "load_sacct",
    "load_scontrol_cluster",
    "load_sinfo_cluster",
    "load_swf",
    "load_tiresias",
    "load_trace",
]
