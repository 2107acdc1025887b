"""The workload inspector: what a trace holds, as a dict, as text, and as the ``python -m envs.workload`` command.

A report (:func:`inspect_workload`) holds the jobs loaded, the records skipped by reason, the GPU-count mix (jobs
asking for 1, 2, 3, ... whole GPUs, and fractional ones; also grouped by powers of two), the jobs by the outcome
the trace recorded (:class:`~envs.core.job.TraceOutcome`) and by priority class, the submit span, runtime figures,
the GPU-hours demanded, and the offered load (:meth:`Workload.offered_load`) against a capacity in GPUs.
:func:`inspect_trace` loads a file and finds the capacity the trace implies (:func:`default_capacity`).

Command line::

    python -m envs.workload PATH [--format swf|philly|openb|tiresias] [--capacity GPUS] [--json]

``--json`` prints exactly one JSON object (the report) on stdout. Exit status: 0 done; 2 with one line on stderr
for bad arguments, a missing or unreadable file, an unknown format or a malformed trace (``--debug``: the
traceback instead).
"""

from __future__ import annotations

import json
import statistics
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from envs.core.cli import ArgumentParser, at_least, run_cli
from envs.core.job import TraceOutcome
from envs.workload.loaders import TRACE_FORMATS, detect_format, load_trace, natural_cluster
from envs.workload.table import Workload

_DAY_S = 86400.0
_MAX_EXACT_MIX = 16  # more distinct GPU counts than this: the text report shows power-of-two buckets


def gpu_mix(workload: Workload) -> dict[str, int]:
    """Jobs by GPUs asked for: ``{"1": n1, "2": n2, ..., "fractional": nf}``, whole counts in increasing order."""
    counts = Counter(0 if j.is_fractional else j.n_gpus for j in workload.jobs)
    mix = {str(n): counts[n] for n in sorted(counts) if n > 0}
    if counts[0]:
        mix["fractional"] = counts[0]
    return mix


def outcome_counts(workload: Workload) -> dict[str, int]:
    """Jobs by recorded outcome: ``{"pass": n, "failed": n, "killed": n, "unknown": n}`` (the lower-case names of
    :class:`~envs.core.job.TraceOutcome`, in its order), outcomes no job has left out."""
    counts = Counter(j.outcome for j in workload.jobs)
    return {o.name.lower(): counts[o] for o in TraceOutcome if counts[o]}


def priority_counts(workload: Workload) -> dict[str, int]:
    """Jobs by priority class: ``{"0": n0, "1": n1, ...}``, classes in increasing order, empty ones left out."""
    counts = Counter(j.priority for j in workload.jobs)
    return {str(p): counts[p] for p in sorted(counts)}


def gpu_mix_buckets(mix: dict[str, int]) -> dict[str, int]:
    """``gpu_mix`` grouped by powers of two: ``"1"``, ``"2"``, ``"3-4"``, ``"5-8"``, ... and ``"fractional"``."""
    buckets: dict[str, int] = {}
    for key, count in mix.items():
        if key == "fractional":
            label = key
        else:
            upper = 1 << (int(key) - 1).bit_length()  # the power of two at or above the count
            lower = upper // 2 + 1
            label = str(upper) if lower >= upper else f"{lower}-{upper}"
        buckets[label] = buckets.get(label, 0) + count
    return buckets


def inspect_workload(workload: Workload, capacity_gpus: int | None = None) -> dict[str, Any]:
    """A JSON-ready summary of ``workload``; ``offered_load`` is None when ``capacity_gpus`` is None or < 1.

    Times are in seconds (``submit_span_days`` in days), demand in GPU-hours (a fractional job counts its share).
    """
    jobs = workload.jobs
    runtimes = [j.runtime_s for j in jobs]
    first_s = jobs[0].submit_time_s if jobs else None
    last_s = jobs[-1].submit_time_s if jobs else None
    span_s = last_s - first_s if first_s is not None and last_s is not None else 0.0
    skipped_total = sum(workload.skipped.values())
    mix = gpu_mix(workload)
    has_capacity = capacity_gpus is not None and capacity_gpus >= 1
    return {
        "name": workload.name,
        "source": workload.source,
        "records": len(jobs) + skipped_total,
        "jobs": len(jobs),
        "skipped_total": skipped_total,
        "skipped": dict(workload.skipped),
        "gpu_mix": mix,
        "gpu_mix_buckets": gpu_mix_buckets(mix),
        "outcomes": outcome_counts(workload),
        "priorities": priority_counts(workload),
        "submit_first_s": first_s,
        "submit_last_s": last_s,
        "submit_span_s": span_s,
        "submit_span_days": span_s / _DAY_S,
        "runtime_median_s": statistics.median(runtimes) if runtimes else None,
        "runtime_mean_s": statistics.fmean(runtimes) if runtimes else None,
        "runtime_max_s": max(runtimes) if runtimes else None,
        "gpu_hours": sum(j.gpu_share * j.runtime_s for j in jobs) / 3600.0,
        "machine_gpus": workload.machine_gpus,
        "capacity_gpus": capacity_gpus if has_capacity else None,
        "offered_load": workload.offered_load(capacity_gpus) if has_capacity else None,  # type: ignore[arg-type]
    }


