"""Regenerate the default-suite results page: ``python evaluate.py`` (the main heuristics on the embedded synthetic
workload, 2,000 jobs on hetero-64, seeds 0-2), its table and two of its plots, over the whole run and over the steady
state (``--metrics-window 0.1``), as a dated page in docs/results/.

    python docs/results/default_suite.py [--date YYYY-MM-DD] [--workers N]

Writes ``docs/results/DATE-default-suite.md`` and ``docs/results/figures/DATE-default-suite-{wait_cdf,bars}.png``
(each written beside, then moved into place). Needs the ``plot`` extra (matplotlib).

The steady-state comparison of any other evaluation comes from :func:`steady_state_summaries` and
:func:`steady_state_table` (``sys.path.insert(0, "docs/results")``, then ``from default_suite import ...``)::

    whole, steady = steady_state_summaries(Path("runs/cmp"), "--workload", "small", "--cluster", "tiny")
    print(steady_state_table(whole, steady))
"""

from __future__ import annotations

import argparse
import datetime
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from envs.core.files import write_atomically  # noqa: E402
from evaluation.aggregate import comparison_table, markdown_table  # noqa: E402
from evaluation.report import read_summary  # noqa: E402

HERE = Path(__file__).resolve().parent
FIGURES = ("wait_cdf", "bars")
STEADY_WINDOW = "0.1"
"""The steady state's ``--metrics-window``: the first and the last 10% of the jobs, by submit time, left out."""
STEADY_KEYS = ("mean_wait_s", "p95_wait_s", "mean_bsld", "utilization")
"""The metrics of the steady-state comparison table."""


def replace_atomically(source: Path, target: Path) -> None:
    """Copy ``source`` beside ``target``, then move it over ``target``."""
    write_atomically(target, lambda partial: shutil.copyfile(source, partial))


def run_evaluate(out: Path, *args: str) -> dict:
    """The summary document of ``python evaluate.py --out OUT ARGS`` (:func:`evaluation.report.read_summary`);
    RuntimeError with its error line if it fails."""
    done = subprocess.run([sys.executable, str(ROOT / "evaluate.py"), "--out", str(out), *args], cwd=ROOT,
                          capture_output=True, text=True)
    if done.returncode:
        lines = done.stderr.strip().splitlines()
        raise RuntimeError(lines[-1] if lines else f"evaluate.py failed with exit status {done.returncode}")
    return read_summary(out)


def steady_state_summaries(out: Path, *args: str, window: str = STEADY_WINDOW) -> tuple[dict, dict]:
    """(whole run, steady state): the summary.json of ``evaluate.py ARGS`` run into ``out/whole``, and of the same
    runs with ``--metrics-window WINDOW`` into ``out/steady``."""
    return run_evaluate(out / "whole", *args), run_evaluate(out / "steady", *args, "--metrics-window", window)


def steady_state_table(whole: dict, steady: dict, keys: Sequence[str] = STEADY_KEYS) -> str:
    """The Markdown table of ``keys`` over the whole run and over the steady state, side by side, per policy."""
    return comparison_table({"whole run": whole["results"], "steady state": steady["results"]}, keys)


def _fill(text: str) -> str:
    """``text`` wrapped as the pages are, at 116 characters."""
    return textwrap.fill(text, 116, break_on_hyphens=False)


def _policies(count: int, total: int) -> str:
    return "every policy" if count == total else "no policy" if count == 0 else f"{count} of {total} policies"


def _span(values: Sequence[float]) -> str:
    return f"{min(values):.3f} to {max(values):.3f}"


def steady_state_intro(whole: dict, steady: dict) -> str:
    """What the steady-state table holds: the window, the jobs kept per run (the first entry's mean over its seeds)
    and the period."""
    head, tail = steady["metrics_window"]
    window = f"{head:g}" if head == tail else f"{head:g},{tail:g}"
    jobs, kept = whole["results"][0]["metrics"]["n_jobs"], steady["results"][0]["metrics"]["n_jobs"]
    return (f"The same runs with `--metrics-window {window}`: the first {head:.0%} and the last {tail:.0%} "
            f"of the jobs by submit time are left out of the metrics, so waits and slowdowns are those of the "
            f"{kept:,.0f} kept jobs of {jobs:,.0f}, and utilization is the GPU time of every job inside the period "
            "from the first kept job's submit to the last one's, over the cluster's GPUs × that period: the warm-up "
            "and the drain after the last arrivals are not counted (`envs/core/metrics.py` says what the window does "
            "to each metric; the makespan stays the whole run's).")


