"""Jobs: what a user submits, the states a job goes through, and why a job or an action is refused."""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

from envs.core.cluster import MILLI_PER_GPU
from envs.core.errors import JobSpecError
from envs.core.mig import compute_slices_of, normalize_profile, share_milli


class JobState(Enum):
    """Lifecycle states (SPEC §3). A job ends exactly once: COMPLETED, FAILED (interrupted by failures more often
    than the retry limit) or REJECTED (it could never run on the cluster)."""

    PENDING = "pending"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    REJECTED = "rejected"


class RejectReason(Enum):
    """Why a job can never run on a cluster; decided at submission."""

    TOO_MANY_GPUS = "more GPUs than the eligible nodes of the cluster hold"
    NO_ELIGIBLE_GPU = "no node has an allowed GPU type with enough GPU memory"
    CPU_RAM = "no eligible node has enough CPU or RAM for one GPU's share"
    UNKNOWN_PARTITION = "the cluster has no partition of this name"
    PARTITION_ACCESS = "the job's team may not use its partition"
    PARTITION_TIME_LIMIT = "the requested wall time exceeds the partition's limit"
    QUOTA = "the job asks for more GPUs than its quotas ever allow"
    MIG_PROFILE = "no eligible node's GPU type offers the job's MIG profile"


class RefusalReason(Enum):
    """Why the simulator refused an action (the ``reason`` of :class:`~envs.core.errors.ActionRefused`)."""

    UNKNOWN_JOB = "no such job"
    NOT_PENDING = "the job is not pending"
    WRONG_GPU_COUNT = "the allocation does not hold the number of GPUs the job asks for"
    BAD_GPU_INDEX = "a GPU index is out of range or repeated"
    GPU_TYPE = "a GPU's type is not allowed or has too little memory"
    GPU_BUSY = "a GPU has too little free capacity"
    GPU_MEMORY = "a shared GPU has too little free memory"
    GPU_MODE = "a GPU holds MIG slices: only MIG jobs may share it"
    MIG_GEOMETRY = "no valid MIG position is free, or the GPU is not MIG-capable, or is in full mode and not empty"
    CPU_RAM = "a node has too little free CPU or RAM"
    NODE_DOWN = "a node is not healthy"
    GPU_DOWN = "a GPU has failed"
    SCHEDULER_DOWN = "the scheduler is down"
    NOT_RUNNING = "the job is not running"
    NOT_PREEMPTIBLE = "the job may not be preempted"
    PARTITION = "a GPU lies outside the job's partition"
    QUOTA = "the start would exceed a quota"


MAX_TIME_S = 1e10
"""The largest time or duration a job may give (about 317 years) [s]. Larger values are data errors (a trace field
of 1e308), and beyond about 1e15 s the simulator's float clock could no longer tell one second from the next."""
JOB_BOUNDS = {
    "submit_time_s": MAX_TIME_S, "runtime_s": MAX_TIME_S, "runtime_estimate_s": MAX_TIME_S,
    "checkpoint_interval_s": MAX_TIME_S,
    "gpu_mem_gib": 1e6,  # [GiB]
    "dataset_gib": 1e9,  # [GiB]
    "comm_sensitivity": 1.0,
    "cpu_milli_per_gpu": 1e9,  # [milli-cores]: a million cores
    "ram_mib_per_gpu": 1e12,  # [MiB]
}
"""Each bounded field of :class:`Job` and its largest value (every one is at least 0)."""
MAX_JOB_GPUS = 1_000_000
"""The most GPUs one job may ask for."""
MAX_PRIORITY = 10**9
"""The largest priority class, in absolute value."""


class TraceOutcome(Enum):
    """How a job ended in the trace it was read from (:attr:`Job.outcome`); reported, never simulated.

    - ``PASS``: the job finished on its own (SWF status 1, openb pod phase ``Succeeded``).
    - ``FAILED``: the job ended with an error (SWF status 0, openb pod phase ``Failed``).
    - ``KILLED``: the job was cancelled by its user or the system (SWF status 5).
    - ``UNKNOWN``: the trace does not say (Philly, Tiresias, SWF status -1 or a partial-execution status, an openb
      pod still ``Running`` at the end of the trace) and generated jobs.
    """

    PASS = "pass"
    FAILED = "failed"
    KILLED = "killed"
    UNKNOWN = ""


