"""How good the lookahead teacher of imitation is: one step of rollout over a base order on the peer's test windows.

    python benchmarks/rollout_teacher.py [--trace T] [--backfill] [--candidates 3] [--horizon 64 ...] [--workers 2]

For each horizon (later arrivals the rollouts see; the teacher is clairvoyant, so this bounds what imitating it
can teach, it is not an agent's score) it drives the peer's 10 test sequences of 1024 jobs with
:class:`agents.rollout_teacher.RolloutTeacher` (every queued job visible) and prints the mean of the average
bounded slowdowns beside the base order's, with the time taken.
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agents.rollout_teacher import RolloutTeacher  # noqa: E402
from baselines.rls import rls_policy  # noqa: E402
from envs.peer_env import PeerSchedEnv  # noqa: E402
from envs.peer_rls import SEQUENCE_LENGTH, evaluate_peer, peer_start_indices  # noqa: E402

LUBLIN = ROOT.parent / "shared" / "traces" / "lublin-synthetic" / "lublin_256.swf"


def drive(trace: str, backfill: bool, base: str, candidates: int, horizon: int, start: int) -> float:
    """The teacher's average bounded slowdown on the test sequence that starts at job ``start``."""
    env = PeerSchedEnv(trace=trace, backfill=backfill, slots=1 << 16)
    teacher = RolloutTeacher(base, candidates, horizon)
    env.reset(options={"start": start, "length": SEQUENCE_LENGTH})
    while env.result is None:
        env.step(teacher(env))
    return env.result.avg_bsld


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trace", type=Path, default=LUBLIN, help="SWF trace (default: lublin_256)")
    parser.add_argument("--backfill", action="store_true", help="the peer's backfill")
    parser.add_argument("--base", default="sjf", help="base rls: order of the rollouts (default sjf)")
    parser.add_argument("--candidates", type=int, default=3, help="first jobs by SJF and by F1 tried (default 3)")
    parser.add_argument("--horizon", type=int, nargs="+", default=[8, 64, 1024], help="later arrivals seen")
    parser.add_argument("--workers", type=int, default=2, help="parallel processes (default 2)")
    args = parser.parse_args(argv)
    trace = str(args.trace.resolve())
    env = PeerSchedEnv(trace=trace)
    starts = peer_start_indices(len(env.trace.jobs))
    base = evaluate_peer(env.trace, rls_policy(args.base)[0], args.backfill).mean_avg_bsld
    print(f"| horizon | teacher | {args.base} | seconds |\n|---:|---:|---:|---:|")
    with ProcessPoolExecutor(args.workers) as pool:
        for horizon in args.horizon:
            t0 = time.perf_counter()
            scores = list(pool.map(drive, *zip(*[(trace, args.backfill, args.base, args.candidates, horizon, s)
                                                 for s in starts], strict=True)))
            print(f"| {horizon} | {np.mean(scores):.2f} | {base:.2f} | {time.perf_counter() - t0:.0f} |")


if __name__ == "__main__":
    main()
