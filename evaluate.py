"""Replay a workload on a cluster under a scheduling policy and print its metrics (SPEC §7).

With no arguments: the embedded default (the synthetic ``default`` workload on the 512-GPU ``hetero-64`` cluster)
under the minimal policy (FIFO + first-fit, no backfilling). The full harness (many policies, suites, plots,
confidence intervals) replaces this front-end when it lands.

    python evaluate.py
    python evaluate.py --workload small --cluster tiny --seed 3 --policy sjf+easy/pack
    python evaluate.py --workload swf:../shared/traces/lublin-synthetic/lublin_256.swf
    python evaluate.py --json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence

import numpy as np

from baselines import make
from envs import ClusterSpec, RuntimeConfig, View, load_cluster, simulate
from envs.cluster import swf_machine
from envs.metrics import METRIC_DOCS, summarize
from envs.policy import Action, Policy
from envs.workload import TRACE_FORMATS, Workload, load_trace
from envs.workload.synthetic import generate, load_workload_config


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


def load_workload(spec: str, cluster: ClusterSpec | None, seed: int) -> tuple[Workload, ClusterSpec, RuntimeConfig]:
    """The workload, the cluster to run it on and the runtime model, from the command line's words."""
    fmt, _, path = spec.partition(":")
    if fmt in TRACE_FORMATS and path:
        workload = load_trace(path, fmt)
        if cluster is None:
            if fmt != "swf" or not workload.machine_gpus:
                raise SystemExit(f"evaluate.py: give --cluster for the {fmt} trace {path}")
            cluster = swf_machine(workload.machine_gpus)
        return workload, cluster, RuntimeConfig.rigid() if fmt == "swf" else RuntimeConfig()
    cluster = cluster or load_cluster("hetero-64")
    return generate(load_workload_config(spec), seed=seed, capacity_gpus=cluster.n_gpus), cluster, RuntimeConfig()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", default="default",
                        help="synthetic preset name or YAML path, or FORMAT:PATH with FORMAT in "
                             f"{', '.join(TRACE_FORMATS)} (default: default)")
    parser.add_argument("--cluster", default=None,
                        help="cluster preset name, YAML path, swf:N or openb:NODE_LIST.csv (default: hetero-64; "
                             "an SWF trace defaults to its own machine)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the synthetic generator (default: 0)")
    parser.add_argument("--policy", default="fifo",
                        help="ORDER[+BACKFILL][/PLACEMENT], e.g. sjf+easy/topology (python -m baselines lists them)")
    parser.add_argument("--json", action="store_true", help="print the metrics as one JSON object, nothing else")
    args = parser.parse_args(argv)

    cluster = load_cluster(args.cluster) if args.cluster else None
    workload, cluster, runtime = load_workload(args.workload, cluster, args.seed)
    policy = TimedPolicy(make(args.policy))
    t0 = time.perf_counter()
    metrics = summarize(simulate(cluster, workload, policy, runtime))
    wall_s = time.perf_counter() - t0
    latency_us = np.percentile(policy.latencies_s, [50, 99]) * 1e6 if policy.latencies_s else [0.0, 0.0]
    report = {"workload": workload.name, "cluster": cluster.name, "policy": policy.name, "metrics": metrics,
              "decision_latency_us": {"p50": float(latency_us[0]), "p99": float(latency_us[1])},
              "simulated_jobs_per_s": len(workload) / wall_s}
    if args.json:
        json.dump(report, sys.stdout, indent=2)
        print()
        return 0
    print(f"workload {workload.name}: {len(workload)} jobs; cluster {cluster.describe()}; policy {policy.name}")
    print("\n| metric | value | meaning |\n|---|---:|---|")
    for key, value in metrics.items():
        print(f"| {key} | {value:,.4g} | {METRIC_DOCS[key]} |")
    print(f"\ndecision latency p50 {latency_us[0]:.1f} µs, p99 {latency_us[1]:.1f} µs; "
          f"{report['simulated_jobs_per_s']:,.0f} simulated jobs/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
