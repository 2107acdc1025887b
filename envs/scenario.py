"""Scenarios: the one place where spec strings become a cluster, a workload and a runtime model.

Spec strings:

- a workload: a synthetic preset name (``default``, ``small``) or generator YAML path; or a trace as
  ``FORMAT:PATH`` with FORMAT one of ``swf``, ``philly``, ``openb``, ``tiresias``, ``sacct``, ``helios``
  (:func:`trace_spec`);
- a cluster (:func:`load_cluster`): a preset name (``tiny``), a preset YAML path, ``swf:N`` (an SWF machine of N
  processors), ``openb:NODE_LIST.csv``, or an operator's node export (:data:`CLUSTER_FILE_FORMATS`):
  ``scontrol:PATH`` (``scontrol show node --oneliner``), ``sinfo:PATH`` (``sinfo -N -o "%N %P %c %m %G"``) or
  ``kubectl:PATH`` (``kubectl get nodes -o json``); ``auto``, empty or None (:func:`scenario_cluster`): a trace's
  natural cluster (:func:`~envs.workload.loaders.natural_cluster`), :data:`DEFAULT_CLUSTER` for a synthetic workload;
- a runtime model: ``full`` or ``rigid`` (:meth:`~envs.core.runtime.RuntimeConfig.named`); a run's default
  (:func:`default_runtime_model`) is ``rigid`` for SWF traces, whose jobs are rigid, and ``full`` otherwise;
- dynamics (failures, repairs, scheduler outages): a scenario name under ``configs/scenarios/`` (``none``, ``low``,
  ``high``, ``outages``, ``flaky``) or a YAML path (:func:`~envs.core.dynamics.load_dynamics`); a run's random
  failures and outages are drawn with its seed, so every policy of one seed meets the same ones.
  A scenario's ``governance`` section sets the cluster's partitions and quotas (:func:`governed`).

Traces are loaded once per process (:func:`load_trace_once`): many envs, resets and evaluation runs share the
immutable job table.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from envs.core.cluster import ClusterSpec, swf_machine
from envs.core.dynamics import NO_DYNAMICS, DynamicsConfig, load_dynamics, scheduled_gpus
from envs.core.errors import ConfigError
from envs.core.governance import governance_from_dict
from envs.core.presets import load_preset
from envs.core.runtime import RuntimeConfig
from envs.workload.loaders import TRACE_FORMATS, load_trace, natural_cluster
from envs.workload.openb import load_openb_cluster
from envs.workload.operators.kubectl_nodes import load_kubectl_cluster
from envs.workload.operators.slurm_nodes import load_scontrol_cluster, load_sinfo_cluster
from envs.workload.reader import no_jobs_left
from envs.workload.synthetic import generate, load_workload_config
from envs.workload.synthetic_config import SyntheticConfig
from envs.workload.table import Workload

DEFAULT_CLUSTER = "hetero-64"
"""The cluster a synthetic workload runs on when none is given."""

AUTO = "auto"
"""The cluster spec that means "the workload's natural cluster"."""

CLUSTER_FILE_FORMATS: dict[str, Callable[[str], ClusterSpec]] = {
    "openb": load_openb_cluster,  # an Alibaba openb node list
    "scontrol": load_scontrol_cluster,  # scontrol show node --oneliner
    "sinfo": load_sinfo_cluster,  # sinfo -N -o "%N %P %c %m %G"
    "kubectl": load_kubectl_cluster,  # kubectl get nodes -o json
}
"""Loader of each node-file cluster spec ``FORMAT:PATH``."""


@dataclass(frozen=True)
class TraceSpec:
    """A trace named by a workload spec ``FORMAT:PATH``."""

    fmt: str  # a key of envs.workload.loaders.TRACE_FORMATS
    path: str

    @property
    def name(self) -> str:
        """The trace file's name (for tables)."""
        return Path(self.path).name


@dataclass(frozen=True)
class Scenario:
    """Everything one run needs besides its policy."""

    cluster: ClusterSpec
    workload: Workload
    runtime: RuntimeConfig
    dynamics: DynamicsConfig


def trace_spec(workload: str) -> TraceSpec | None:
    """The trace a workload spec names (``FORMAT:PATH`` with a known format), or None for a synthetic workload."""
    fmt, colon, path = workload.partition(":")
    if not colon or fmt not in TRACE_FORMATS:
        return None
    if not path:
        raise ConfigError(f"{fmt}: needs a trace path, e.g. workload='{fmt}:PATH'")
    return TraceSpec(fmt, path)


def load_cluster(spec: str | Path) -> ClusterSpec:
    """A cluster from a preset name (``tiny``), a YAML path, ``swf:N`` (N processors), or ``FORMAT:PATH`` of a
    node file with FORMAT one of :data:`CLUSTER_FILE_FORMATS` (``openb``, ``scontrol``, ``sinfo``, ``kubectl``)."""
    text = str(spec)
    if text.startswith("swf:"):
        try:
            return swf_machine(int(text[4:]))
        except ValueError as exc:
            raise ConfigError(f"cluster {text!r}: expected swf:N with an integer N") from exc
    fmt, colon, path = text.partition(":")
    if colon and fmt in CLUSTER_FILE_FORMATS:
        if not path:
            raise ConfigError(f"cluster {text!r}: expected {fmt}:PATH")
        return CLUSTER_FILE_FORMATS[fmt](path)
    return load_preset(text)


