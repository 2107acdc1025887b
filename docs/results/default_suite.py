"""Regenerate the default-suite results page: ``python evaluate.py`` (the main heuristics on the embedded synthetic
workload, 2,000 jobs on hetero-64, seeds 0-2), its table and two of its plots, as a dated page in docs/results/.

    python docs/results/default_suite.py [--date YYYY-MM-DD] [--workers N]

Writes ``docs/results/DATE-default-suite.md`` and ``docs/results/figures/DATE-default-suite-{wait_cdf,bars}.png``
(each written beside, then moved into place). Needs the ``plot`` extra (matplotlib).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from evaluation.aggregate import markdown_table  # noqa: E402

HERE = Path(__file__).resolve().parent
FIGURES = ("wait_cdf", "bars")


def replace_atomically(source: Path, target: Path) -> None:
    """Copy ``source`` beside ``target``, then move it over ``target``."""
    partial = target.with_name(target.name + ".partial")
    shutil.copyfile(source, partial)
    os.replace(partial, target)


def page(date: str, summary: dict, workers: int) -> str:
    """The page's markdown."""
    results = summary["results"]
    best = min(results, key=lambda r: r["metrics"]["mean_wait_s"])
    fifo = next(r for r in results if r["policy"] == "fifo")
    figures = "\n".join(f"![{name} of the default suite](figures/{date}-default-suite-{name}.png)" for name in FIGURES)
    best_wait, fifo_wait = best["metrics"]["mean_wait_s"], fifo["metrics"]["mean_wait_s"]
    return f"""# The default suite ({date})

`python evaluate.py` with no arguments: the main heuristics on the embedded synthetic workload (`default`: 2,000
jobs on the 512-GPU `hetero-64` cluster, generator seeds 0, 1 and 2, full runtime model). Each cell is the mean
over the seeds ± half the 95% percentile-bootstrap interval; times in seconds, bounded slowdown dimensionless,
utilization = allocated GPU-time / (GPUs × makespan). The figures do not depend on the machine or on the number of
workers (this run: {os.cpu_count()} cores, {workers} workers); decision latencies do, and are left out.

{markdown_table(results)}

Lowest mean wait: `{best['policy']}`, {best_wait:,.1f} s against {fifo_wait:,.0f} s for `fifo`. The plots show each
policy's wait-time distribution over the three seeds, and the main metrics with their intervals.

{figures}

Regenerate this page with `python docs/results/default_suite.py --date {date}`.
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--date", default=datetime.date.today().isoformat(), help="the page's date (default: today)")
    parser.add_argument("--workers", type=int, default=min(4, os.cpu_count() or 1), help="parallel runs")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run"
        done = subprocess.run([sys.executable, str(ROOT / "evaluate.py"), "--out", str(out), "--workers",
                               str(args.workers)], cwd=ROOT, capture_output=True, text=True)
        if done.returncode:
            lines = done.stderr.strip().splitlines()
            print(lines[-1] if lines else "evaluate.py failed", file=sys.stderr)
            return done.returncode
        summary = json.loads((out / "summary.json").read_text())
        (HERE / "figures").mkdir(exist_ok=True)
        for name in FIGURES:
            replace_atomically(out / f"{name}.png", HERE / "figures" / f"{args.date}-default-suite-{name}.png")
        text = Path(tmp) / "page.md"
        text.write_text(page(args.date, summary, args.workers))
        replace_atomically(text, HERE / f"{args.date}-default-suite.md")
    print(f"wrote {HERE / f'{args.date}-default-suite.md'} and its figures")
    return 0


if __name__ == "__main__":
    sys.exit(main())
