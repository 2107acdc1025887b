"""Regenerate the headroom study: the learning suite (evaluation/learning.py) on its test seeds, with the reference
chosen on validation, two lookahead planners and the hindsight bound, as docs/results/DATE-headroom.md.

    python docs/results/headroom.py [--out runs/headroom] [--cases CASE,...] [--date YYYY-MM-DD] [--workers 2]

Runs ``evaluate.py --suite learning`` into ``--out`` one case at a time: each case is a piece that resumes after
a kill (the run folder keeps every finished run). ``--cases whole-gpu@1.0`` runs that piece only and writes no
page; without ``--cases`` every case runs (what the folder holds is only read back) and the page is written.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import os
import platform
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from envs.core.files import write_text_atomically  # noqa: E402
from evaluation.aggregate import format_interval, format_number  # noqa: E402
from evaluation.learning import CASES, PLANNER_SETTINGS, STEADY_STATE  # noqa: E402
from evaluation.paired import paired_comparison  # noqa: E402

GOAL_RATIO = 0.9
"""The planner's goal: the upper end of its paired interval below 0.9 of the reference's mean wait."""
ABLATION_CASE = "whole-gpu@1.5"
"""The case of the information ablation: lookahead-A again, keeping the true arrivals, runtimes, or both."""
KNOW = ("runtimes", "arrivals", "arrivals+runtimes")


def machine() -> str:
    """Cores and CPU model of this machine."""
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), "unknown CPU") if Path("/proc/cpuinfo").exists() else "?"
    return f"{os.cpu_count()} cores, {model}, Python {platform.python_version()}"


def run_cases(out: Path, cases: list[str], workers: int, final: bool) -> None:
    """Run the learning suite's ``cases`` one by one into ``out``; ``final``: then once over every case, which
    writes learning.json, results.csv and timing.csv for all of them."""
    for case in cases:
        subprocess.run([sys.executable, str(ROOT / "evaluate.py"), "--suite", "learning", "--cases", case,
                        "--out", str(out), "--workers", str(workers)], cwd=ROOT, check=True)
    if final:
        subprocess.run([sys.executable, str(ROOT / "evaluate.py"), "--suite", "learning", "--out", str(out),
                        "--workers", str(workers), "--json"], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)


def ablation(out: Path, learning: dict, workers: int) -> list[dict]:
    """Lookahead-A of :data:`ABLATION_CASE` beside the same planner keeping parts of the true future (run into
    ``out``/ablation, resumable) and the hindsight bound, paired with the reference on the case's test seeds; the
    paired entries. Lookahead-A's and hindsight's own rows are the learning suite's (``out``/results.csv)."""
    case = next(c for c in CASES if c.name == ABLATION_CASE)
    reference = learning["references"][case.name]
    planner = learning["planners"][case.name]["lookahead-A"]
    names = {reference: reference, **{f"lookahead-A know={k}": f"{planner}:know={k}" for k in KNOW}}
    folder = out / "ablation"
    subprocess.run([sys.executable, str(ROOT / "evaluate.py"), "--policies", ",".join(names.values()),
                    "--workload", case.workload, "--cluster", case.cluster, "--load", str(case.load),
                    "--seeds", ",".join(map(str, case.test)), "--train-seeds", ",".join(map(str, case.train)),
                    "--metrics-window", ",".join(map(str, STEADY_STATE)), "--out", str(folder), "--workers",
                    str(workers), "--no-plots", "--json"], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    label_of = {name: label for label, name in names.items()}
    rows = [{**row, "policy": label_of[row["policy"]]} for row in read_rows(folder / "results.csv")]
    rows += [row for row in read_rows(out / "results.csv")
             if row["workload"] == case.name and row["policy"] in ("lookahead-A", "hindsight")]
    order = [reference, "lookahead-A", *(f"lookahead-A know={k}" for k in KNOW), "hindsight"]
    entries = paired_comparison(rows, reference)
    return sorted(entries, key=lambda e: order.index(e["policy"]))


def read_rows(path: Path) -> list[dict]:
    """The rows of a results.csv, metrics as floats."""
    with path.open() as handle:
        return [{k: (v if k in ("policy", "workload", "cluster", "metrics_window") else float(v))
                 for k, v in row.items()} for row in csv.DictReader(handle)]


def ratio_cell(entry: dict) -> str:
    low, high = entry["ratio_ci"]
    return f"{entry['ratio']:.3f} [{low:.3f}, {high:.3f}]"


def guard(entry: dict, key: str) -> str:
    values = entry["guards"][key]
    return format_interval(values["mean"], *values["ci95"])


def case_table(entries: list[dict], rows_shown: list[str]) -> str:
    head = ("| policy | mean wait [s] | ratio to reference | Δ wait [s] | p95 wait [s] | p99 wait [s] | mean bsld "
            "| utilization | Jain fairness | rejected |")
    lines = [head, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    by_policy = {e["policy"]: e for e in entries}
    for policy in rows_shown:
        e = by_policy[policy]
        lines.append(f"| {label(policy)} | {format_number(e['mean'])} | {ratio_cell(e)} | "
                     f"{format_interval(e['diff'], *e['diff_ci'])} | {guard(e, 'p95_wait_s')} | "
                     f"{guard(e, 'p99_wait_s')} | {guard(e, 'mean_bsld')} | {guard(e, 'utilization')} | "
                     f"{guard(e, 'jain_fairness')} | {guard(e, 'n_rejected')} |")
    return "\n".join(lines)


def label(policy: str) -> str:
    return f"**{policy}**" if policy.startswith((*PLANNER_SETTINGS, "hindsight")) else f"`{policy}`"


def cpu_hours(out: Path, learning: dict) -> tuple[float, dict[tuple[str, str], float]]:
    """Total simulation CPU time of the page's runs, validation and test [h], and the mean per episode [s] of each
    (case, policy) on the test seeds."""
    per: dict[tuple[str, str], list[float]] = defaultdict(list)
    with (out / "timing.csv").open() as handle:
        for row in csv.DictReader(handle):
            per[(row["workload"], row["policy"])].append(float(row["sim_wall_s"]))
    total_s = learning["validation_wall_s"] + sum(sum(v) for v in per.values())
    return total_s / 3600, {key: sum(v) / len(v) for key, v in per.items()}


def page(out: Path, date: str, ablated: list[dict]) -> str:
    learning = json.loads((out / "learning.json").read_text())
    total_h, per_episode = cpu_hours(out, learning)
    by_case: dict[str, list[dict]] = defaultdict(list)
    for entry in learning["paired"]:
        by_case[entry["case"]].append(entry)
    lines = [f"# How much room is there? The learning suite's headroom ({date})", "",
             f"Regenerate: `python docs/results/headroom.py --date {date}` (the runs: `evaluate.py --suite learning`,"
             f" case by case into `{_relative(out)}`). Machine: {machine()}. Simulation CPU time of all runs on this "
             f"page (validation and test): {total_h:.1f} h.", "",
             "## The protocol", "",
             "`evaluation/learning.py` fixes every case's seed ranges: *train* (what the planners draw futures "
             "from), *validation* (what chose the reference) and *test* (what the tables report). The reference "
             "of each case is the best of 26 heuristics on its validation seeds: six orders (`fcfs`, `sjf`, `saf`, "
             "`unicep`, `wfp3`, `f1`) × {greedy, EASY} backfilling × {`pack`, `topology`}, and `k8s:mostallocated` "
             "and `k8s:leastallocated`; `slurm` is left out until it runs fast enough. Metrics are those of the "
             f"steady state (the first {STEADY_STATE[0]:.0%} and last {STEADY_STATE[1]:.0%} of jobs by submit time "
             "left out). Every comparison is paired by seed (Philly: by window) with the reference: the ratio of "
             "mean waits with a 95 % paired bootstrap interval [low, high], the mean difference, and guard metrics "
             "(p95 and p99 wait, mean bounded slowdown, utilization, Jain fairness over users, rejected jobs) with "
             "their 95 % bootstrap intervals.", "",
             "| case | workload | cluster | load | train | validation | test | reference (validation mean wait) |",
             "|---|---|---|---:|---|---|---:|---|"]
    for case in CASES:
        ranking = learning["validation_ranking"].get(case.name)
        if ranking is None:
            continue
        workload = "Philly (2,000-job windows)" if case.window else f"`{case.workload}`"
        lines.append(f"| {case.name} | {workload} | `{case.cluster}` | {case.load:g} | {_span(case.train)} | "
                     f"{_span(case.validation)} | {len(case.test)} | `{ranking[0]}` |")
    lines += ["", "The planners (`baselines/lookahead.py`), with each case's candidates: its reference, the next two "
              "heuristics on validation and `hold15m` (start nothing for 15 minutes, then the reference):", ""]
    for label_, setting in PLANNER_SETTINGS.items():
        lines.append(f"- **{label_}**: `lookahead:c=...:every=E:{setting}`: every E (1 h; 8 h on Philly, whose "
                     "windows span days) of simulated time at a decision point with two or more jobs waiting, "
                     "fork the simulator, roll each candidate forward for E and then the reference, over 4 futures "
                     "resampled from the train range (arrivals spliced from training streams, runtimes of the known "
                     "jobs drawn from their requests), and commit the candidate of least mean wait.")
    lines += ["- **hindsight**: the same switching over the true future, with the best candidate of the episode as "
              "its base: never worse than its best candidate; it knows the future, so it is a bound, not a policy.",
              ""]
    lines += ["## The answers", "", "How far below the reference do the planners and the bound get (mean wait, "
              "ratio to the reference with its paired 95 % interval)? The goal set for the planner: at least 10 % "
              "below the reference at load 1.5 or more, steady-state utilization within 2 %.", "",
              "| case | " + " | ".join(f"{p}" for p in (*PLANNER_SETTINGS, "hindsight")) + " | planner goal met |",
              "|---|" + "---:|" * (len(PLANNER_SETTINGS) + 1) + "---|"]
    for case in CASES:
        entries = {e["policy"]: e for e in by_case.get(case.name, [])}
        if not entries:
            continue
        reference = next(iter(entries.values()))
        met = [p for p in PLANNER_SETTINGS if p in entries and entries[p]["ratio_ci"][1] < GOAL_RATIO and abs(
            entries[p]["guards"]["utilization"]["mean"] - reference["guards"]["utilization"]["mean"]) <= 0.02]
        goal = "—" if case.load < 1.5 and not case.window else ("yes: " + ", ".join(met) if met else "no")
        cells = [ratio_cell(entries[p]) if p in entries else "–" for p in (*PLANNER_SETTINGS, "hindsight")]
        lines.append(f"| {case.name} | " + " | ".join(cells) + f" | {goal} |")
    lines += ["", "## Results on the test seeds", ""]
    for case in CASES:
        entries = by_case.get(case.name)
        if not entries:
            continue
        reference = entries[0]["policy"]
        heuristics = sorted((e for e in entries[1:] if e["policy"] not in (*PLANNER_SETTINGS, "hindsight")),
                            key=lambda e: e["ratio"])
        shown = [reference, *(p for p in (*PLANNER_SETTINGS, "hindsight") if any(e["policy"] == p for e in entries)),
                 *(e["policy"] for e in heuristics[:5])]
        lines += [f"### {case.name}: {len(case.test)} test {'windows' if case.window else 'seeds'}", "",
                  case_table(entries, shown), "",
                  _summary_line(case.name, entries, per_episode), "",
                  "<details><summary>every candidate</summary>", "",
                  case_table(entries, [reference, *(e["policy"] for e in heuristics)]), "", "</details>", ""]
    lines += ["## What knowing the future is worth", "",
              f"On {ABLATION_CASE}'s test seeds, lookahead-A again, keeping the true runtimes of the jobs it knows, "
              "the true arrivals, or both, in place of its draws (`know=`; diagnostic bounds, not policies):", "",
              case_table(ablated, [e["policy"] for e in ablated]), ""]
    if learning.get("stratified_iqm"):
        lines += ["## Over all cases", "",
                  "IQM of the per-seed ratios to each case's reference (floored at 1 s), pooled over the cases, "
                  "with a stratified bootstrap (seeds resampled within each case), as rliable reports an algorithm "
                  "over tasks:", "", "| policy | IQM ratio [95 % interval] | seeds |", "|---|---:|---:|"]
        iqm = learning["stratified_iqm"]
        for policy in sorted(iqm, key=lambda p: iqm[p]["iqm"])[:12]:
            low, high = iqm[policy]["ci95"]
            lines.append(f"| {label(policy)} | {iqm[policy]['iqm']:.3f} [{low:.3f}, {high:.3f}] | "
                         f"{iqm[policy]['n']} |")
        lines.append("")
    return "\n".join(lines) + "\n"


def _relative(path: Path) -> str:
    """``path`` relative to the repository when it lies inside it."""
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def _span(seeds: tuple[int, ...]) -> str:
    if list(seeds) == list(range(seeds[0], seeds[-1] + 1)):
        return f"{seeds[0]}-{seeds[-1]}"
    return f"{len(seeds)} windows ({', '.join(map(str, seeds[:3]))}, ...)"


def _summary_line(case: str, entries: list[dict], per_episode: dict[tuple[str, str], float]) -> str:
    """What the case's table says: planners and bound against the reference, utilization, seeds for 10 %."""
    reference = entries[0]
    parts = []
    for entry in entries[1:]:
        if entry["policy"] not in (*PLANNER_SETTINGS, "hindsight"):
            continue
        low, high = entry["ratio_ci"]
        verdict = "below" if high < 1 else "above" if low > 1 else "not distinguishable from"
        util = entry["guards"]["utilization"]["mean"] - reference["guards"]["utilization"]["mean"]
        cost = per_episode.get((case, entry["policy"]), float("nan"))
        parts.append(f"{entry['policy']}: mean wait {(entry['ratio'] - 1) * 100:+.1f} % against the reference "
                     f"({verdict} it; utilization {util * 100:+.1f} points; {cost:,.0f} s per episode, paired SD "
                     f"{entry['sd_diff']:,.0f} s, {entry['seeds_for_10pct']} seeds for a 10 % difference)")
    return "; ".join(parts) + "." if parts else ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "headroom")
    parser.add_argument("--cases", help="comma-separated cases to run now (default: all)")
    parser.add_argument("--date", default=datetime.date.today().isoformat())
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    if args.cases:
        run_cases(args.out, args.cases.split(","), args.workers, final=False)
        print("piece done; run without --cases to write the page")
        return 0
    run_cases(args.out, [case.name for case in CASES], args.workers, final=True)
    ablated = ablation(args.out, json.loads((args.out / "learning.json").read_text()), args.workers)
    target = ROOT / "docs" / "results" / f"{args.date}-headroom.md"
    write_text_atomically(target, page(args.out, args.date, ablated))
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
