"""Simulator throughput and memory: simulated jobs per second and peak memory under FIFO + first-fit.

Cases (each runs in a fresh process so that its peak memory is its own):

- ``llnl``: LLNL-Atlas (``../shared/traces/pwa-llnl-atlas``), every valid job, on its 9,216-processor machine
  (``swf:9216``, rigid runtime model). Target: >= 20,000 jobs/s on one core.
- ``synthetic100k``: the default synthetic generator scaled to 100,000 jobs at load 0.85 on a 10,000-GPU cluster
  (1,250 nodes × 8 GPUs of three types in 40 racks), full runtime model (speed, topology, staging).

Prints one JSON object per case: jobs, wall seconds of the simulation alone (load excluded), jobs/s (median of
``--repeat`` runs) and peak resident memory [MiB].

    python benchmarks/bench_simulator.py [--case llnl|synthetic100k|all] [--repeat 3]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from baselines import FifoFirstFit
from envs.core import ClusterSpec, RuntimeConfig
from envs.core.presets import cluster_from_dict
from envs.scenario import scenario
from envs.sim import simulate
from envs.workload import Workload
from envs.workload.synthetic import generate, load_workload_config

TRACES = Path(__file__).resolve().parents[2] / "shared" / "traces"
LLNL = TRACES / "pwa-llnl-atlas" / "LLNL-Atlas-2006-2.1-cln.swf.gz"


def big_cluster() -> ClusterSpec:
    """10,000 GPUs: 1,250 nodes of 8 GPUs (V100 with two islands, A100 and H100 with one), 40 racks."""
    groups = [
        {"name": "v100", "count": 500, "gpu_type": "V100", "gpus": 8, "island_size": 4, "cpus": 48,
         "ram_gib": 384, "racks": list(range(16)), "cache_gib": 500},
        {"name": "a100", "count": 500, "gpu_type": "A100-80GB", "gpus": 8, "cpus": 128, "ram_gib": 1024,
         "racks": list(range(16, 32)), "cache_gib": 2000},
        {"name": "h100", "count": 250, "gpu_type": "H100", "gpus": 8, "cpus": 128, "ram_gib": 2048,
         "racks": list(range(32, 40)), "cache_gib": 2000},
    ]
    return cluster_from_dict({"name": "big-10k", "node_groups": groups})


def case_inputs(case: str) -> tuple[ClusterSpec, Workload, RuntimeConfig]:
    if case == "llnl":
        if not LLNL.exists():
            raise SystemExit(f"LLNL trace not found at {LLNL}")
        world = scenario(f"swf:{LLNL}")  # the trace's own machine, rigid runtime model
        return world.cluster, world.workload, world.runtime
    cluster = big_cluster()
    config = dataclasses.replace(load_workload_config("default"), n_jobs=100_000)
    return cluster, generate(config, seed=0, capacity_gpus=cluster.n_gpus), RuntimeConfig()


def run_case(case: str, repeat: int) -> dict[str, object]:
    cluster, workload, runtime = case_inputs(case)
    walls = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        log = simulate(cluster, workload, FifoFirstFit(), runtime)
        walls.append(time.perf_counter() - t0)
    wall = statistics.median(walls)
    return {
        "case": case, "cluster": cluster.describe(), "jobs": len(workload), "completed": len(log.completed()),
        "sim_wall_s": round(wall, 3), "jobs_per_s": round(len(workload) / wall),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", choices=["llnl", "synthetic100k", "all"], default="all")
    parser.add_argument("--repeat", type=int, default=3, help="simulation runs per case; the median is reported")
    parser.add_argument("--in-process", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case != "all" and args.in_process:
        print(json.dumps(run_case(args.case, args.repeat)))
        return 0
    cases = ["llnl", "synthetic100k"] if args.case == "all" else [args.case]
    for case in cases:
        done = subprocess.run([sys.executable, __file__, "--case", case, "--repeat", str(args.repeat),
                               "--in-process"], check=False)
        if done.returncode:
            return done.returncode
    return 0


if __name__ == "__main__":
    sys.exit(main())
