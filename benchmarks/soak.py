"""Soak test: many random scenarios driven by a random policy, every simulator invariant checked at the end of
each run (and, with ``--every-action``, after every action), violations counted.

    python benchmarks/soak.py [--scenarios 10000] [--seed 0] [--workers 2] [--every-action] [--dynamics]

A scenario is a random cluster (up to 64 nodes of mixed sizes), a random workload (up to 300 jobs, fractional
shares, datasets, priorities, checkpoints, every kind of need) and a random runtime model (every switch on or off,
``kill_at_walltime`` included), with ``--dynamics`` random failures, repairs, outages and preemptions, from one
seed (``seed + i`` for scenario i), so any scenario can be replayed alone; the generators and
the random driver are the property tests' own (``tests/strategies.py``, which needs the ``dev`` extra). Prints one
JSON object: scenarios, jobs, violations, the first few violating seeds with their first violation, and the wall
time [s].
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from strategies import any_dynamics, any_runtime, drive, large_cluster, large_workload  # noqa: E402


def scenario(seed: int, every_action: bool, dynamics: bool) -> tuple[int, int, list[str]]:
    """(seed, jobs, violations) of scenario ``seed``."""
    rng = random.Random(seed)
    cluster, jobs, runtime = large_cluster(rng), large_workload(rng), any_runtime(rng)
    changes = any_dynamics(rng, cluster) if dynamics else None
    _, found = drive(cluster, jobs, seed, runtime, check=every_action, dynamics=changes)
    return seed, len(jobs), found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenarios", type=int, default=1000, help="random scenarios to run (default 1000)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the first scenario (default 0)")
    parser.add_argument("--workers", type=int, default=2, help="parallel processes (default 2)")
    parser.add_argument("--every-action", action="store_true", help="check the state after every action too")
    parser.add_argument("--dynamics", action="store_true", help="random failures, outages and preemptions too")
    args = parser.parse_args(argv)
    if args.scenarios < 1 or args.workers < 1:
        parser.error("--scenarios and --workers must be >= 1")
    t0 = time.perf_counter()
    seeds = range(args.seed, args.seed + args.scenarios)
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        results = list(pool.map(scenario, seeds, [args.every_action] * len(seeds), [args.dynamics] * len(seeds),
                                chunksize=50))
    bad = [(seed, found) for seed, _, found in results if found]
    print(json.dumps({"scenarios": args.scenarios, "jobs": sum(n for _, n, _ in results),
                      "violations": sum(len(found) for _, found in bad), "violating_scenarios": len(bad),
                      "first": [{"seed": seed, "violation": found[0]} for seed, found in bad[:5]],
                      "every_action": args.every_action, "dynamics": args.dynamics,
                      "wall_s": round(time.perf_counter() - t0, 1)}))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
