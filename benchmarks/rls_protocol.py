"""The RL batch-scheduling protocol on an SWF trace: the peer's ten heuristics beside our own orders and backfilling.

The ten sequences of 1024 jobs are drawn exactly as the peer's protocol draws them (``envs.peer_rls``). The peer
rows run on the peer-compatible engine; our rows run the same job windows on our simulator (the trace's machine,
rigid runtime model, first-fit) with our textbook orders and real EASY / conservative backfilling. Prints a
Markdown table of the mean (over the sequences) of the per-sequence average bounded slowdown.

    python benchmarks/rls_protocol.py [PATH.swf] [--orders fcfs,sjf,f1,wfp3,unicep]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from baselines import make
from envs import RuntimeConfig, simulate
from envs.cluster import swf_machine
from envs.metrics import summarize
from envs.peer_rls import evaluate_peer
from envs.workload import load_swf
from envs.workload.swf_peer import load_swf_peer

LUBLIN = Path(__file__).resolve().parents[2] / "shared" / "traces" / "lublin-synthetic" / "lublin_256.swf"
PEER_ORDERS = ("fcfs", "sjf", "f1", "wfp3-peer", "unicep-peer", "wfp3", "unicep")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trace", nargs="?", default=str(LUBLIN))
    parser.add_argument("--orders", default="fcfs,sjf,f1,wfp3,unicep", help="our orders to run")
    parser.add_argument("--length", type=int, default=1024)
    args = parser.parse_args()

    peer = load_swf_peer(args.trace)
    ours = load_swf(args.trace)
    machine = swf_machine(round(peer.machine.nodes * peer.machine.procs_per_node))
    rows: list[tuple[str, str, float]] = []
    starts = None
    for order in PEER_ORDERS:
        for backfill in (False, True):
            name = f"rls:{order}" + ("+rlsbackfill" if backfill else "")
            choose, _ = make(name)
            result = evaluate_peer(peer, choose, backfill, length=args.length)
            starts = result.start_indices
            rows.append((name, "peer engine", result.mean_avg_bsld))
    assert starts is not None
    for order in args.orders.split(","):
        for backfill in ("none", "easy", "conservative"):
            name = order + ("" if backfill == "none" else f"+{backfill}")
            t0 = time.perf_counter()
            values = [
                summarize(simulate(machine, ours.window(s, args.length, rebase=False), make(name),
                                   RuntimeConfig.rigid()))["mean_bsld"]
                for s in starts
            ]
            rows.append((name, f"our simulator ({time.perf_counter() - t0:.1f} s)", statistics.fmean(values)))
    print(f"{Path(args.trace).name}: {len(starts)} sequences of {args.length} jobs, starts {list(starts)}")
    print("\n| policy | engine | mean bounded slowdown |\n|---|---|---:|")
    for name, engine, value in rows:
        print(f"| {name} | {engine} | {value:,.2f} |")


if __name__ == "__main__":
    main()