def default_capacity(workload: Workload, fmt: str) -> tuple[int | None, str]:
    """(GPUs, where the figure comes from) for a trace of format ``fmt``: those of its natural cluster
    (:func:`~envs.workload.loaders.natural_cluster`); (None, why) when there is none."""
    cluster, source = natural_cluster(fmt, workload.source, workload)
    return (cluster.n_gpus if cluster is not None else None), source


def inspect_trace(path: str | Path, fmt: str | None = None, capacity_gpus: int | None = None) -> dict[str, Any]:
    """Load the trace at ``path`` and summarize it; capacity from ``capacity_gpus`` or else from the trace."""
    fmt = detect_format(path) if fmt is None else fmt
    workload = load_trace(path, fmt)
    if capacity_gpus is None:
        capacity_gpus, capacity_source = default_capacity(workload, fmt)
    else:
        capacity_source = "given"
    return {"format": fmt, **inspect_workload(workload, capacity_gpus), "capacity_source": capacity_source}


def format_report(report: dict[str, Any]) -> str:
    """A report as aligned text lines, for people."""
    jobs = report["jobs"]
    lines = [
        f"{report['name']} ({report.get('format', '?')} trace, {report['source']})",
        f"  records         {report['records']:,}",
        f"  jobs loaded     {jobs:,}",
        f"  skipped         {report['skipped_total']:,}",
    ]
    lines += [f"    {reason:<13} {count:,}" for reason, count in report["skipped"].items()]
    exact = len(report["gpu_mix"]) <= _MAX_EXACT_MIX
    mix = report["gpu_mix"] if exact else report["gpu_mix_buckets"]
    lines.append(f"  GPUs per job    {_shares(mix, jobs)}")
    lines.append(f"  outcome         {_shares(report['outcomes'], jobs)}")
    lines.append(f"  priority class  {_shares(report['priorities'], jobs)}")
    if jobs:
        lines.append(
            f"  submit span     {report['submit_span_s']:,.0f} s = {report['submit_span_days']:.2f} days "
            f"(from {report['submit_first_s']:,.0f} s to {report['submit_last_s']:,.0f} s)"
        )
        lines.append(
            f"  runtime         median {report['runtime_median_s']:,.0f} s, mean {report['runtime_mean_s']:,.0f} s, "
            f"max {report['runtime_max_s']:,.0f} s"
        )
    lines.append(f"  demand          {report['gpu_hours']:,.1f} GPU-hours")
    source = report.get("capacity_source", "")
    if report["offered_load"] is None:
        lines.append(f"  offered load    unknown ({source or 'no capacity'}; pass --capacity GPUS)")
    else:
        lines.append(f"  capacity        {report['capacity_gpus']:,} GPUs ({source})")
        lines.append(f"  offered load    {report['offered_load']:.3f}")
    return "\n".join(lines)


def _shares(counts: dict[str, int], jobs: int) -> str:
    """``"k: n (p%), ..."`` for counts of jobs out of ``jobs``; ``"-"`` when there are none."""
    return ", ".join(f"{k}: {v:,} ({100 * v / jobs:.1f}%)" for k, v in counts.items()) or "-"


def main(argv: Sequence[str] | None = None) -> int:
    """The ``python -m envs.workload`` command; returns the exit status (2 for any user error, in one line)."""
    parser = ArgumentParser(
        prog="python -m envs.workload",
        description="Inspect a workload trace: jobs, skipped records, GPU-count mix, recorded outcomes, priority "
        "classes, submit span, offered load.",
    )
    parser.add_argument("path", help="trace file (.gz is read transparently)")
    parser.add_argument("--format", choices=list(TRACE_FORMATS), help="trace format (default: detected)")
    parser.add_argument(
        "--capacity", type=at_least(1), metavar="GPUS", help="GPUs for the offered load (default: from the trace)"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error instead of its line")
    args = parser.parse_args(argv)

    def report() -> int:
        found = inspect_trace(args.path, args.format, args.capacity)
        print(json.dumps(found, indent=2) if args.json else format_report(found))
        return 0

    return run_cli(parser.prog, report, args.debug)
