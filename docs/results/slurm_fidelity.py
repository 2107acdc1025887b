"""Regenerate the Slurm-fidelity page: our presets against a real slurmctld on the recorded streams of
``tests/data/slurm/``, and the default suite's whole run against its steady state.

    python docs/results/slurm_fidelity.py [--date YYYY-MM-DD] [--workers N]

Writes ``docs/results/slurm-fidelity.md`` (beside, then moved into place). The records themselves come from
``benchmarks/slurm_live.py record`` on a machine with Slurm (their commands are on the page); this script only
replays them, so it runs anywhere (about a minute on 2 cores, most of it the default suite).
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import sys
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from default_suite import steady_state_changes, steady_state_intro, steady_state_summaries, steady_state_table  # noqa: E402

from envs.core.files import read_yaml, write_text_atomically  # noqa: E402
from envs.scenario import load_cluster  # noqa: E402
from envs.workload.loaders import load_trace  # noqa: E402
from evaluation.slurm_replay import START_TOLERANCE_S, case_from_dict, compare  # noqa: E402

RECORDS = ROOT / "tests" / "data" / "slurm"
POLICIES = ("fcfs", "fcfs+easy", "fcfs+conservative", "slurm")


def fidelity_rows() -> tuple[list[str], list[dict]]:
    """(table lines, the records) of every record × policy."""
    lines = ["| stream | jobs | policy | max \\|Δ start\\| [s] | mean \\|Δ start\\| [s] | "
             f"within {START_TOLERANCE_S:g} s | inversions |",
             "|---|---:|---|---:|---:|---:|---:|"]
    records = []
    for path in sorted(RECORDS.glob("*.yaml")):
        data = read_yaml(path, "Slurm record")
        records.append(data)
        for policy in POLICIES:
            result = compare(data, policy)
            diffs = result.diffs
            lines.append(f"| `{data['name']}` | {len(diffs)} | `{policy}` | {result.max_diff_s:,.1f} | "
                         f"{diffs.mean():,.1f} | {result.within(START_TOLERANCE_S)} | {result.inversions} |")
    return lines, records


def release_gaps(records: list[dict]) -> list[float]:
    """For every job that waited (started more than 2 s after its submission) and started within 2 s of another
    job's end, the time from that end to its start [s]: how long Slurm takes to reuse freed GPUs."""
    gaps = []
    for data in records:
        ends = sorted(j["end_s"] for j in data["jobs"])
        for job in data["jobs"]:
            before = [e for e in ends if e <= job["start_s"]]
            if job["start_s"] - job["submit_s"] > 2 and before and job["start_s"] - before[-1] < 2:
                gaps.append(job["start_s"] - before[-1])
    return gaps


def export_lines() -> list[str]:
    """What the loaders make of the live Slurm's own exports."""
    out = []
    for path in sorted(RECORDS.glob("*.sacct.txt")):
        trace = load_trace(path)
        lines = len(path.read_text().splitlines()) - 1
        skipped = ", ".join(f"{n} {reason}" for reason, n in sorted(trace.skipped.items()))
        out.append(f"- `{path.name}` (`sacct --parsable2 --duplicates`, {lines} records): {len(trace)} jobs "
                   f"({skipped} folded in), the recorded stream's GPUs, time limits, accounts and QOS.")
    for spec in ("scontrol:scontrol-show-node.txt", "sinfo:sinfo-N.txt"):
        kind, _, name = spec.partition(":")
        cluster = load_cluster(f"{kind}:{RECORDS / name}")
        parts = ", ".join(p.name + ("*" if p.default else "") for p in cluster.governance.partitions)
        out.append(f"- `{name}` (`{kind}`): {cluster.n_nodes} node, {cluster.n_gpus} GPUs, "
                   f"{int(cluster.node_cpu_milli.sum()) // 1000} CPUs, partitions {parts}.")
    return out


def stream_lines(records: list[dict]) -> list[str]:
    """One line per record: what it is and how it was recorded."""
    out = []
    for data in records:
        case = case_from_dict(data, data["name"])
        started = [j.get("started_by", "?") for j in case.jobs]
        rec = data["recorded"]
        out.append(f"- `{data['name']}`: {case.description} ({len(case.jobs)} jobs; Slurm started "
                   f"{started.count('main')} through its main scheduler and {started.count('backfill')} through "
                   f"backfill). Recorded {rec['date']} with {rec['slurm']}: `{rec['command']}`.")
    return out


def _fill(text: str, indent: str = "") -> str:
    """``text`` wrapped at 116 characters, continuation lines indented by ``indent``."""
    return textwrap.fill(text, 116, subsequent_indent=indent, break_on_hyphens=False, break_long_words=False)


