"""Workloads: the common job table, the synthetic generator and the trace loaders."""

from envs.workload.loaders import TRACE_FORMATS, UnknownTraceFormat, detect_format, load_trace
from envs.workload.openb import load_openb, load_openb_cluster
from envs.workload.philly import load_philly
from envs.workload.swf import load_swf
from envs.workload.table import Workload
from envs.workload.tiresias import load_tiresias

__all__ = [
    "TRACE_FORMATS",
    "UnknownTraceFormat",
    "Workload",
    "detect_format",
    "load_openb",
    "load_openb_cluster",
    "load_philly",
    "load_swf",
    "load_tiresias",
    "load_trace",
]
