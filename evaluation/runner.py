"""One evaluation run: a policy on a workload (one seed, one load factor), on the simulator or the peer engine.

A run gives a *row* (the SPEC §7 metrics, deterministic; of the whole run, or of the steady state that
``RunSpec.metrics_window`` keeps) and a *trace* (per-job data for the plots). Wall-clock figures (decision latency,
simulation time) are kept apart from the row, in ``timing``, so that result tables do not depend on the machine,
the backend or the number of workers.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from agents.peer_policy import is_model_name, parse_model_name
from baselines import make
from baselines.config import PolicyConfig, load_policy_config
from baselines.lookahead import LOOKAHEAD_PREFIX, is_planner_name
from baselines.registry import RLS_PREFIX
from envs.core import ConfigError, JobLog, JobState, summarize
from envs.core.dynamics import NO_DYNAMICS
from envs.core.metrics import WHOLE_RUN, window_fractions, window_records
from envs.peer.engine import run_sequence
from envs.peer.joblog import peer_log
from envs.peer.swf import PeerTrace, peer_trace_once
from envs.scenario import plan, scenario, trace_spec, training_streams
from envs.sim import Action, Policy, View, simulate
from envs.workload.futures import FutureModel
from evaluation.jobs import job_table


@dataclass(frozen=True)
class RunSpec:
    """What to run. ``workload``: a synthetic preset name or YAML path, or ``FORMAT:PATH`` of a trace."""

    policy: str
    workload: str
    cluster: str | None = None  # preset / YAML / swf:N / openb:PATH; None: the workload's natural cluster
    seed: int = 0  # synthetic generator seed (traces: only labels the run)
    load: float = 1.0  # load factor: synthetic target load × load, or trace inter-arrivals ÷ load
    window: tuple[int, int] | None = None  # (first job index, number of jobs) of a trace
    label: str | None = None  # workload name in the tables (default: derived from the spec)
    dynamics: str = NO_DYNAMICS  # failures and outages: a scenario name or YAML path, drawn with the seed
    policy_config: str | None = None  # a policy config file: orders' parameters, k8s weights, quotas, partitions
    metrics_window: tuple[float, float] = WHOLE_RUN  # fractions of the jobs, by submit time, that the metrics leave
    # out at the start and at the end (envs.core.metrics: the steady state); (0, 0): the whole run
    train: tuple[int, ...] = ()  # what a lookahead planner draws futures from: training seeds of a synthetic
    # workload, or first jobs of training windows of a trace (windows as long as this run's); () : DEFAULT_TRAIN_SEEDS

    def __post_init__(self) -> None:
        object.__setattr__(self, "metrics_window", window_fractions(self.metrics_window))  # or ConfigError

    @property
    def windowed(self) -> bool:
        """Whether the metrics leave jobs out at either end (a steady-state window, not the whole run)."""
        return self.metrics_window != WHOLE_RUN

    @property
    def peer(self) -> bool:
        """Whether the policy is an ``rls:`` one, run on the peer-compatible engine."""
        return self.policy.strip().lower().startswith(RLS_PREFIX)

    @property
    def workload_label(self) -> str:
        """The workload's name in result tables."""
        if self.label:
            return self.label
        trace = trace_spec(self.workload)
        name = trace.name if trace is not None else self.workload
        window = f"[{self.window_label}]" if self.window else ""
        load = f"@{self.load:g}" if self.load != 1.0 else ""
        dynamics = f" ({self.dynamics_label})" if self.dynamics != NO_DYNAMICS else ""
        return f"{name}{window}{load}{dynamics}"

    @property
    def window_label(self) -> str:
        """The trace window in result tables, ``FIRST:END`` (job indices, end excluded); "" for a whole workload."""
        return f"{self.window[0]}:{self.window[0] + self.window[1]}" if self.window else ""

    @property
    def dynamics_label(self) -> str:
        """The dynamics scenario's name in result tables (a YAML path's file stem)."""
        return Path(self.dynamics).stem if self.dynamics.endswith((".yaml", ".yml")) else self.dynamics


