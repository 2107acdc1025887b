"""The simulated world: cluster, jobs, workloads and trace loaders, placement, simulator, metrics."""

from envs.cluster import MILLI_PER_GPU, ClusterSpec, NodeSpec
from envs.env_config import EnvConfig
from envs.errors import ActionRefused, ConfigError, GpuschedError, JobSpecError, SimulationStalled, TraceFormatError
from envs.gym_env import GPUClusterEnv
from envs.job import Job, JobState, RefusalReason, RejectReason
from envs.joblog import JobLog, JobRecord, TopologyLevel
from envs.policy import WAIT, Action, Policy, Start, Wait
from envs.presets import load_cluster
from envs.registration import register_envs
from envs.runtime import RuntimeConfig
from envs.simulator import Simulator, simulate
from envs.view import RunningJob, View

register_envs()

__all__ = [
    "MILLI_PER_GPU", "WAIT", "Action", "ActionRefused", "ClusterSpec", "ConfigError", "EnvConfig", "GPUClusterEnv",
    "GpuschedError", "Job", "JobLog", "JobRecord", "JobSpecError", "JobState", "NodeSpec", "Policy",
    "RefusalReason", "RejectReason", "RunningJob", "RuntimeConfig", "SimulationStalled", "Simulator", "Start",
    "TopologyLevel", "TraceFormatError", "View", "Wait", "load_cluster", "register_envs", "simulate",
]
