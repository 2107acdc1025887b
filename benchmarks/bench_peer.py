"""Peer-engine speed: the RLScheduler protocol on Lublin (10 sequences of 1024 jobs) under the peer's five orders, one
process, per backfill mode; with ``--peer-repo``, the unmodified peer beside it in the same run.

    python benchmarks/bench_peer.py [--trace ../shared/traces/lublin-synthetic/lublin_256.swf] [--repeat 3]
                                    [--peer-repo PATH]

Prints one JSON object per mode: jobs scheduled (5 orders x 10 sequences x 1024), wall seconds (median of
``--repeat`` runs, trace reading excluded) and jobs/s; with ``--peer-repo`` (a checkout of DIR-LAB/deep-batch-scheduler)
also the peer's own wall seconds and jobs/s for the same protocol (its ``HPCEnv``: ``reset_for_test`` draws each
sequence from the env seeded with the peer's seed, then ``schedule_curr_sequence_reset`` runs each of the five
score functions on it) and the ratio. The peer module imports TensorFlow, SciPy and the old ``gym`` at its top without
using them in these calls: stand-ins are put in their place (``gym``'s seeding reproduces gym 0.12's).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import statistics
import sys
import time
import types
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from baselines.rls import rls_policy  # noqa: E402
from envs.core.cli import at_least  # noqa: E402
from envs.peer.engine import PEER_SEED, SEQUENCE_COUNT, SEQUENCE_LENGTH, evaluate_peer, gym_seed_words  # noqa: E402
from envs.peer.swf import load_swf_peer  # noqa: E402

ORDERS = ("fcfs", "sjf", "f1", "wfp3-peer", "unicep-peer")
PEER_SCORES = ("fcfs_score", "sjf_score", "f1_score", "wfp_score", "uni_score")
"""The peer's score functions for :data:`ORDERS`, in the same order."""
LUBLIN = ROOT.parent / "shared" / "traces" / "lublin-synthetic" / "lublin_256.swf"


def peer_module(repo: Path) -> Any:
    """The peer's ``HPCSimPickJobs`` module from a checkout, with stand-ins for the modules it imports unused."""
    import gymnasium

    gym = types.ModuleType("gym")
    gym.Env, gym.spaces = gymnasium.Env, gymnasium.spaces
    seeding = types.ModuleType("gym.utils.seeding")
    seeding.np_random = lambda seed=None: (np.random.RandomState(gym_seed_words(seed)), seed)
    utils = types.ModuleType("gym.utils")
    utils.seeding = seeding
    gym.utils = utils
    scipy, signal = types.ModuleType("scipy"), types.ModuleType("scipy.signal")
    scipy.signal = signal
    stand_ins = {"gym": gym, "gym.spaces": gymnasium.spaces, "gym.spaces.box": gymnasium.spaces,
                 "gym.utils": utils, "gym.utils.seeding": seeding, "tensorflow": types.ModuleType("tensorflow"),
                 "scipy": scipy, "scipy.signal": signal}
    for name, module in stand_ins.items():
        sys.modules.setdefault(name, module)
    sys.path.insert(0, str(repo))
    import HPCSimPickJobs  # the peer's module, from --peer-repo

    return HPCSimPickJobs


def peer_wall_s(module: Any, trace: Path, backfill: bool) -> float:
    """Wall seconds of the peer's own protocol: 10 sequences x 5 score functions (trace reading excluded)."""
    with contextlib.redirect_stdout(io.StringIO()):  # the peer prints what it loads
        env = module.HPCEnv(backfil=backfill, job_score_type=0)
        env.my_init(workload_file=str(trace))
        env.seed(PEER_SEED)
        t0 = time.perf_counter()
        for _ in range(SEQUENCE_COUNT):
            env.reset_for_test(SEQUENCE_LENGTH, 0)
            for score in PEER_SCORES:
                env.schedule_curr_sequence_reset(getattr(env, score))
        return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trace", type=Path, default=LUBLIN, help="SWF trace (default: lublin_256.swf)")
    parser.add_argument("--repeat", type=at_least(1), default=3, help="runs per mode; the median is reported")
    parser.add_argument("--peer-repo", type=Path, help="a checkout of DIR-LAB/deep-batch-scheduler to time beside")
    args = parser.parse_args(argv)
    if not args.trace.is_file():
        print(f"bench_peer.py: trace not found: {args.trace}", file=sys.stderr)
        return 2
    if args.peer_repo is not None and not (args.peer_repo / "HPCSimPickJobs.py").is_file():
        print(f"bench_peer.py: --peer-repo: no HPCSimPickJobs.py in {args.peer_repo}", file=sys.stderr)
        return 2
    module = peer_module(args.peer_repo) if args.peer_repo is not None else None
    trace = load_swf_peer(args.trace)
    jobs = len(ORDERS) * SEQUENCE_COUNT * SEQUENCE_LENGTH
    for backfill in (False, True):
        walls, peer_walls = [], []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            for order in ORDERS:
                evaluate_peer(trace, rls_policy(order)[0], backfill)
            walls.append(time.perf_counter() - t0)
            if module is not None:
                peer_walls.append(peer_wall_s(module, args.trace, backfill))
        wall = statistics.median(walls)
        row = {"mode": "rlsbackfill" if backfill else "no backfill", "jobs": jobs, "wall_s": round(wall, 3),
               "jobs_per_s": round(jobs / wall)}
        if peer_walls:
            peer = statistics.median(peer_walls)
            row |= {"peer_wall_s": round(peer, 3), "peer_jobs_per_s": round(jobs / peer),
                    "ratio": round(peer / wall, 1)}
        print(json.dumps(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
