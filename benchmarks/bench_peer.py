"""Peer-engine speed: the RLScheduler protocol on Lublin (10 sequences of 1024 jobs) under the peer's five orders, one
process, per backfill mode.

    python benchmarks/bench_peer.py [--trace ../shared/traces/lublin-synthetic/lublin_256.swf] [--repeat 3]

Prints one JSON object per mode: jobs scheduled (5 orders x 10 sequences x 1024), wall seconds (median of
``--repeat`` runs, trace reading excluded) and jobs/s. For scale, the peer itself (RLScheduler's SchedGym,
unmodified) ran the same protocol at about 5,500 jobs/s without backfilling and 46,000 jobs/s with its backfill on
this project's 2-core machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from baselines.rls import rls_policy  # noqa: E402
from envs.peer.engine import SEQUENCE_COUNT, SEQUENCE_LENGTH, evaluate_peer  # noqa: E402
from envs.peer.swf import load_swf_peer  # noqa: E402

ORDERS = ("fcfs", "sjf", "f1", "wfp3-peer", "unicep-peer")
LUBLIN = ROOT.parent / "shared" / "traces" / "lublin-synthetic" / "lublin_256.swf"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trace", type=Path, default=LUBLIN, help="SWF trace (default: lublin_256.swf)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per mode; the median is reported")
    args = parser.parse_args(argv)
    if not args.trace.is_file():
        print(f"bench_peer.py: trace not found: {args.trace}", file=sys.stderr)
        return 2
    trace = load_swf_peer(args.trace)
    jobs = len(ORDERS) * SEQUENCE_COUNT * SEQUENCE_LENGTH
    for backfill in (False, True):
        walls = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            for order in ORDERS:
                evaluate_peer(trace, rls_policy(order)[0], backfill)
            walls.append(time.perf_counter() - t0)
        wall = statistics.median(walls)
        print(json.dumps({"mode": "rlsbackfill" if backfill else "no backfill", "jobs": jobs,
                          "wall_s": round(wall, 3), "jobs_per_s": round(jobs / wall)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