def load_trace_once(path: str, fmt: str) -> Workload:
    """A trace loaded once per process: many envs, resets and evaluation runs share the immutable job table. A
    trace with no usable job is a :class:`ConfigError` that counts the skipped records by reason."""
    return _load_trace_cached(str(Path(path).resolve()), fmt)


@lru_cache(maxsize=8)
def _load_trace_cached(path: str, fmt: str) -> Workload:
    workload = load_trace(path, fmt)
    if not workload.jobs:
        raise no_jobs_left(path, dict(workload.skipped))
    return workload


def scenario_cluster(cluster: str | None, trace: TraceSpec | None, workload: Workload | None) -> ClusterSpec:
    """The cluster named by ``cluster``; when it is not given (None, empty or ``auto``), the natural cluster of
    ``trace`` (whose job table is ``workload``), or :data:`DEFAULT_CLUSTER` for a synthetic workload."""
    if cluster and cluster != AUTO:
        return load_cluster(cluster)
    if trace is None or workload is None:
        return load_cluster(DEFAULT_CLUSTER)
    found, why = natural_cluster(trace.fmt, trace.path, workload)
    if found is None:
        raise ConfigError(f"cannot tell which cluster {trace.path} ran on ({why}); give a cluster")
    return found


def governed(cluster: ClusterSpec, dynamics: DynamicsConfig) -> ClusterSpec:
    """``cluster`` with the partitions and quotas of the scenario ``dynamics`` (its preset's own when the scenario
    has no ``governance`` section)."""
    if dynamics.governance is None:
        return cluster
    where = f"scenario {dynamics.name!r}: governance"
    governance = governance_from_dict(dynamics.governance, tuple(n.name for n in cluster.nodes), where)
    try:
        return dataclasses.replace(cluster, governance=governance)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from exc


def default_runtime_model(trace: TraceSpec | None) -> str:
    """The runtime model a workload runs under unless told otherwise: ``rigid`` for SWF traces, else ``full``."""
    return "rigid" if trace is not None and trace.fmt == "swf" else "full"


def synthetic_config(workload: str, load: float = 1.0) -> SyntheticConfig:
    """The generator config of a synthetic workload spec, its target load multiplied by ``load``."""
    config = load_workload_config(workload)
    return config if load == 1.0 else dataclasses.replace(config, target_load=config.target_load * load)


@dataclass(frozen=True)
class Plan:
    """A run's world before its synthetic jobs are drawn: the cluster, the runtime model, and either the trace's job
    table or the generator config."""

    cluster: ClusterSpec
    runtime: RuntimeConfig
    workload: Workload | None  # a trace's (windowed, compressed) jobs
    synthetic: SyntheticConfig | None  # a synthetic workload's generator config (its load applied)
    dynamics: DynamicsConfig  # its seed still to be set by the run


def plan(workload: str, cluster: str | None = None, load: float = 1.0, window: tuple[int, int] | None = None,
         dynamics: str = NO_DYNAMICS) -> Plan:
    """Everything :func:`scenario` resolves except drawing the synthetic jobs: it raises for an unknown workload,
    trace, window, cluster or dynamics scenario, and so checks a run before it runs."""
    trace = trace_spec(workload)
    changes = load_dynamics(dynamics)
    if trace is None:
        config = synthetic_config(workload, load)
        world = governed(scenario_cluster(cluster, None, None), changes)
        scheduled_gpus(changes, world)  # a failure of a node or GPU the cluster lacks: refused now
        return Plan(world, RuntimeConfig.named(default_runtime_model(None)), None, config, changes)
    jobs = load_trace_once(trace.path, trace.fmt)
    if window:
        jobs = jobs.window(*window, rebase=False)
    if load != 1.0:
        jobs = jobs.scale_load(load)
    world = governed(scenario_cluster(cluster, trace, jobs), changes)
    scheduled_gpus(changes, world)
    return Plan(world, RuntimeConfig.named(default_runtime_model(trace)), jobs, None, changes)


def scenario(workload: str, cluster: str | None = None, seed: int = 0, load: float = 1.0,
             window: tuple[int, int] | None = None, dynamics: str = NO_DYNAMICS) -> Scenario:
    """One run's world. A synthetic ``workload`` is generated with ``seed`` at ``load`` times its target load; a
    trace is cut to ``window`` (first job index, number of jobs; submit times kept) and its inter-arrival times
    divided by ``load``. ``cluster`` as :func:`scenario_cluster`; the runtime model is the workload's default;
    ``dynamics`` names the failures and outages, drawn with ``seed``."""
    world = plan(workload, cluster, load, window, dynamics)
    jobs = world.workload
    if jobs is None:
        assert world.synthetic is not None
        jobs = generate(world.synthetic, seed=seed, capacity_gpus=world.cluster.n_gpus)
    return Scenario(world.cluster, jobs, world.runtime, dataclasses.replace(world.dynamics, seed=seed))


def training_streams(workload: str, cluster: str | None, load: float, train: tuple[int, ...],
                     window_jobs: int | None = None) -> list[Workload]:
    """The workloads of a world's training range: the synthetic ``workload`` drawn with each seed of ``train``, or
    the trace's windows of ``window_jobs`` jobs starting at each job index of ``train``."""
    if trace_spec(workload) is None:
        return [scenario(workload, cluster, seed, load).workload for seed in train]
    if window_jobs is None:
        raise ConfigError(f"training streams of trace {workload!r} need a window length")
    return [scenario(workload, cluster, 0, load, (start, window_jobs)).workload for start in train]
