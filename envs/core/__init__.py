"""The world's nouns and pure functions: errors, GPU types, clusters and their presets, jobs, allocations, dataset
caches, the runtime model, the job log and the metrics computed from it.

Nothing here knows of time passing (:mod:`envs.sim`), of placement rules (:mod:`envs.placement`) or of Gymnasium:
these modules import numpy and PyYAML only (importing them runs ``envs/__init__.py`` first, which registers the env
ids with Gymnasium).
"""

from envs.core.cluster import MILLI_PER_GPU, ClusterSpec, NodeSpec
from envs.core.errors import (
    ActionRefused,
    ConfigError,
    GpuschedError,
    JobSpecError,
    SimulationStalled,
    TraceFormatError,
)
from envs.core.gpu_types import GPUType
from envs.core.job import Job, JobState, RefusalReason, RejectReason
from envs.core.joblog import JobLog, JobRecord, TopologyLevel
from envs.core.metrics import METRIC_DOCS, summarize
from envs.core.presets import cluster_from_dict, load_preset, preset_names
from envs.core.runtime import RuntimeConfig

__all__ = [
    "METRIC_DOCS", "MILLI_PER_GPU", "ActionRefused", "ClusterSpec", "ConfigError", "GPUType", "GpuschedError", "Job",
    "JobLog", "JobRecord", "JobSpecError", "JobState", "NodeSpec", "RefusalReason", "RejectReason", "RuntimeConfig",
    "SimulationStalled", "TopologyLevel", "TraceFormatError", "cluster_from_dict", "load_preset", "preset_names",
    "summarize",
]
