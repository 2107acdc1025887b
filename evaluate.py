"""Evaluate scheduling policies side by side: suites of workloads × seeds × loads, tables, intervals and plots.

    python evaluate.py                                     # the default suite: main heuristics, synthetic default
    python evaluate.py --policies fifo,sjf+easy/pack --workload small --cluster tiny --seeds 0,1,2,3
    python evaluate.py --suite rlscheduler --workload swf:../shared/traces/lublin-synthetic/lublin_256.swf
    python evaluate.py --suite gpu --workers 2 --json
    python evaluate.py --scenario none,flaky --policies fcfs+easy,tiresias      # the same runs with failures
    python evaluate.py --metrics-window 0.1          # the steady state: first and last 10% of jobs left out

Workloads: a synthetic preset or YAML path, or a trace FORMAT:PATH (swf, philly, openb, tiresias, sacct, helios,
pods). Policy names: ORDER[+BACKFILL][/PLACEMENT] or rls:ORDER[/BY@FRACTION][+rlsbackfill] (``python -m baselines``
lists them), a model's RUN/model.zip, or rls:RUN/model.zip[+ORDER@RATIO] for a peer-mode model. Scenarios
(``--scenario``): names under configs/scenarios (none, low, high, outages, flaky) or YAML paths; each run draws its
failures and outages from its seed, so every policy of one seed meets the same ones. Every name, workload, cluster,
model file and the run folder are checked before the first run. The run folder (``--out``, default
``runs/eval-SUITE-TIME``) gets results.csv, timing.csv, summary.json, run.json, the plots and report.html (open it in
a browser; ``python -m evaluation.report RUN`` writes it again); each run's row is kept there as
it finishes (``runs.jsonl``), so an interrupted evaluation loses nothing and a rerun into the same folder only runs
what is missing, or whose input files or code changed.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shlex
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from envs.core.cli import ArgumentParser, at_least, run_cli
from envs.core.dynamics import NO_DYNAMICS
from envs.core.errors import ConfigError
from envs.core.files import folder_lock, new_folder, write_text_atomically
from envs.core.metrics import WHOLE_RUN, window_fractions
from envs.core.numbers import decimal, integer
from envs.peer.swf import peer_trace_once
from envs.scenario import load_trace_once, trace_spec
from envs.workload.table import LOAD_FACTORS
from evaluation.aggregate import DEFAULT_TABLE_KEYS, markdown_table
from evaluation.backends import BACKENDS, Result, execute
from evaluation.batsim import prepare_folder as prepare_batsim
from evaluation.batsim import write_batsim
from evaluation.labels import policy_labels
from evaluation.learning import (
    CANDIDATES,
    CASES,
    STEADY_STATE,
    case_names,
    planner_labels,
    planner_names,
    validation_ranking,
)
from evaluation.paired import paired_comparison, paired_table, stratified_iqm
from evaluation.provenance import run_inputs, run_provenance
from evaluation.records import RUNS_FILE, read_records
from evaluation.report import write_run_folder
from evaluation.runner import RunSpec, check, rejection_text
from evaluation.suites import SUITES, suite_specs

LEARNING_SUITE = "learning"


MAX_SEED = 2**63 - 1
"""The largest seed (numpy's generators take any integer >= 0; a run's seed is stored as a 64-bit integer)."""


def _ints(text: str) -> list[int]:
    values = [integer(x.strip()) for x in text.split(",") if x.strip()]
    if None in values or not all(0 <= v <= MAX_SEED for v in values):
        raise argparse.ArgumentTypeError(f"expected comma-separated integers in 0..2^63-1, got {text!r}")
    return values


def _floats(text: str) -> list[float]:
    values = [decimal(x.strip()) for x in text.split(",") if x.strip()]
    if None in values:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}")
    low, high = LOAD_FACTORS
    if not all(low <= v <= high for v in values):
        raise argparse.ArgumentTypeError(f"load factors must be in [{low:g}, {high:g}], got {text!r}")
    return values


def _window(text: str) -> tuple[float, float]:
    try:
        parts = [float(x) for x in text.split(",")]
        return window_fractions(parts[0] if len(parts) == 1 else parts)
    except (ValueError, ConfigError):
        raise argparse.ArgumentTypeError(f"expected a fraction F or HEAD,TAIL, each >= 0 and < 0.5, got {text!r}") \
            from None


def _names(text: str) -> list[str]:
    names = [x.strip() for x in text.split(",") if x.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"expected comma-separated names, got {text!r}")
    return names


def parse_args(argv: Sequence[str] | None) -> Any:
    parser = ArgumentParser(prog="evaluate.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", choices=(*SUITES, LEARNING_SUITE), default="default",
                        help="which suite (default: default); learning: evaluation/learning.py")
    parser.add_argument("--policies", help="comma-separated policy names (default: the suite's)")
    parser.add_argument("--workload", action="append", default=[], help="preset name, YAML or FORMAT:PATH "
                        "(swf, philly, openb, tiresias, sacct, helios, pods); repeat")
    parser.add_argument("--cluster", help="cluster preset, YAML, swf:N, or openb:, scontrol:, sinfo:, kubectl:PATH "
                        "(default: the workload's)")
    parser.add_argument("--seeds", type=_ints, default=[0, 1, 2], help="comma-separated seeds (default 0,1,2)")
    parser.add_argument("--load", type=_floats, default=[1.0], help="comma-separated load factors (default 1)")
    parser.add_argument("--scenario", type=_names, default=[NO_DYNAMICS],
                        help="comma-separated dynamics scenarios: failures and outages (default none)")
    parser.add_argument("--metrics-window", type=_window, default=WHOLE_RUN, metavar="F|HEAD,TAIL",
                        help="the steady state: leave the first and last fraction of the jobs (by submit time) out "
                        "of the metrics, and count GPU time between the first and last kept submit (default 0: the "
                        "whole run; envs/core/metrics.py)")
    parser.add_argument("--policy-config", help="YAML: orders' parameters, k8s weights, partitions and quotas "
                        "(baselines/config.py)")
    parser.add_argument("--train-seeds", type=_ints, default=[], help="what lookahead planners draw futures "
                        "from: training seeds of a synthetic workload (default 100000-100007), or first jobs of a "
                        "trace's training windows")
    parser.add_argument("--cases", type=_names, help="the learning suite's cases to run (default: all; "
                        f"{', '.join(case_names())})")
    parser.add_argument("--planners", type=_names, help="the learning suite's planner rows (default: all; "
                        f"{', '.join(planner_labels())}; none for no planner)")
    parser.add_argument("--starts", type=_ints, help="first job of each trace window: rlscheduler sequences "
                        "(default: the peer's), or windows of trace workloads in the default suite (i is seed i)")
    parser.add_argument("--length", type=at_least(1), default=1024, help="jobs per window of --starts (default 1024)")
    parser.add_argument("--workers", type=at_least(1), default=min(4, os.cpu_count() or 1),
                        help="parallel runs (default: the cores, at most 4; never more than the runs)")
    parser.add_argument("--backend", choices=BACKENDS, default="local", help="local processes or Ray tasks")
    parser.add_argument("--ray-address", help="address of an existing Ray cluster (backend ray)")
    parser.add_argument("--out", type=Path, help="run folder (default runs/eval-SUITE-TIME); the runs it already "
                        "holds are not run again")
    parser.add_argument("--export", choices=("batsim",), help="also write each run's jobs for other tools: batsim, "
                        "Batsim's _jobs.csv columns (evalys reads them) in RUN/batsim/ (evaluation/batsim.py)")
    parser.add_argument("--no-plots", action="store_true", help="skip the plots and report.html")
    parser.add_argument("--json", action="store_true", help="print the results as one JSON document and nothing "
                        "else: the summary entries (per policy and case: metrics and their 95%% intervals) under "
                        "results, beside run.json's fields")
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error instead of its line")
    args = parser.parse_args(argv)
    if args.ray_address and args.backend != "ray":
        parser.error("argument --ray-address: applies only with --backend ray")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    args.argv = argv
    return run_cli("evaluate.py", lambda: evaluate(args), args.debug)


def run_key(spec: RunSpec) -> list[Any]:
    """What identifies a run among the records of a run folder: its arguments (the metrics window too, so that a
    rerun with another ``--metrics-window`` computes its rows again), the digest of every file it names and the code
    version (:func:`evaluation.provenance.run_inputs`), so that an input edited at the same path, or newer code,
    runs again rather than reusing a stale row."""
    key = [spec.policy, spec.workload, spec.cluster, spec.seed, spec.load, list(spec.window or ()), spec.label]
    if spec.dynamics != NO_DYNAMICS:
        key.append(spec.dynamics)
    if spec.policy_config is not None:
        key.append({"policy_config": spec.policy_config})
    if spec.train:
        key.append({"train": list(spec.train)})
    if spec.windowed:
        key.append({"metrics_window": list(spec.metrics_window)})
    return [*key, {"inputs": run_inputs(spec)}]


def check_all(specs: Sequence[RunSpec]) -> None:
    """Resolve every distinct policy and every distinct world once, before anything runs (:func:`check`)."""
    policies: set[str] = set()
    worlds: set[tuple] = set()
    for spec in specs:
        world = (spec.peer, spec.workload, spec.cluster, spec.load, spec.window, spec.dynamics, spec.policy_config)
        check(spec, policy=spec.policy not in policies, world=world not in worlds)
        policies.add(spec.policy)
        worlds.add(world)


def prepare_out(out: Path) -> None:
    """Create the run folder and make sure files can be written in it, or raise naming it."""
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out}: exists and is not a folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=out, prefix=".write-test-"):
            pass
    except OSError as exc:
        raise ConfigError(f"--out {out}: cannot write there ({exc.strerror or exc})") from None


def run_all(specs: Sequence[RunSpec], out: Path, args: Any) -> list[Result]:
    """Every spec's (row, trace, timing), in spec order: the runs the run folder ``out`` already holds are read
    back, the others run (``args.workers``, ``args.backend``) and are kept in ``runs.jsonl`` as each finishes."""
    keys = [json.dumps(run_key(spec)) for spec in specs]
    records = read_records(out)
    todo = [i for i, key in enumerate(keys) if key not in records]
    if len(todo) < len(specs) and not args.json:
        print(f"evaluate.py: {len(specs) - len(todo)} of {len(specs)} runs are already in {out}", file=sys.stderr)

    with (out / RUNS_FILE).open("a") as log:
        def keep(j: int, result: Result) -> None:
            i = todo[j]
            records[keys[i]] = result
            row, trace, timing = result
            log.write(json.dumps({"key": run_key(specs[i]), "row": row, "trace": trace, "timing": timing}) + "\n")
            log.flush()

        if todo:
            execute([specs[i] for i in todo], args.workers, args.backend, args.ray_address,
                    progress=not args.json, on_result=keep)
    return [records[key] for key in keys]


def evaluate(args: Any) -> int:
    """The evaluation ``args`` ask for; the exit status."""
    if args.suite == LEARNING_SUITE:
        return evaluate_learning(args)
    specs = suite_specs(args.suite, args.policies.split(",") if args.policies else None, args.workload,
                        args.cluster, args.seeds, args.load, args.starts, args.length, args.scenario)
    if not specs:
        raise ConfigError("nothing to run (no seeds, loads or policies)")
    specs = [dataclasses.replace(spec, policy_config=args.policy_config, metrics_window=args.metrics_window,
                                 train=tuple(args.train_seeds)) for spec in specs]
    check_all(specs)
    out = run_folder(args.out, args.suite)
    with folder_lock(out, f"--out {out}"):
        return evaluate_specs(specs, out, args)


def run_folder(out: Path | None, suite: str) -> Path:
    """The run folder: ``out``, created if need be, or a new ``runs/eval-SUITE-TIME[-N]``; checked writable."""
    folder = out or new_folder(Path("runs") / f"eval-{suite}-{time.strftime('%Y%m%d-%H%M%S')}")
    prepare_out(folder)
    return folder


def warn_dropped(specs: Sequence[RunSpec], rows: Sequence[dict[str, Any]]) -> tuple[dict[str, dict[str, int]], bool]:
    """One warning line (standard error) for each trace whose loader skipped records, and one for the jobs the runs
    rejected at submission, by reason; (the skipped records by trace and reason, whether any job was rejected)."""
    found: dict[str, dict[str, int]] = {}
    for spec in {(s.workload, s.peer): s for s in specs}.values():
        trace = trace_spec(spec.workload)
        if trace is None:
            continue
        skipped = dict(peer_trace_once(str(Path(trace.path).resolve())).skipped if spec.peer
                       else load_trace_once(trace.path, trace.fmt).skipped)
        if skipped:
            found[trace.path] = skipped
            reasons = ", ".join(f"{k} {v:,}" for k, v in sorted(skipped.items(), key=lambda kv: -kv[1]))
            print(f"evaluate.py: warning: {trace.path}: {sum(skipped.values()):,} trace records skipped "
                  f"({reasons})", file=sys.stderr)
    rejected = [row for row in rows if row.get("n_rejected")]
    if rejected:
        total = {k: sum(row.get(k, 0) for row in rejected) for k in rejected[0] if k.startswith("rejected_")}
        print(f"evaluate.py: warning: {sum(r['n_rejected'] for r in rejected):,.0f} of "
              f"{sum(r['n_jobs'] for r in rows):,.0f} jobs were rejected at submission, in {len(rejected)} of "
              f"{len(rows)} runs ({rejection_text(total)}); the n_rejected and rejected_* columns of results.csv "
              "count them", file=sys.stderr)
    return found, bool(rejected)


def evaluate_specs(specs: Sequence[RunSpec], out: Path, args: Any) -> int:
    """Run ``specs`` into the run folder ``out`` (held by this process), write its tables and print them."""
    if args.export == "batsim":
        prepare_batsim(out / "batsim")  # before the runs: a folder it cannot write fails now, not after them
    results = run_all(specs, out, args)
    rows = [row for row, _, _ in results]
    skipped, any_rejected = warn_dropped(specs, rows)
    traces = [trace for _, trace, _ in results]
    timings = [{"policy": row["policy"], "workload": row["workload"], "seed": row["seed"], **timing}
               for row, _, timing in results]
    command = shlex.join(["python", "evaluate.py", *args.argv])
    provenance = run_provenance(specs, command, [json.dumps(run_key(spec)) for spec in specs])
    summary, figures = write_run_folder(out, rows, traces, timings, not args.no_plots, args.metrics_window, skipped,
                                        provenance)
    if args.export == "batsim":
        exported, left_out = write_batsim(out / "batsim", traces)
        print(f"evaluate.py: wrote {len(exported)} Batsim _jobs.csv files in {out / 'batsim'}"
              + (f" ({left_out:,} rejected jobs left out: they never ran)" if left_out else ""), file=sys.stderr)
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    labels = policy_labels([entry["policy"] for entry in summary["results"]])
    print(markdown_table([{**entry, "policy": labels[entry["policy"]]} for entry in summary["results"]],
                         (*DEFAULT_TABLE_KEYS, "n_rejected") if any_rejected else DEFAULT_TABLE_KEYS))
    models = [f"{label} = {name}" for name, label in labels.items() if label != name]
    if models:
        print(f"\nmodels: {'; '.join(models)}")
    if args.metrics_window != WHOLE_RUN:
        head, tail = args.metrics_window
        print(f"\nsteady state (--metrics-window): the first {head * 100:g}% and the last {tail * 100:g}% of the "
              "jobs by submit time left out; GPU time counted between the first and the last kept submit")
    latency = ", ".join(f"{labels.get(p, p)} {v['p50']:.0f}/{v['p99']:.0f}"
                        for p, v in summary["decision_latency_us"].items())
    print(f"\ndecision latency p50/p99 [µs]: {latency}")
    print(f"run folder: {out} (results.csv, timing.csv, summary.json, run.json, {RUNS_FILE}{', ' if figures else ''}"
          f"{', '.join(f.name for f in figures)})")
    return 0


def evaluate_learning(args: Any) -> int:
    """The learning suite (:mod:`evaluation.learning`): the reference chosen on validation seeds and named, then
    the test seeds: candidates, planners and the hindsight bound, compared with the reference seed by seed."""
    if args.policy_config or args.scenario != [NO_DYNAMICS] or args.train_seeds or args.workload:
        raise ConfigError("--suite learning: its cases fix workloads, seeds and training ranges; give --cases, "
                          "--policies (the candidates), --planners, --workers, --out")
    known = {case.name: case for case in CASES}
    unknown = [name for name in args.cases or () if name not in known]
    if unknown:
        raise ConfigError(f"--cases: unknown {', '.join(unknown)} (known: {', '.join(known)})")
    cases = [known[name] for name in args.cases] if args.cases else list(CASES)
    candidates = args.policies.split(",") if args.policies else list(CANDIDATES)
    labels = planner_labels() if args.planners is None else [p for p in args.planners if p != "none"]
    bad = [p for p in labels if p not in planner_labels()]
    if bad:
        raise ConfigError(f"--planners: unknown {', '.join(bad)} (known: {', '.join(planner_labels())}, none)")
    validation = [case.spec(p, seed) for case in cases for seed in case.validation for p in candidates]
    check_all(validation)
    out = run_folder(args.out, LEARNING_SUITE)
    with folder_lock(out, f"--out {out}"):
        return learning_runs(cases, candidates, labels, validation, out, args)


def learning_runs(cases: Sequence[Any], candidates: list[str], labels: list[str], validation: list[RunSpec],
                  out: Path, args: Any) -> int:
    """The learning suite's runs into the run folder ``out`` (held by this process): validation, the reference of
    each case, the test seeds, and the paired tables."""
    validated = run_all(validation, out, args)
    validation_rows = [row for row, _, _ in validated]
    rankings = validation_ranking(validation_rows, cases, candidates)
    for case in cases:
        best = rankings[case.name][0]
        best_mean = sum(r["mean_wait_s"] for r in validation_rows if (r["workload"], r["policy"]) == (case.name, best))
        print(f"reference for {case.name}: {best} (mean wait {best_mean / len(case.validation):,.1f} s over "
              f"{len(case.validation)} validation seeds)", flush=True)
    planners = {case.name: {label: name for label, name in planner_names(case, rankings[case.name]).items()
                            if label in labels} for case in cases}
    test = [case.spec(p, seed) for case in cases for p in planners[case.name].values() for seed in case.test]
    test += [case.spec(p, seed) for case in cases for seed in case.test for p in candidates]
    check_all(test)
    results = run_all(test, out, args)
    label_of = {(case.name, name): label for case in cases for label, name in planners[case.name].items()}
    rows = [{**row, "policy": label_of.get((row["workload"], row["policy"]), row["policy"])}
            for row, _, _ in results]
    entries = [entry for case in cases for entry in paired_comparison(
        [r for r in rows if r["workload"] == case.name], rankings[case.name][0])]
    as_reference = [{**r, "policy": "reference"} for r in rows
                    if r["policy"] == rankings[r["workload"]][0]]
    iqm = stratified_iqm(rows + as_reference, "reference") if len(cases) > 1 else {}
    wall = {f"{case.name} {label}": sum(t["sim_wall_s"] for row, _, t in results if (row["workload"], row["policy"])
                                        == (case.name, name)) / len(case.test)
            for case in cases for label, name in planners[case.name].items()}
    summary = {"references": {name: ranking[0] for name, ranking in rankings.items()},
               "validation_ranking": rankings, "planners": planners, "paired": entries,
               "stratified_iqm": {p: {"iqm": v[0], "ci95": v[1], "n": v[2]} for p, v in iqm.items()},
               "planner_wall_s_per_episode": wall, "metrics_window": list(STEADY_STATE),
               "validation_wall_s": sum(timing["sim_wall_s"] for _, _, timing in validated)}
    write_text_atomically(out / "learning.json", json.dumps(summary, indent=2))
    timings = [{"policy": row["policy"], "workload": row["workload"], "seed": row["seed"], **timing}
               for row, (_, _, timing) in zip(rows, results, strict=True)]
    provenance = run_provenance([*validation, *test], shlex.join(["python", "evaluate.py", *args.argv]),
                                [json.dumps(run_key(spec)) for spec in test])
    write_run_folder(out, rows, [trace for _, trace, _ in results], timings, False, STEADY_STATE,
                     provenance=provenance)
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    print(paired_table(entries))
    for case, case_planners in planners.items():
        for label, name in case_planners.items():
            print(f"{case} {label}: {name} ({wall[f'{case} {label}']:,.0f} s per episode)")
    print(f"run folder: {out} (learning.json, results.csv, summary.json, {RUNS_FILE})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
