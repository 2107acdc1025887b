"""Workloads: the common job table, the synthetic generator and the trace loaders."""

from envs.workload.table import Workload

__all__ = ["Workload"]