def page(date: str, workers: int) -> str:
    table, records = fidelity_rows()
    worst = max(compare(data, "slurm").max_diff_s for data in records)
    gaps = release_gaps(records)
    with tempfile.TemporaryDirectory() as tmp:
        whole, steady = steady_state_summaries(Path(tmp), "--workers", str(workers), "--no-plots")
    return f"""# Slurm fidelity ({date})

Regenerated by `python docs/results/slurm_fidelity.py --date {date}` (about a minute on 2 cores; the records are
replayed, not re-recorded).

## Our presets against a real Slurm

Each stream ran on a real Slurm (Debian's `slurm-wlm` 22.05.8: `munged`, `slurmctld`, `slurmd` and, for accounts
and QOS, `slurmdbd` on MariaDB, all on one machine) with one node of 8 count-only GPUs, `SelectType=select/cons_tres`
and `SchedulerParameters=bf_interval=1,bf_resolution=1` (`benchmarks/slurm_live.py record`; each record keeps its
`slurm.conf`). Every job was `sbatch --gres=gpu:N -c 1 --mem=100 --time=MIN --wrap "sleep S"`; submissions, starts
and ends are read from `slurmctld.log` to the millisecond. The simulator replays each record (recorded submissions,
runtimes = recorded end − start, requested times = the `--time` minutes) under each policy; Δ start is the
simulated start minus Slurm's, an inversion a pair of jobs started in opposite orders.

{chr(10).join(_fill(line, indent="  ") for line in stream_lines(records))}

{chr(10).join(table)}

{_fill(f"`slurm` reproduces every recorded start order, and every start within {worst:.1f} s "
        f"(`tests/test_slurm_fidelity.py` asserts the order and {START_TOLERANCE_S:.0f} s in CI). What makes the "
        "difference, found with the live harness and read in Slurm's source (`baselines/slurm.py` and "
        "`baselines/slurm_backfill.py` document each rule):")}

- **Backfill reserves whole nodes.** A job that must wait gets a reservation that takes its nodes out of backfill's
  node-space map for its window, even the GPUs it leaves free; a later job may start only if it ends before every
  such window. EASY protects only the first job, and on GPUs; conservative backfill keeps the reservations of
  earlier calls.
- **Every queued job's plan is made anew each cycle**, in priority order, and a job ending exactly when a
  reservation begins is held back (`begin_time <= end_time`).
- **The will-run test releases running jobs in batches** aligned to 30 s of wall clock: a reservation starts at the
  last end of the batch that makes the job fit, sometimes later than the first end that would have, which lets
  shorter jobs through.
- **The main scheduler** stops a partition at its first job that does not fit, and withholds that partition's nodes
  from every later job of the pass, whatever its partition.
- **No job starts at its submission**: the next scheduling pass, about a second later, starts it.
- With accounting: Fair Tree factors and priorities are recomputed every `PriorityCalcPeriod` from the decay
  thread's start (a second after slurmctld's), and a job submitted in between takes the last pass's factors (0 for
  an association that pass did not know; a pass that fell due while nothing was pending knows only the jobs of
  its own time, found with `steer-default-24`). A job whose QOS may preempt does so at its submission; a requeued
  job waits 121 s, and then for the next event or periodic main pass (every `sched_interval`), before it starts
  again.
- **On several nodes** (`multinode-gang`, `multinode-fragmentation`: three slurmd on one machine, `slurmd -N`):
  `--gres=gpu:G` counts per node, so a job that fits one node never spans nodes (it waits for one with room); a job
  of `-N N --gres=gpu:G/N` takes N nodes with G/N free GPUs each; backfill tries a job again from the end of the
  first slot whose next slot offers a node this one lacks (`bit_super_set(next_bitmap, current_bitmap)`), so a
  3-node job behind a 2-node reservation is reserved after it and holds back the jobs that would delay it. Every
  job runs on the nodes Slurm gave it (`tests/test_slurm_fidelity.py` checks jobcomp's `NodeList`).

{_fill(f"The residual differences are Slurm's own latencies: the {len(gaps)} jobs that waited and then started "
        f"right after another job's end started {min(gaps):.2f} to {max(gaps):.2f} s (median "
        f"{statistics.median(gaps):.2f} s) after it (the main scheduler after the epilog, or the next backfill "
        "poll), where the simulator starts them at that end; along a chain of such starts the lags add up.")}

The live Slurm's own exports, read by the operator loaders (`tests/test_slurm_fidelity.py` checks each against
its record):

{chr(10).join(_fill(line, indent="  ") for line in export_lines())}

## Steady state against the whole run (the default suite)

{_fill(steady_state_intro(whole, steady))}

{steady_state_table(whole, steady)}

{_fill(steady_state_changes(whole, steady) + " Times in seconds, utilization a fraction; each cell the mean over "
        f"seeds 0-2 [and its 95% bootstrap interval] (this run: {os.cpu_count()} cores, {workers} workers).")}
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--date", default=datetime.date.today().isoformat())
    parser.add_argument("--workers", type=int, default=min(4, os.cpu_count() or 1))
    args = parser.parse_args()
    write_text_atomically(HERE / "slurm-fidelity.md", page(args.date, args.workers))
    print(f"wrote {HERE / 'slurm-fidelity.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