class TimedPolicy:
    """Wraps a policy and records the wall-clock latency of each decision [s]."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.name = policy.name
        self.latencies_s: list[float] = []

    def reset(self) -> None:
        self.policy.reset()
        self.latencies_s.clear()

    def act(self, view: View) -> Action:
        t0 = time.perf_counter()
        action = self.policy.act(view)
        self.latencies_s.append(time.perf_counter() - t0)
        return action


def run(spec: RunSpec) -> tuple[dict[str, Any], dict[str, Any], dict[str, float]]:
    """(row, trace, timing) of one run."""
    t0 = time.perf_counter()
    if spec.peer:
        log, latencies = _run_peer(spec)
    else:
        world = scenario(spec.workload, spec.cluster, spec.seed, spec.load, spec.window, spec.dynamics)
        config = _config(spec)
        policy = TimedPolicy(make_policy(spec.policy, config, spec))
        cluster = config.apply(world.cluster) if config is not None else world.cluster
        log = simulate(cluster, world.workload, policy, world.runtime, world.dynamics)
        latencies = policy.latencies_s
    p50, p99 = np.percentile(latencies, [50, 99]) * 1e6 if latencies else (0.0, 0.0)
    row = {"policy": spec.policy, "workload": spec.workload_label, "cluster": log.cluster_name, "seed": spec.seed,
           "load": spec.load, "scenario": spec.dynamics_label, "window": spec.window_label, **_window_column(spec),
           **summarize(log, spec.metrics_window)}
    rejected = log.rejected()
    if rejected and len(rejected) == len(log.records):  # counted over the whole run, whatever the metrics window
        reasons = Counter(f"rejected_{r.reject_reason.name.lower()}" for r in rejected)
        raise ConfigError(f"{spec.policy} on {spec.workload_label} (seed {spec.seed}): all {len(rejected):,} "
                          f"jobs were rejected at submission ({rejection_text(reasons)}), so nothing was "
                          "scheduled; check that the cluster has the jobs' partitions, GPU types and resources")
    timing = {"decision_p50_us": float(p50), "decision_p99_us": float(p99), "sim_wall_s": time.perf_counter() - t0}
    return row, _trace(spec, row, log), timing


def rejection_text(row: Mapping[str, Any]) -> str:
    """The rejected jobs of a row by reason, largest first (``unknown_partition 2,000, quota 3``)."""
    counts = sorted(((k.removeprefix("rejected_"), int(v)) for k, v in row.items()
                     if k.startswith("rejected_") and v), key=lambda kv: -kv[1])
    return ", ".join(f"{reason} {count:,}" for reason, count in counts) or "none"


def _window_column(spec: RunSpec) -> dict[str, str]:
    """The row's ``metrics_window`` column, ``"HEAD,TAIL"`` (fractions of the jobs left out at each end); none for
    the whole run, whose rows stay as they were."""
    return {"metrics_window": ",".join(map(str, spec.metrics_window))} if spec.windowed else {}


def _config(spec: RunSpec) -> PolicyConfig | None:
    """The run's policy config, read once per process; None without one."""
    if spec.policy_config is None:
        return None
    if spec.peer:
        raise ConfigError(f"policy {spec.policy!r}: the peer engine takes no policy config ({spec.policy_config})")
    return load_policy_config(spec.policy_config)


def make_policy(name: str, config: PolicyConfig | None = None, spec: RunSpec | None = None) -> Policy:
    """A heuristic by name (with ``config``'s parameters), a planner (its futures drawn from ``spec``'s training
    streams), or a trained model by the path of its ``model.zip``."""
    if is_model_name(name):
        if parse_model_name(name)[1] is not None:
            raise ConfigError(f"policy {name!r}: a +ORDER@RATIO decoding applies to peer-mode models (rls:PATH.zip)")
        from agents import load

        return load(name)
    if is_planner_name(name):
        if config is not None:
            raise ConfigError(f"policy {name!r}: planners take no policy config")
        futures = _future_model(spec.workload, spec.cluster, spec.load, spec.window, spec.train) \
            if spec is not None and name.strip().lower().startswith(LOOKAHEAD_PREFIX) else None
        return make(name, futures=futures)
    return config.make(name) if config is not None else make(name)


DEFAULT_TRAIN_SEEDS = tuple(range(100_000, 100_008))
"""Training seeds a lookahead planner draws futures from on a synthetic workload when a run names none: far from
the seeds that suites evaluate on."""


@lru_cache(maxsize=8)
def _future_model(workload: str, cluster: str | None, load: float, window: tuple[int, int] | None,
                  train: tuple[int, ...]) -> FutureModel:
    """The training streams of a run's world (module docstring of :mod:`envs.workload.futures`), built once per
    process: the synthetic workload drawn with each training seed, or the trace's windows starting at each
    training start (as long as the run's window)."""
    if trace_spec(workload) is None:
        return FutureModel(training_streams(workload, cluster, load, train or DEFAULT_TRAIN_SEEDS))
    if not train or window is None:
        raise ConfigError(f"a lookahead planner on trace {workload!r} needs a window and training windows' first "
                          "jobs (--train-seeds, or a suite's training range)")
    overlap = [s for s in train if s < window[0] + window[1] and window[0] < s + window[1]]
    if overlap:
        raise ConfigError(f"training windows starting at {overlap} overlap the evaluated window {window}")
    return FutureModel(training_streams(workload, cluster, load, train, window[1]))


