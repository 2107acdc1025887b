"""Evaluate scheduling policies side by side: suites of workloads × seeds × loads, tables, intervals and plots.

    python evaluate.py                                     # the default suite: main heuristics, synthetic default
    python evaluate.py --policies fifo,sjf+easy/pack --workload small --cluster tiny --seeds 0,1,2,3
    python evaluate.py --suite rlscheduler --workload swf:../shared/traces/lublin-synthetic/lublin_256.swf
    python evaluate.py --suite gpu --workers 2 --json

Workloads: a synthetic preset name or YAML path, or a trace as FORMAT:PATH (swf, philly, openb, tiresias). Policy
names: ORDER[+BACKFILL][/PLACEMENT] or rls:ORDER[/BY@FRACTION][+rlsbackfill] (``python -m baselines`` lists them),
a model's RUN/model.zip, or rls:RUN/model.zip[+ORDER@RATIO] for a peer-mode model. The run folder (``--out``,
default ``runs/eval-SUITE-TIME``) gets results.csv, timing.csv, summary.json and the plots.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from envs.core import ConfigError
from evaluation.aggregate import markdown_table
from evaluation.backends import BACKENDS, execute
from evaluation.report import write_run_folder
from evaluation.suites import SUITES, suite_specs


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def _floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", choices=SUITES, default="default", help="which suite (default: default)")
    parser.add_argument("--policies", help="comma-separated policy names (default: the suite's)")
    parser.add_argument("--workload", action="append", default=[], help="preset name, YAML or FORMAT:PATH; repeat")
    parser.add_argument("--cluster", help="cluster preset, YAML, swf:N or openb:PATH (default: the workload's)")
    parser.add_argument("--seeds", type=_ints, default=[0, 1, 2], help="comma-separated seeds (default 0,1,2)")
    parser.add_argument("--load", type=_floats, default=[1.0], help="comma-separated load factors (default 1)")
    parser.add_argument("--starts", type=_ints, help="first job of each trace window: rlscheduler sequences "
                        "(default: the peer's), or windows of trace workloads in the default suite (i is seed i)")
    parser.add_argument("--length", type=int, default=1024, help="jobs per window of --starts (default 1024)")
    parser.add_argument("--workers", type=int, default=min(4, os.cpu_count() or 1),
                        help="parallel runs (default: the cores, at most 4)")
    parser.add_argument("--backend", choices=BACKENDS, default="local", help="local processes or Ray tasks")
    parser.add_argument("--ray-address", help="address of an existing Ray cluster (backend ray)")
    parser.add_argument("--out", type=Path, help="run folder (default runs/eval-SUITE-TIME)")
    parser.add_argument("--no-plots", action="store_true", help="skip the plots")
    parser.add_argument("--json", action="store_true", help="print summary.json to stdout and nothing else")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        specs = suite_specs(args.suite, args.policies.split(",") if args.policies else None, args.workload,
                            args.cluster, args.seeds, args.load, args.starts, args.length)
        results = execute(specs, args.workers, args.backend, args.ray_address, progress=not args.json)
    except ConfigError as exc:
        print(f"evaluate.py: {exc}", file=sys.stderr)
        return 2
    if not results:
        print("evaluate.py: nothing to run (no seeds, loads or policies)", file=sys.stderr)
        return 2
    rows = [row for row, _, _ in results]
    traces = [trace for _, trace, _ in results]
    timings = [{"policy": row["policy"], "workload": row["workload"], "seed": row["seed"], **timing}
               for row, _, timing in results]
    out = args.out or Path("runs") / f"eval-{args.suite}-{time.strftime('%Y%m%d-%H%M%S')}"
    plots = not args.no_plots
    try:
        summary, figures = write_run_folder(out, rows, traces, timings, plots)
    except ImportError as exc:  # matplotlib missing: keep the tables, say how to get the plots
        print(f"evaluate.py: no plots: {exc}", file=sys.stderr)
        summary, figures = write_run_folder(out, rows, traces, timings, plots=False)
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    print(markdown_table(summary["results"]))
    latency = ", ".join(f"{p} {v['p50']:.0f}/{v['p99']:.0f}" for p, v in summary["decision_latency_us"].items())
    print(f"\ndecision latency p50/p99 [µs]: {latency}")
    print(f"run folder: {out} (results.csv, timing.csv, summary.json{', ' if figures else ''}"
          f"{', '.join(f.name for f in figures)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
