"""Named suites: which policies run on which workloads, seeds and loads.

- ``default``: the embedded synthetic workload on hetero-64, 3 seeds, the main heuristics; a trace workload
  (``FORMAT:PATH``) with ``--starts`` runs its windows of ``--length`` jobs instead (window i is "seed" i).
- ``gpu``: windows of the Philly trace on ``philly-like`` and of the Alibaba openb trace on its own nodes, with
  placement rules (trace paths from ``--workload``, else ``../shared/traces`` when present); arrivals are
  compressed by :data:`GPU_LOADS` (``--load`` multiplies it).
- ``rlscheduler``: the RL batch-scheduling protocol on an SWF trace: 10 sequences of 1024 jobs drawn as the peer
  draws them (or ``--starts``/``--length``); the peer's five orders with and without its backfill on the peer
  engine, beside our orders with EASY and conservative backfilling on our simulator. Sequence i is "seed" i.

Every suite runs under each dynamics scenario asked for (``--scenario none,low``): the same runs, with the
scenario's failures and outages drawn from each run's seed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

from envs.core import ConfigError
from envs.core.dynamics import NO_DYNAMICS
from envs.peer.engine import peer_start_indices
from envs.peer.swf import peer_trace_once
from envs.scenario import trace_spec
from evaluation.runner import RunSpec

SUITES = ("default", "gpu", "rlscheduler")
MAIN_HEURISTICS = ("fifo", "sjf", "fcfs+easy", "sjf+easy/pack", "fairshare+easy/topology", "multifactor+easy/pack",
                   "slurm")
GPU_HEURISTICS = ("fifo/pack", "fcfs+easy/pack", "sjf+easy/topology", "fairshare+easy/pack")
PEER_ORDERS = ("fcfs", "sjf", "f1", "wfp3-peer", "unicep-peer")
OUR_ORDERS = ("fcfs", "sjf", "f1", "wfp3", "unicep")
SHARED_TRACES = Path(__file__).resolve().parents[2] / "shared" / "traces"
GPU_TRACES = {"philly": SHARED_TRACES / "philly-rfold" / "philly_trace.csv.gz",
              "openb": SHARED_TRACES / "alibaba-openb-gpu-v2023" / "openb_pod_list_default.csv"}
GPU_WINDOWS = {"philly": (100_000, 2_000), "openb": (4_000, 2_000)}  # (first job, jobs): busy stretches of each
GPU_LOADS = {"philly": 30.0, "openb": 1.0}
"""Arrival compression per trace in the gpu suite. A 2,000-job window of Philly barely queues on 2,400 GPUs at its
own pace (its long jobs dominate the GPU-seconds, not the contention); ×30 makes it queue (mean wait about 3 min
under fcfs+easy/pack). openb's pods are small and mostly fractional: they do not queue on its 6,212 GPUs at any
compression tried (up to ×5,000), so that part of the suite compares placement and fragmentation, not waits."""


def suite_specs(suite: str, policies: Sequence[str] | None = None, workloads: Sequence[str] = (),
                cluster: str | None = None, seeds: Sequence[int] = (0, 1, 2), loads: Sequence[float] = (1.0,),
                starts: Sequence[int] | None = None, length: int = 1024,
                dynamics: Sequence[str] = (NO_DYNAMICS,)) -> list[RunSpec]:
    """The runs of ``suite`` under each of the ``dynamics`` scenarios (failures, outages); arguments override its
    defaults."""
    specs = _suite_specs(suite, policies, workloads, cluster, seeds, loads, starts, length)
    return [dataclasses.replace(spec, dynamics=d) for d in dynamics for spec in specs]


def _suite_specs(suite: str, policies: Sequence[str] | None, workloads: Sequence[str], cluster: str | None,
                 seeds: Sequence[int], loads: Sequence[float], starts: Sequence[int] | None,
                 length: int) -> list[RunSpec]:
    if suite == "default":
        specs = []
        for w in workloads or ("default",):
            trace = trace_spec(w) is not None
            runs = list(enumerate((s, length) for s in starts)) if starts and trace else [(s, None) for s in seeds]
            specs += [RunSpec(p, w, cluster, seed, load, window) for load in loads for seed, window in runs
                      for p in (policies or MAIN_HEURISTICS)]
        return specs
    if suite == "gpu":
        return _gpu(policies or GPU_HEURISTICS, workloads, cluster, loads)
    if suite == "rlscheduler":
        return _rlscheduler(policies, workloads, starts, length)
    raise ConfigError(f"suite {suite!r}: unknown (known: {', '.join(SUITES)})")


def _gpu(policies: Sequence[str], workloads: Sequence[str], cluster: str | None,
         loads: Sequence[float]) -> list[RunSpec]:
    traces = list(workloads) or [f"{fmt}:{path}" for fmt, path in GPU_TRACES.items() if path.exists()]
    if not traces:
        raise ConfigError("suite gpu: give --workload philly:PATH and/or openb:PATH (no shared traces found)")
    specs = []
    for trace in traces:
        spec = trace_spec(trace)
        if spec is None or spec.fmt not in GPU_WINDOWS:
            raise ConfigError(f"suite gpu: {trace!r} is not a philly: or openb: trace")
        fmt = spec.fmt
        specs += [RunSpec(p, trace, cluster, 0, GPU_LOADS[fmt] * load, GPU_WINDOWS[fmt])  # None: natural cluster
                  for load in loads for p in policies]
    return specs


def _rlscheduler(policies: Sequence[str] | None, workloads: Sequence[str], starts: Sequence[int] | None,
                 length: int) -> list[RunSpec]:
    spec = trace_spec(workloads[0]) if len(workloads) == 1 else None
    if spec is None or spec.fmt != "swf":
        raise ConfigError("suite rlscheduler: give exactly one --workload swf:PATH")
    trace = workloads[0]
    if starts is None:
        starts = peer_start_indices(len(peer_trace_once(str(Path(spec.path).resolve())).jobs), length=length)
    if policies is None:
        policies = [f"rls:{o}{b}" for o in PEER_ORDERS for b in ("", "+rlsbackfill")]
        policies += [f"{o}+{b}" for o in OUR_ORDERS for b in ("easy", "conservative")]
    label = f"{spec.name}[{len(starts)}x{length}]"
    return [RunSpec(p, trace, None, i, 1.0, (start, length), label) for p in policies
            for i, start in enumerate(starts)]