def _peer_window(spec: RunSpec) -> tuple[str, PeerTrace, Any]:
    """(trace path, the trace read by the peer's rules, the window's jobs) of an ``rls:`` run."""
    trace_ref = trace_spec(spec.workload)
    if trace_ref is None or trace_ref.fmt != "swf" or not spec.window:
        raise ConfigError(f"policy {spec.policy!r}: rls: policies replay windows of SWF traces (swf:PATH)")
    path = trace_ref.path
    trace = peer_trace_once(str(Path(path).resolve()))
    start, length = spec.window
    if start < 0 or length < 1 or start + length > len(trace.jobs):
        raise ConfigError(f"window [{start}, {start + length}) is outside the {len(trace.jobs)} jobs of {path}")
    return path, trace, trace.jobs[start : start + length]


def _run_peer(spec: RunSpec) -> tuple[JobLog, list[float]]:
    """A ``rls:`` policy on the peer-compatible engine, logged like a simulator run (GPU = processor)."""
    path, trace, jobs = _peer_window(spec)
    name = spec.policy.strip()[len(RLS_PREFIX):]
    if is_model_name(name):
        assert spec.window is not None
        result, latencies = _peer_model(name).run_window(path, *spec.window)
    else:
        result, latencies = _run_peer_heuristic(spec.policy, jobs, trace)
    return peer_log(jobs, result, trace.machine), latencies


def check(spec: RunSpec, policy: bool = True, world: bool = True) -> None:
    """Raise now what ``run(spec)`` would raise for its names and files, without running it: with ``policy``, an
    unknown policy name or a model file that is missing or cannot be loaded; with ``world``, a workload, trace,
    window or cluster that does not resolve."""
    peer = spec.peer
    if world:
        if peer:
            if spec.dynamics != NO_DYNAMICS:
                raise ConfigError(f"policy {spec.policy!r}: the peer engine has no failures or outages "
                                  f"(scenario {spec.dynamics!r}); use one of our own policies")
            _peer_window(spec)
        else:
            world_plan = plan(spec.workload, spec.cluster, spec.load, spec.window, spec.dynamics)
            config = _config(spec)
            if config is not None:
                config.apply(world_plan.cluster)
    if policy:
        name = spec.policy.strip()[len(RLS_PREFIX):] if peer else spec.policy
        if peer and is_model_name(name):
            _peer_model(name)
        elif peer:
            make(spec.policy)
        else:
            make_policy(spec.policy, _config(spec), spec)


@lru_cache(maxsize=4)
def _peer_model(name: str) -> Any:
    """A model trained on the peer-mode env (``PATH.zip[+ORDER@RATIO]``), loaded once per process."""
    from agents.peer_policy import PeerModelPolicy

    path, decode = parse_model_name(name)
    return PeerModelPolicy(path, decode=decode)


def _run_peer_heuristic(name: str, jobs: Any, trace: PeerTrace) -> tuple[Any, list[float]]:
    """An ``rls:`` heuristic on a window: its :class:`~envs.peer.engine.PeerResult` and decision latencies [s]."""
    choose, backfill = make(name)
    latencies: list[float] = []
    return run_sequence(jobs, trace.machine, choose, backfill, latencies), latencies


def _trace(spec: RunSpec, row: dict[str, Any], log: JobLog) -> dict[str, Any]:
    """The plots' and the report's per-job data: the waits of the jobs the metrics window keeps (all, for the whole
    run), the [start, end, GPU share] of each run of a completed job (utilization over time: a preempted job
    waited between its runs) and the job table (:mod:`evaluation.jobs`: the Gantt charts, the exports)."""
    kept = window_records(log, spec.metrics_window)[0]
    jobs = job_table(log)
    return {
        "policy": row["policy"], "workload": row["workload"], "seed": spec.seed, "total_gpus": log.total_gpus,
        "wait_s": [r.wait_s for r in kept if r.state is JobState.COMPLETED],
        "intervals": [[start, end, share] for state, share, runs in zip(jobs["state"], jobs["gpu_share"], jobs["runs"],
                                                                         strict=True)
                      if state == "completed" for start, end in runs],
        "jobs": jobs,
    }