@dataclass(frozen=True, slots=True)
class Job:
    """One submitted job. Times in seconds, GPU shares in milli-GPU (1000 = one whole GPU).

    Defaults are those used when a trace does not say: any GPU type, no memory, CPU, RAM or data needs, user
    and team ``"-"``, priority 0, not preemptible, communication sensitivity 0, no checkpoints, the default
    partition, no MIG profile.

    GPU memory: a whole-GPU job holds all the memory of its GPUs; a fractional job holds ``gpu_mem_gib`` of its GPU
    (0: it holds none, i.e. its memory use is not modelled and never stops another job from sharing the GPU).
    MIG: ``mig_profile`` (``3g.20gb``, or the Kubernetes resource ``nvidia.com/mig-3g.20gb``; stored in the short
    form) asks for one GPU instance of that profile on one GPU; ``gpu_milli`` is then set from it, compute slices / 7
    (:func:`envs.core.mig.share_milli`), and holds the instance's memory slices.
    """

    job_id: int
    submit_time_s: float  # submission time [s]
    runtime_s: float  # base runtime at speed factor 1, ideal placement, no staging [s]
    runtime_estimate_s: float  # requested wall time: the user's estimate and limit [s]
    n_gpus: int = 1  # whole GPUs; 1 for a fractional job
    gpu_milli: int = MILLI_PER_GPU  # share of each GPU [milli-GPU]; < 1000 only when n_gpus == 1
    gpu_types: frozenset[str] = frozenset()  # allowed GPU types; empty = any
    gpu_mem_gib: float = 0.0  # GPU memory needed on each GPU [GiB]
    cpu_milli_per_gpu: int = 0  # CPU needed per GPU [milli-cores]
    ram_mib_per_gpu: int = 0  # RAM needed per GPU [MiB]
    user: str = "-"
    team: str = "-"
    priority: int = 0  # priority class; higher is more important
    qos: str = ""  # QoS label from the trace (openb: LS, BE, Burstable, Guaranteed)
    # recorded outcome in the trace; a replay runs the job for its recorded time whatever it was
    outcome: TraceOutcome = TraceOutcome.UNKNOWN
    preemptible: bool = False
    comm_sensitivity: float = 0.0  # c in [0, 1]: how much a spread placement slows the job
    dataset_id: str = ""  # empty = no input data to stage
    dataset_gib: float = 0.0  # dataset size [GiB]
    checkpoint_interval_s: float = 0.0  # 0 = never checkpoints
    type_speeds: tuple[tuple[str, float], ...] = ()  # per-type speed overrides (Gavel-style)
    partition: str = ""  # partition (Slurm) or node pool (Kubernetes); empty = the cluster's default
    mig_profile: str = ""  # MIG profile asked for (short form, e.g. "3g.20gb"); empty = none

    def __post_init__(self) -> None:
        where = f"job {self.job_id}"
        if self.mig_profile:
            try:
                profile = normalize_profile(self.mig_profile)
            except ValueError as exc:
                raise JobSpecError(f"{where}: mig_profile: {exc}") from exc
            share = share_milli(compute_slices_of(profile))
            if self.n_gpus != 1:
                raise JobSpecError(f"{where}: a MIG profile ({profile}) needs n_gpus == 1, got {self.n_gpus}")
            if self.gpu_milli not in (MILLI_PER_GPU, share):
                raise JobSpecError(f"{where}: gpu_milli: a {profile} job takes {share} milli-GPU, got "
                                   f"{self.gpu_milli}")
            object.__setattr__(self, "mig_profile", profile)
            object.__setattr__(self, "gpu_milli", share)
        for key, most in JOB_BOUNDS.items():
            value = getattr(self, key)
            if not 0 <= value <= most:  # false for nan
                raise JobSpecError(f"{where}: {key}: must be in [0, {most:g}], got {value}")
        if not 1 <= self.n_gpus <= MAX_JOB_GPUS:
            raise JobSpecError(f"{where}: n_gpus: must be in 1..{MAX_JOB_GPUS:,}, got {self.n_gpus}")
        if not -MAX_PRIORITY <= self.priority <= MAX_PRIORITY:
            raise JobSpecError(f"{where}: priority: must be within ±{MAX_PRIORITY:,}, got {self.priority}")
        if not 1 <= self.gpu_milli <= MILLI_PER_GPU:
            raise JobSpecError(f"{where}: gpu_milli: must be in 1..{MILLI_PER_GPU}, got {self.gpu_milli}")
        if self.gpu_milli < MILLI_PER_GPU and self.n_gpus != 1:
            raise JobSpecError(f"{where}: a fractional share (gpu_milli={self.gpu_milli}) needs n_gpus == 1")
        if self.dataset_gib > 0 and not self.dataset_id:
            raise JobSpecError(f"{where}: dataset_gib > 0 needs a dataset_id")
        for name, speed in self.type_speeds:
            if not speed > 0:
                raise JobSpecError(f"{where}: type_speeds[{name!r}]: must be > 0, got {speed}")

    @property
    def gpu_share(self) -> float:
        """GPUs held, counting a fractional share as a fraction of one GPU."""
        return self.n_gpus * self.gpu_milli / MILLI_PER_GPU

    def checkpointed_s(self, computing_s: float) -> float:
        """Of ``computing_s`` seconds computed in one run, the part its last checkpoint keeps [s]: whole checkpoint
        intervals, 0 for a job that never checkpoints."""
        interval = self.checkpoint_interval_s
        return math.floor(computing_s / interval) * interval if interval > 0 else 0.0

    @property
    def is_mig(self) -> bool:
        """True when the job asks for a MIG instance."""
        return bool(self.mig_profile)

    @property
    def gpu_mem_mib(self) -> int:
        """``gpu_mem_gib`` in whole MiB (``round(GiB × 1024)``): what a fractional job holds of its GPU's memory."""
        return round(self.gpu_mem_gib * 1024)

    @property
    def is_fractional(self) -> bool:
        """True when the job asks for a share of one GPU rather than whole GPUs."""
        return self.gpu_milli < MILLI_PER_GPU