def steady_state_changes(whole: dict, steady: dict) -> str:
    """Two sentences on what the steady state changes, computed from the two summaries."""
    steady_of = {(r["policy"], r["workload"]): r["metrics"] for r in steady["results"]}
    pairs = [(r["policy"], r["metrics"], steady_of[(r["policy"], r["workload"])]) for r in whole["results"]]
    n = len(pairs)
    wait_change = [s["mean_wait_s"] / w["mean_wait_s"] - 1 for _, w, s in pairs]
    busier = sum(s["utilization"] > w["utilization"] for _, w, s in pairs)
    whole_order, steady_order = (sorted(pairs, key=lambda pair: pair[i]["mean_wait_s"]) for i in (1, 2))
    names = [[f"`{policy}`" for policy, *_ in order] for order in (whole_order, steady_order)]
    order = "keeps its order" if names[0] == names[1] else f"changes from {' < '.join(names[0])} to " \
        f"{' < '.join(names[1])}"
    best, _, best_steady = steady_order[0]
    return (f"In the steady state mean wait is lower than over the whole run for "
            f"{_policies(sum(c < 0 for c in wait_change), n)} ({min(wait_change):+.0%} to {max(wait_change):+.0%}), "
            f"and utilization is higher for {_policies(busier, n)} ({_span([w['utilization'] for _, w, _ in pairs])} "
            f"over the whole run, {_span([s['utilization'] for _, _, s in pairs])} in the steady state). "
            f"Ranked by mean wait, the field {order}; lowest in the steady state: `{best}`, "
            f"{best_steady['mean_wait_s']:,.1f} s.")


def page(date: str, whole: dict, steady: dict, workers: int) -> str:
    """The page's markdown."""
    results = whole["results"]
    best = min(results, key=lambda r: r["metrics"]["mean_wait_s"])
    fifo = next(r for r in results if r["policy"] == "fifo")
    figures = "\n".join(f"![{name} of the default suite](figures/{date}-default-suite-{name}.png)" for name in FIGURES)
    best_wait, fifo_wait = best["metrics"]["mean_wait_s"], fifo["metrics"]["mean_wait_s"]
    return f"""# The default suite ({date})

Regenerated by `python docs/results/default_suite.py --date {date}` (about half a minute on 2 cores).

`python evaluate.py` with no arguments: the main heuristics on the embedded synthetic workload (`default`: 2,000
jobs on the 512-GPU `hetero-64` cluster, generator seeds 0, 1 and 2, full runtime model). Each cell is the mean
over the seeds [and its 95% percentile-bootstrap interval]; times in seconds, bounded slowdown dimensionless,
utilization = allocated GPU-time / (GPUs × makespan). The figures do not depend on the machine or on the number of
workers (this run: {os.cpu_count()} cores, {workers} workers); decision latencies do, and are left out.

{markdown_table(results)}

Lowest mean wait: `{best['policy']}`, {best_wait:,.1f} s against {fifo_wait:,.0f} s for `fifo`. The plots show each
policy's wait-time distribution over the three seeds, and the main metrics with their intervals.

{figures}

## The steady state

{_fill(steady_state_intro(whole, steady))}

{steady_state_table(whole, steady)}

{_fill(steady_state_changes(whole, steady))}
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--date", default=datetime.date.today().isoformat(), help="the page's date (default: today)")
    parser.add_argument("--workers", type=int, default=min(4, os.cpu_count() or 1), help="parallel runs")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        try:
            whole, steady = steady_state_summaries(Path(tmp), "--workers", str(args.workers))
        except RuntimeError as exc:
            print(exc, file=sys.stderr)
            return 1
        (HERE / "figures").mkdir(exist_ok=True)
        for name in FIGURES:
            replace_atomically(Path(tmp) / "whole" / f"{name}.png",
                               HERE / "figures" / f"{args.date}-default-suite-{name}.png")
        text = Path(tmp) / "page.md"
        text.write_text(page(args.date, whole, steady, args.workers))
        replace_atomically(text, HERE / f"{args.date}-default-suite.md")
    print(f"wrote {HERE / f'{args.date}-default-suite.md'} and its figures")
    return 0


if __name__ == "__main__":
    sys.exit(main())
