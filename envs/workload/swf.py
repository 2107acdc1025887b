"""Standard Workload Format (SWF) traces of the Parallel Workloads Archive, into a :class:`Workload`.

One record per line, 18 numeric fields separated by white space, ``-1`` for unknown; lines starting with ``;``
are comments, and header comments ``; MaxProcs: N`` / ``; MaxNodes: N`` give the machine size.

Reading rules (this project's own; times in seconds):

- ``job_id`` = field 1, ``submit_time_s`` = field 2, ``runtime_s`` = field 4 (run time).
- ``n_gpus`` = field 8 (requested processors) if > 0, else field 5 (allocated processors): one processor is one
  GPU-equivalent of the SWF machine (see :func:`envs.core.cluster.swf_machine`).
- ``runtime_estimate_s`` = field 9 (requested time) if > 0, else the run time (a perfect estimate).
- ``user`` = ``f"u{field 12}"``, ``team`` = ``f"g{field 13}"`` (unknown, -1, gives ``"u-1"`` / ``"g-1"``).
- ``machine_gpus`` = the ``MaxProcs`` header, else ``MaxNodes``, else 0 (a value <= 0 counts as absent; when a
  header appears twice the last one wins).
- ``outcome`` = field 11 (status) by :data:`SWF_STATUS_OUTCOME`, the Parallel Workloads Archive's codes: 1
  (completed) → ``PASS``, 0 (failed) → ``FAILED``, 5 (cancelled) → ``KILLED``, 3 (last partial execution, the job
  completed) → ``PASS``, 4 (last partial execution, the job failed) → ``FAILED``; 2 (a partial execution to be
  continued), -1 (unknown) and any other value → ``UNKNOWN``. It is reported only: a failed or cancelled job
  that ran still used its processors, and a replay runs it for its recorded run time. In the published logs:
  Lublin-1 10,000 × 1; NASA iPSC 18,239 × -1; LLNL Atlas 21,915 × 1, 10,431 × 0, 11,432 × 5 (records, skipped
  ones included).
- ``priority`` = ``queue_priority[field 15]`` (queue number) when the loader is given ``queue_priority``, a
  mapping from queue numbers to priority classes (higher is more important; a queue the mapping lacks, -1
  included, gets 0); without it, 0 for every job: SWF queue numbers are labels of a site's queues and carry no
  order, so only the user of a log can say which queue is the more important.
- ``partition`` = field 16 (partition number) as text when >= 0, else ``""``; it matters only on a cluster that
  defines partitions of those names (:mod:`envs.core.governance`).
- Every other field keeps the Job default: SWF jobs are rigid (communication sensitivity 0, any GPU type).
- Fields may be written as floats (``"12.5"``): times keep their fractions; job id, processor counts and
  user/group ids must be whole numbers (``"16.0"`` is fine).

Malformed input raises :class:`~envs.core.errors.TraceFormatError` naming the file and line: a data line without
exactly 18 fields; a field that is not a finite number (``nan`` and ``inf`` included); a fractional job id,
processor count or user/group id (or queue number, when ``queue_priority`` is given); a repeated job id; a
``MaxProcs`` / ``MaxNodes`` header whose value is not a whole number. A ``queue_priority`` whose keys or values
are not integers raises :class:`~envs.core.errors.ConfigError`.

Skip reasons (records that are well-formed but unusable; checked in this order, each record counted once):

- ``unknown_submit``: submit time < 0 (-1 = unknown).
- ``unknown_runtime``: run time < 0 (-1 = unknown).
- ``zero_runtime``: run time == 0 (mostly jobs cancelled before they started).
- ``no_processors``: neither field 8 nor field 5 is > 0.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

from envs.core.cluster import MAX_GPUS
from envs.core.errors import ConfigError, TraceFormatError
from envs.core.job import TraceOutcome
from envs.core.numbers import decimal
from envs.workload.reader import JobCollector, number, read_lines, whole
from envs.workload.table import Workload

SWF_FIELDS = (
    "job number", "submit time", "wait time", "run time", "allocated processors", "average CPU time",
    "used memory", "requested processors", "requested time", "requested memory", "status", "user id",
    "group id", "executable number", "queue number", "partition number", "preceding job", "think time",
)  # fmt: skip
"""The 18 SWF fields, in file order (field k of the format is ``SWF_FIELDS[k - 1]``)."""

SWF_STATUS_OUTCOME: Mapping[int, TraceOutcome] = {
    1: TraceOutcome.PASS,
    0: TraceOutcome.FAILED,
    5: TraceOutcome.KILLED,
    3: TraceOutcome.PASS,
    4: TraceOutcome.FAILED,
}
"""Recorded outcome of each SWF status code (field 11); any other code, -1 and 2 included, is ``UNKNOWN``."""

_MACHINE_HEADERS = ("MaxProcs", "MaxNodes")  # in order of preference
_STATUS, _QUEUE, _PARTITION = 10, 14, 15  # 0-based indices of fields 11 (status), 15 (queue), 16 (partition)


def load_swf(path: str | Path, queue_priority: Mapping[int, int] | None = None) -> Workload:
    """Read an SWF trace (plain or gzip); see the module docstring for the field mapping and skip reasons.

    ``queue_priority`` maps queue numbers (field 15) to priority classes; None (the default) gives every job
    priority 0.
    """
    queues = _check_queue_priority(queue_priority)
    where = str(path)
    collector = JobCollector(path)
    headers: dict[str, int] = {}
    for lineno, raw in enumerate(read_lines(path), start=1):
        text = raw.strip()
        if not text:
            continue
        if text.startswith(";"):
            _read_header(text, where, lineno, headers)
        else:
            _read_record(text.split(), where, lineno, collector, queues)
    machine_gpus = next((headers[k] for k in _MACHINE_HEADERS if headers.get(k, 0) > 0), 0)
    return collector.workload(machine_gpus=machine_gpus)


def _check_queue_priority(queue_priority: Mapping[int, int] | None) -> dict[int, int] | None:
    if queue_priority is None:
        return None
    if not isinstance(queue_priority, Mapping):
        raise ConfigError(f"queue_priority: must be a mapping of queue number to priority, got {queue_priority!r}")
    for queue, priority in queue_priority.items():
        for what, value in (("queue number", queue), ("priority", priority)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConfigError(f"queue_priority: {what} {value!r} must be an integer")
    return dict(queue_priority)


def _what(index: int) -> str:
    return f"field {index + 1} ({SWF_FIELDS[index]})"


def _read_header(text: str, where: str, lineno: int, headers: dict[str, int]) -> None:
    key, colon, value = text[1:].partition(":")
    key = key.strip()
    if colon and key in _MACHINE_HEADERS:
        tokens = value.split()
        size = whole(tokens[0] if tokens else "", where, lineno, f"header {key}")
        if size > MAX_GPUS:
            raise TraceFormatError(where, lineno, f"header {key} {size:g} is past the largest machine modelled "
                                                  f"({MAX_GPUS:,} processors)")
        headers[key] = size


def _values(parts: list[str], where: str, lineno: int) -> list[float]:
    if len(parts) != len(SWF_FIELDS):
        raise TraceFormatError(where, lineno, f"{len(parts)} fields, but an SWF record has {len(SWF_FIELDS)}")
    values = [decimal(p) for p in parts]  # the one number rule: plain ASCII decimals
    if None in values or not all(map(math.isfinite, values)):
        # Slow path, only for a bad line: find the field to blame (number() raises).
        values = [number(p, where, lineno, _what(i)) for i, p in enumerate(parts)]
    return values


def _read_record(
    parts: list[str], where: str, lineno: int, collector: JobCollector, queues: dict[int, int] | None
) -> None:
    values = _values(parts, where, lineno)

    def integer(index: int) -> int:
        if values[index].is_integer():
            return int(values[index])
        return whole(parts[index], where, lineno, _what(index))  # raises: not a whole number

    job_id = integer(0)
    submit_s, runtime_s = values[1], values[3]
    procs_index = 7 if values[7] > 0 else 4
    if submit_s < 0:
        reason = "unknown_submit"
    elif runtime_s < 0:
        reason = "unknown_runtime"
    elif runtime_s == 0:
        reason = "zero_runtime"
    elif values[procs_index] <= 0:
        reason = "no_processors"
    else:
        collector.add(
            lineno,
            job_id=job_id,
            submit_time_s=submit_s,
            runtime_s=runtime_s,
            runtime_estimate_s=values[8] if values[8] > 0 else runtime_s,
            n_gpus=integer(procs_index),
            user=f"u{integer(11)}",
            team=f"g{integer(12)}",
            priority=0 if queues is None else queues.get(integer(_QUEUE), 0),
            outcome=_outcome(values[_STATUS]),
            partition=str(integer(_PARTITION)) if values[_PARTITION] >= 0 else "",
        )
        return
    collector.skip(lineno, job_id, reason)


def _outcome(status: float) -> TraceOutcome:
    """The outcome of SWF status ``status`` (field 11); a fractional status is no known code: ``UNKNOWN``."""
    return SWF_STATUS_OUTCOME.get(int(status), TraceOutcome.UNKNOWN) if status.is_integer() else TraceOutcome.UNKNOWN
