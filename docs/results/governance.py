"""Regenerate the governance study: a multi-team workload under no quota, Slurm-style hard limits and Kueue-style
borrowing, for FIFO + EASY, fair share, Fair Tree and kube-scheduler's MostAllocated and LeastAllocated; and a
fractional and MIG workload under every placement rule. Writes docs/results/governance.md.

    python docs/results/governance.py [--date YYYY-MM-DD] [--seeds 0,1,2] [--workers N]

Runs go through the library (``envs.scenario.scenario`` and ``envs.sim.simulate``) in a process pool, since the
per-team figures (wait, GPU share, borrowed GPU-hours) come from the job logs; every run is seeded, so the page
does not depend on the machine or the number of workers. The page is written beside, then moved into place.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import os
import sys
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from baselines.config import policy_config_from_dict  # noqa: E402
from baselines.registry import make  # noqa: E402
from envs.core import summarize  # noqa: E402
from envs.core.files import write_text_atomically  # noqa: E402
from envs.core.metrics import HOUR_S, jain_index  # noqa: E402
from envs.scenario import scenario, synthetic_config  # noqa: E402
from envs.sim import simulate  # noqa: E402
from envs.workload.synthetic import generate  # noqa: E402

HERE = Path(__file__).resolve().parent
CLUSTER, WORKLOAD, LOAD = "hetero-64", "default", 1.2
TEAMS = tuple(f"team{i}" for i in range(8))
NOMINAL_GPUS = 64  # 512 GPUs / 8 teams
POLICIES = ("fcfs+easy", "fairshare+easy", "fairtree+easy", "k8s:mostallocated", "k8s:leastallocated")
MODELS = {
    "none": None,
    "hard": {"quotas": {"limits": {"teams": dict.fromkeys(TEAMS, NOMINAL_GPUS)}}},
    "borrowing": {"quotas": {"queues": {t: {"nominal_gpus": NOMINAL_GPUS, "cohort": "all"} for t in TEAMS}}},
}
"""Quota models: none; GrpTRES=gres/gpu=64 per team; Kueue queues of nominal 64 in one cohort, unlimited borrowing."""
ORDERS = {"fairshare": {"by": "team"}}  # fair share between teams; Fair Tree ranks users under their team accounts
SHARED_CLUSTER, SHARED_WORKLOAD = "mig-a100", "mig"
PLACEMENTS = (*(f"fcfs+easy/{rule}" for rule in ("firstfit", "pack", "spread", "topology", "fragmentation")),
              "k8s:mostallocated", "k8s:leastallocated")
VARIANTS = ("mig", "shares")
"""The small-jobs workload as it is (half the 1-GPU jobs ask for a MIG instance) and with no MIG request (those jobs
ask for a whole GPU or a share of one instead: the same draws but the MIG stream's)."""
SHARED_KEYS = ("mean_wait_s", "p95_wait_s", "utilization", "fragmentation", "mean_bsld")


def team_run(args: tuple[str, str, int]) -> dict:
    """One run of the multi-team part: the run's metrics and its per-team figures."""
    policy, model, seed = args
    world = scenario(WORKLOAD, CLUSTER, seed=seed, load=LOAD)
    config = policy_config_from_dict({"orders": ORDERS} | ({"governance": MODELS[model]} if MODELS[model] else {}),
                                     f"governance study, model {model}")
    log = simulate(config.apply(world.cluster), world.workload, config.make(policy), world.runtime, world.dynamics)
    metrics = summarize(log)
    waits: dict[str, list[float]] = defaultdict(list)
    held: dict[str, float] = defaultdict(float)
    for r in log.completed():
        waits[r.job.team].append(r.wait_s)
        held[r.job.team] += r.job.gpu_share * r.run_s
    capacity_gpu_s = log.total_gpus * metrics["makespan_s"] or 1.0
    return {"policy": policy, "model": model, "seed": seed, "metrics": metrics,
            "team_wait_s": {t: float(np.mean(waits[t])) if waits[t] else 0.0 for t in TEAMS},
            "team_share": {t: held[t] / capacity_gpu_s for t in TEAMS}}


def shared_run(args: tuple[str, str, int]) -> dict:
    """One run of the fractional and MIG part: its metrics."""
    policy, variant, seed = args
    world = scenario(SHARED_WORKLOAD, SHARED_CLUSTER, seed=seed)
    jobs = world.workload
    if variant == "shares":
        config = synthetic_config(SHARED_WORKLOAD)
        config = dataclasses.replace(config, gpus=dataclasses.replace(config.gpus, mig_share=0.0))
        jobs = generate(config, seed=seed, capacity_gpus=world.cluster.n_gpus)
    log = simulate(world.cluster, jobs, make(policy), world.runtime, world.dynamics)
    return {"policy": policy, "variant": variant, "seed": seed, "metrics": summarize(log)}


def shared_table(rows: list[dict]) -> str:
    """The fractional and MIG part of the page: one row per (variant, policy)."""
    by = defaultdict(list)
    for r in rows:
        by[(r["variant"], r["policy"])].append(r)
    lines = ["| workload | policy | " + " | ".join(SHARED_KEYS) + " |", "|---|---|" + "---:|" * len(SHARED_KEYS)]
    for variant in VARIANTS:
        for policy in PLACEMENTS:
            group = by[(variant, policy)]
            means = {k: _mean(group, lambda r, k=k: r["metrics"][k]) for k in SHARED_KEYS}
            cells = [f"{v:.3f}" if k in ("utilization", "fragmentation") else f"{v:,.1f}" for k, v in means.items()]
            lines.append(f"| {variant} | `{policy}` | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _mean(rows: list[dict], get) -> float:
    return float(np.mean([get(r) for r in rows]))


def team_tables(rows: list[dict], seeds: str) -> str:
    """The multi-team part of the page."""
    by = defaultdict(list)
    for r in rows:
        by[(r["model"], r["policy"])].append(r)
    head = "| policy | " + " | ".join(TEAMS) + " | Jain (team waits) | Jain (users' bsld) | utilization | " \
           "borrowed GPU-h | reclaims | quota violations |"
    rule = "|---|" + "---:|" * (len(TEAMS) + 6)
    out = []
    for model in MODELS:
        lines = [head, rule]
        for policy in POLICIES:
            group = by[(model, policy)]
            waits = [_mean(group, lambda r, t=t: r["team_wait_s"][t]) for t in TEAMS]
            m = lambda key, g=group: _mean(g, lambda r: r["metrics"][key])  # noqa: E731
            lines.append(f"| `{policy}` | " + " | ".join(f"{w:,.0f}" for w in waits)
                         + f" | {_mean(group, lambda r: jain_index(np.array(list(r['team_wait_s'].values())))):.3f}"
                         f" | {m('jain_fairness'):.3f} | {m('utilization'):.3f} | {m('borrowed_gpu_hours'):,.0f}"
                         f" | {m('reclaims'):,.1f} | {m('quota_violations'):.0f} |")
        out.append(f"### Quota model `{model}`: mean wait per team [s]\n\n" + "\n".join(lines))
    share_head = "| policy | model | " + " | ".join(TEAMS) + " |"
    share_lines = [share_head, "|---|---|" + "---:|" * len(TEAMS)]
    for model in MODELS:
        for policy in ("fcfs+easy", "k8s:mostallocated"):
            group = by[(model, policy)]
            share_lines.append(f"| `{policy}` | {model} | " + " | ".join(
                f"{_mean(group, lambda r, t=t: r['team_share'][t]):.1%}" for t in TEAMS) + " |")
    out.append("### Each team's mean share of the cluster: GPU time held / (512 GPUs × makespan); its quota is 64 "
               "GPUs, 12.5%\n\n" + "\n".join(share_lines))
    return "\n\n".join(out)


def findings(team_rows: list[dict], shared_rows: list[dict]) -> str:
    """A few sentences read off the tables."""
    team = defaultdict(list)
    for r in team_rows:
        team[(r["model"], r["policy"])].append(r)

    def m(model: str, policy: str, key: str) -> float:
        return _mean(team[(model, policy)], lambda r: r["metrics"][key])

    def tw(model: str, policy: str, t: str) -> float:
        return _mean(team[(model, policy)], lambda r: r["team_wait_s"][t])

    fifo, fs, ft = "fcfs+easy", "fairshare+easy", "fairtree+easy"
    lines = [
        f"- Hard limits of 64 GPUs per team take FIFO + EASY's mean wait from {m('none', fifo, 'mean_wait_s'):,.0f} s "
        f"to {m('hard', fifo, 'mean_wait_s'):,.0f} s and its utilization from {m('none', fifo, 'utilization'):.3f} to "
        f"{m('hard', fifo, 'utilization'):.3f}: the two heaviest teams wait ({tw('hard', fifo, 'team0'):,.0f} s and "
        f"{tw('hard', fifo, 'team1'):,.0f} s for team0 and team1) while GPUs stay idle.",
        f"- Borrowing puts the idle quota back to work: FIFO + EASY waits {m('borrowing', fifo, 'mean_wait_s'):,.0f} s "
        f"at utilization {m('borrowing', fifo, 'utilization'):.3f}, with "
        f"{m('borrowing', fifo, 'borrowed_gpu_hours'):,.0f} GPU-hours borrowed and "
        f"{m('borrowing', fifo, 'reclaims'):,.0f} jobs reclaimed per run "
        f"({m('borrowing', fifo, 'reclaimed_gpu_hours'):,.0f} GPU-hours of work rolled back).",
        f"- Fair share and Fair Tree serve the light teams first: without quotas team7 waits "
        f"{tw('none', fs, 'team7'):,.0f} s and {tw('none', ft, 'team7'):,.0f} s under them against "
        f"{tw('none', fifo, 'team7'):,.0f} s under FIFO, and team0 {tw('none', fs, 'team0'):,.0f} s and "
        f"{tw('none', ft, 'team0'):,.0f} s; with borrowing they reclaim more often "
        f"({m('borrowing', fs, 'reclaims'):,.0f} and {m('borrowing', ft, 'reclaims'):,.0f} jobs per run), since the "
        "light teams' jobs they start first take "
        "their quota back.",
        f"- kube-scheduler's MostAllocated waits {m('none', 'k8s:mostallocated', 'mean_wait_s'):,.0f} s and "
        f"LeastAllocated {m('none', 'k8s:leastallocated', 'mean_wait_s'):,.0f} s without quotas (FIFO + EASY "
        f"{m('none', fifo, 'mean_wait_s'):,.0f} s): one pod at a time with no reservation starts every job that fits.",
    ]
    shared = defaultdict(list)
    for r in shared_rows:
        shared[(r["variant"], r["policy"])].append(r)
    easy = [p for p in PLACEMENTS if p.startswith("fcfs")]
    for variant in VARIANTS:
        waits = {p: _mean(shared[(variant, p)], lambda r: r["metrics"]["mean_wait_s"]) for p in PLACEMENTS}
        frag = {p: _mean(shared[(variant, p)], lambda r: r["metrics"]["fragmentation"]) for p in PLACEMENTS}
        best, least = min(easy, key=waits.__getitem__), min(easy, key=frag.__getitem__)
        lines.append(f"- `{variant}`: among the rules under FIFO + EASY, `{best}` waits least ({waits[best]:,.0f} s) "
                     f"and `{least}` fragments least ({frag[least]:.3f}); `spread` waits "
                     f"{waits['fcfs+easy/spread']:,.0f} s.")
    return "\n".join(lines)


def page(date: str, team_rows: list[dict], shared_rows: list[dict], seeds: str, workers: int) -> str:
    """The page's markdown."""
    world = scenario(WORKLOAD, CLUSTER, seed=0, load=LOAD)
    demand = defaultdict(float)
    for j in world.workload.jobs:
        demand[j.team] += j.gpu_share * j.runtime_s / HOUR_S
    total = sum(demand.values())
    mix = ", ".join(f"{t} {demand[t] / total:.0%}" for t in TEAMS)
    return f"""# Governance: quotas, fair share and Kubernetes scoring ({date})

Regenerated by `python docs/results/governance.py --date {date} --seeds {seeds}` (a few minutes on 2 cores; this
run: {os.cpu_count()} cores, {workers} workers). Every figure is the mean over seeds {seeds}.

## Teams under quotas

The embedded `{WORKLOAD}` workload at {LOAD:g}× its load (2,000 jobs, 40 users in 8 teams, user k in team k mod 8)
on `{CLUSTER}` (512 GPUs). Demand (GPU-hours at speed 1) is skewed: {mix} in seed 0. Quota models:

- `none`: no quota;
- `hard`: Slurm `GrpTRES=gres/gpu=64` on each team's account: a team holds at most 64 GPUs at once, even when the
  rest of the cluster is idle;
- `borrowing`: one Kueue ClusterQueue per team with a nominal quota of 64 GPUs, all in one cohort with no
  borrowing limit: a team may borrow what others leave unused, and gives it back by preemption (lowest priority,
  most recently started first) when a lender's job within its own nominal quota arrives.

Policies: FIFO with EASY backfilling; classic fair share between teams (`by: team`) with EASY; Fair Tree (users under
their team accounts, equal shares) with EASY; kube-scheduler's NodeResourcesFit `MostAllocated` (bin packing) and
`LeastAllocated` (spreading), each with BalancedAllocation, the NVLink-island and the dataset-locality scores, one
pod at a time and no reservation. Wait is to a job's first start; Jain's index over the teams' mean waits (1 = every
team waits as long) and over the users' mean bounded slowdowns (the harness's `jain_fairness`); utilization =
GPU time held / (GPUs × makespan); borrowed GPU-hours = ∫ GPUs held above the nominal quota, all queues; reclaims =
jobs preempted to give quota back (their work since the last checkpoint is lost).

{team_tables(team_rows, seeds)}

## Fractional GPUs and MIG: the placement rules

The `{SHARED_WORKLOAD}` workload (400 small jobs: half the 1-GPU jobs ask for a MIG instance, 1g.5gb to 4g.20gb; a
third of the others 0.25 or 0.5 of a GPU, some with 8-40 GiB of GPU memory) on `{SHARED_CLUSTER}` (two nodes of 4
A100-40GB in MIG mode, one node of 4 A100-80GB in full mode; a GPU switches mode only when empty, paying 30 s).
`shares` is the same workload with no MIG request (those jobs take a whole GPU or a share instead). FIFO with EASY
backfilling under each placement rule, and kube-scheduler's two fit strategies. Fragmentation = idle GPU time that
could not host the smallest pending request (for a MIG request: free slices that no valid position of its profile
covers) / idle GPU time, while jobs were pending; mean bounded slowdown as `mean_bsld`.

{shared_table(shared_rows)}

## What the numbers say

{findings(team_rows, shared_rows)}
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--date", default=datetime.date.today().isoformat(), help="the page's date (default: today)")
    parser.add_argument("--seeds", default="0,1,2", help="comma-separated seeds (default 0,1,2)")
    parser.add_argument("--workers", type=int, default=min(4, os.cpu_count() or 1), help="parallel runs")
    args = parser.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",") if s]
    runs = [(policy, model, seed) for model in MODELS for policy in POLICIES for seed in seeds]
    shared = [(policy, variant, seed) for variant in VARIANTS for policy in PLACEMENTS for seed in seeds]
    with ProcessPoolExecutor(args.workers) as pool:
        team_rows = list(pool.map(team_run, runs))
        shared_rows = list(pool.map(shared_run, shared))
    target = HERE / "governance.md"
    write_text_atomically(target, page(args.date, team_rows, shared_rows, args.seeds, args.workers))
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
