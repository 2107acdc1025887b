"""Check (or, deliberately, rewrite) the schedule digests of ``tests/data/golden/schedule_digests.json``: every
heuristic family that a speed-up touches, on 20 seeded runs, must make the same schedule to the last bit.

    python benchmarks/schedule_digests.py            # compare with the file: prints the runs that differ
    python benchmarks/schedule_digests.py --write    # rewrite it (only when a schedule is meant to change)

The file names its runs and policies, so the test and this script read them from it (a few seconds on 2 cores).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from envs.core.files import write_text_atomically  # noqa: E402
from evaluation.digests import digests  # noqa: E402

GOLDEN = ROOT / "tests" / "data" / "golden" / "schedule_digests.json"
POLICIES = ("slurm", "fcfs+easy", "sjf+conservative", "k8s:leastallocated", "priority+easy/pack+preempt", "fifo",
            "sjf", "k8s:mostallocated+preempt")
"""The families issue 32 makes faster: slurmctld's scheduler, EASY and conservative backfilling, kube-scheduler's
scored placement and its preemption, priority preemption, and orders without backfilling (FIFO, the simulator
benchmark's policy, and SJF)."""
CLUSTERS = ("tiny", "hetero-64", "tiny-governed", "mig-a100")
RUNS = [{"workload": "small", "cluster": CLUSTERS[seed % len(CLUSTERS)], "seed": seed, "jobs": 60}
        for seed in range(20)]
"""20 runs: the first 60 jobs of the ``small`` workload of seeds 0-19, on four clusters in turn (partitions and
quotas on tiny-governed, MIG on mig-a100)."""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="rewrite the file with this code's schedules")
    args = parser.parse_args()
    if args.write:
        data = {"runs": RUNS, "digests": digests(POLICIES, RUNS)}
        write_text_atomically(GOLDEN, json.dumps(data, indent=1) + "\n")
        print(f"wrote {GOLDEN}: {len(POLICIES)} policies x {len(RUNS)} runs")
        return 0
    data = json.loads(GOLDEN.read_text())
    now = digests(data["digests"], data["runs"])
    changed = [(policy, run) for policy, old in data["digests"].items()
               for run, (a, b) in zip(data["runs"], zip(old, now[policy], strict=True), strict=True) if a != b]
    for policy, run in changed:
        print(f"{policy}: schedule changed on {run}")
    print(f"{len(changed)} of {sum(len(v) for v in now.values())} schedules changed")
    return 1 if changed else 0


if __name__ == "__main__":
    raise SystemExit(main())
