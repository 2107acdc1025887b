"""Slurm accounting (``sacct --parsable2``) into a :class:`Workload`; also the Slurm states, times and durations
that the Helios loader shares.

The file is the output of, for example::

    sacct --allusers --parsable2 --starttime 2026-11-01 --endtime 2026-12-01 \\
          --format JobID,JobIDRaw,Submit,Start,End,Timelimit,NNodes,Partition,QOS,Account,User,State,ReqTRES,AllocTRES

``|``-separated with its header line (``--parsable``, with a ``|`` ending every line, is read too). Required columns
:data:`SACCT_COLUMNS` and at least one of ReqTRES / AllocTRES, in any order; JobID is optional; other columns are
ignored. A value holding ``|`` would shift the fields: such a line is malformed (its field count is wrong).

Records and jobs:

- **Steps** (JobIDRaw ``123.batch``, ``123.extern``, ``123.0``) are folded into their job: they carry no new job.
  Each is counted under the skip reason ``job_step`` (so that jobs + skipped = records), ``orphan_step`` when
  the file has no record of its job.
- **Array tasks** (JobID ``123_4``) are separate jobs with their own JobIDRaw. A pending array's summary line
  (JobID ``123_[5-9]``) is a pending job (``not_finished``).
- **Heterogeneous jobs** (JobID ``123+0``, ``123+1``, each component with its own JobIDRaw) are folded into one job
  when the JobID column is there (without it, each component is a job of its own): job id = component 0's
  JobIDRaw; GPUs, CPUs and memory summed over the components; submit and start the earliest, end the latest, time
  limit the longest; user, account, QOS and state those of component 0; partition that of the component with the
  most GPUs (component 0 on a tie). Every component after the first counts as ``het_component``.
- **Requeued runs**: records repeating a JobIDRaw (``sacct --duplicates`` prints every run of a requeued job,
  oldest first) are runs of one job: the last is the job, the earlier ones count as ``requeued_run``, and so does a
  record in state REQUEUED (a run that was requeued, whose next run the file does not hold). The replay runs the
  last run only: the work lost to the requeues is not replayed. (Two different jobs sharing an id after a
  database reset would be read as one job's runs.)

Mapping of a job record (times in s):

- ``job_id`` = JobIDRaw (an integer).
- ``submit_time_s`` = Submit − the earliest Submit of the loaded jobs (the first job submits at 0). Slurm prints
  local time without a zone (``2026-11-30T12:00:00``), so a difference across a daylight-saving change is off by
  the change.
- ``runtime_s`` = End − Start.
- ``runtime_estimate_s`` = Timelimit (``[days-]hours:minutes:seconds`` or ``minutes:seconds``, as sacct prints
  it); ``UNLIMITED``, ``Partition_Limit`` (no limit of its own) or 0: the runtime (a perfect estimate).
- ``n_gpus`` = the ``gres/gpu=N`` count of AllocTRES (what the job held) when the column is there and not empty,
  else of ReqTRES; a typed form ``gres/gpu:a100=2`` counts when no untyped one is given.
- ``gpu_types`` = the typed ``gres/gpu:TYPE`` entries of ReqTRES (what the user asked for; empty: any type), or of
  AllocTRES when there is no ReqTRES column, resolved to the GPU-type table by
  :func:`~envs.workload.operators.node_inventory.gpu_type_for` as the Slurm node loaders resolve node gres (``a100`` →
  ``A100-40GB``), so that a replay on a ``scontrol:`` or ``sinfo:`` cluster of the same site matches.
- ``cpu_milli_per_gpu`` = ceil(1000 × ``cpu=`` / n_gpus), ``ram_mib_per_gpu`` = ceil(``mem=`` / n_gpus), from the
  same TRES as the count; mem is in K/M/G/T/P (binary: K = 1/1024 MiB, M = MiB, G = 1024 MiB, ...; no unit: MiB).
  Other TRES (billing, node, energy, licenses) are ignored.
- ``user`` = User, ``team`` = Account, ``partition`` = Partition (its first entry: a pending job lists all it may
  run in), ``qos`` = QOS; ``priority`` = 0 (a QOS's priority is not in the file).
- ``outcome`` = State by :data:`SLURM_STATE_OUTCOME`: COMPLETED → PASS; FAILED, NODE_FAIL, OUT_OF_MEMORY, BOOT_FAIL
  → FAILED; TIMEOUT, CANCELLED (``CANCELLED by 1234`` too), PREEMPTED, DEADLINE → KILLED. A replay runs every job
  for its recorded time, whatever its outcome.
- ``comm_sensitivity`` = the loader's argument for multi-GPU jobs, 0 otherwise. NNodes is checked, not used: the
  simulator's placement rules choose the nodes.

Skip reasons (each job counted once, in this order; the record counts above aside):

- ``not_finished``: a state of :data:`SLURM_UNFINISHED` (PENDING, RUNNING, SUSPENDED, COMPLETING, ...).
- ``revoked``: REVOKED (a federation sibling that ran on another cluster).
- ``requeued_run``: REQUEUED (above).
- ``never_started``: Start is ``Unknown`` or ``None`` (cancelled while pending).
- ``no_gpus``: 0 GPUs (a CPU job), as the other GPU loaders.
- ``zero_runtime``: End == Start.

Malformed (:class:`~envs.core.errors.TraceFormatError` naming the file and line): a header without the required
columns, a line with another field count, a JobIDRaw that is not ``N`` or ``N.STEP``, a JobID het offset that is not
a whole number, a state not listed here, a time that is not ``YYYY-MM-DDTHH:MM:SS`` (or Unknown / None where
allowed: an unknown End of a finished job is malformed), a Timelimit not in the forms above, a NNodes or TRES count
that is not a whole number >= 0, a TRES entry without ``=``, a mem that is not a size, Start before Submit or End
before Start.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from envs.core.errors import TraceFormatError
from envs.core.gpu_types import DEFAULT_GPU_TYPES
from envs.core.job import MAX_TIME_S, TraceOutcome
from envs.core.numbers import integer
from envs.workload.operators.node_inventory import gpu_type_for
from envs.workload.reader import (
    JobCollector,
    PendingJob,
    add_from_first_submit,
    check_comm_sensitivity,
    read_lines,
    show,
    whole,
)
from envs.workload.table import Workload

SACCT_COLUMNS = (
    "JobIDRaw",
    "Submit",
    "Start",
    "End",
    "Timelimit",
    "NNodes",
    "Partition",
    "QOS",
    "Account",
    "User",
    "State",
)
"""The columns a sacct header must name (with at least one of :data:`SACCT_TRES_COLUMNS`)."""

SACCT_TRES_COLUMNS = ("AllocTRES", "ReqTRES")
"""The TRES columns, in the order their GPU count is preferred."""

SLURM_STATE_OUTCOME: Mapping[str, TraceOutcome] = {
    "COMPLETED": TraceOutcome.PASS,
    "FAILED": TraceOutcome.FAILED,
    "NODE_FAIL": TraceOutcome.FAILED,
    "OUT_OF_MEMORY": TraceOutcome.FAILED,
    "BOOT_FAIL": TraceOutcome.FAILED,
    "TIMEOUT": TraceOutcome.KILLED,
    "CANCELLED": TraceOutcome.KILLED,
    "PREEMPTED": TraceOutcome.KILLED,
    "DEADLINE": TraceOutcome.KILLED,
}
"""Recorded outcome of each final Slurm job state (Slurm's job state codes); see the module docstring."""

SLURM_UNFINISHED = (
    "PENDING",
    "RUNNING",
    "SUSPENDED",
    "COMPLETING",
    "CONFIGURING",
    "RESIZING",
    "REQUEUE_HOLD",
    "REQUEUE_FED",
    "SPECIAL_EXIT",
    "STAGE_OUT",
    "SIGNALING",
    "STOPPED",
    "RESV_DEL_HOLD",
)
"""Slurm states (and the state flags sacct shows in their place) of a job that has not finished: skipped."""

SLURM_STATE_SKIP: Mapping[str, str] = {
    **{state: "not_finished" for state in SLURM_UNFINISHED},
    "REVOKED": "revoked",
    "REQUEUED": "requeued_run",
}
"""Skip reason of each Slurm state that is not a final one."""

_TIME = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}:[0-9]{2}$")
_NO_TIME = ("Unknown", "None", "")
MAX_MEM_MIB = 1e12
"""The largest memory a job may ask for [MiB]."""
_DURATION = re.compile(r"^(?:(?:([0-9]{1,9})-)?([0-9]{1,9}):)?([0-9]{1,9}):([0-9]{1,9})$")
_NO_LIMIT = ("unlimited", "partition_limit")
_MEM = re.compile(r"^([0-9]{1,15}(?:\.[0-9]{1,15})?)([KMGTP]?)$")
_MEM_MIB = {"K": 1 / 1024, "": 1, "M": 1, "G": 1024, "T": 1024**2, "P": 1024**3}
_EPOCH = datetime(1970, 1, 1)


def slurm_state(text: str, where: str, line: int) -> TraceOutcome | str:
    """The outcome of a final Slurm state, or the skip reason of another (``CANCELLED by 1234`` is CANCELLED)."""
    words = text.split()
    state = words[0] if words else ""
    if state in SLURM_STATE_OUTCOME:
        return SLURM_STATE_OUTCOME[state]
    if state in SLURM_STATE_SKIP:
        return SLURM_STATE_SKIP[state]
    raise TraceFormatError(
        where,
        line,
        f"state {show(text)} is not a Slurm job state (known: {', '.join([*SLURM_STATE_OUTCOME, *SLURM_STATE_SKIP])})",
    )


def slurm_time(text: str, where: str, line: int, what: str) -> float | None:
    """A Slurm time stamp (``2026-11-30T12:00:00``, or with a space: Helios) as seconds since 1970-01-01 of the same
    clock; None for ``Unknown``, ``None`` or empty."""
    if text in _NO_TIME:
        return None
    if _TIME.match(text):
        try:
            return (datetime.fromisoformat(text) - _EPOCH).total_seconds()
        except ValueError:
            pass
    raise TraceFormatError(where, line, f"{what} {show(text)} is not a time like 2026-11-30T12:00:00")


def slurm_duration(text: str, where: str, line: int, what: str) -> float | None:
    """A Slurm duration (``[days-]hours:minutes:seconds`` or ``minutes:seconds``) [s]; None for ``UNLIMITED`` and
    ``Partition_Limit``."""
    if text.lower() in _NO_LIMIT:
        return None
    match = _DURATION.match(text)
    if match:
        days, hours, minutes, secs = (int(g) if g else 0 for g in match.groups())
        total_s = float(((days * 24 + hours) * 60 + minutes) * 60 + secs)
        if minutes < 60 and secs < 60 and (hours < 24 or match.group(1) is None) and total_s <= MAX_TIME_S:
            return total_s
    raise TraceFormatError(
        where,
        line,
        f"{what} {show(text)} is not [days-]hours:minutes:seconds (at most {MAX_TIME_S:g} s), minutes:seconds, "
        "UNLIMITED or Partition_Limit",
    )


@dataclass(frozen=True)
class _Tres:
    """What one TRES string counts: GPUs, their types, CPUs and memory [MiB]."""

    gpus: int
    types: frozenset[str]
    cpus: int
    mem_mib: int


def _tres(text: str, where: str, line: int, what: str) -> _Tres:
    untyped: int | None = None
    typed: dict[str, int] = {}
    cpus = mem_mib = 0
    for entry in text.split(",") if text else ():
        key, eq, value = entry.partition("=")
        if not eq:
            raise TraceFormatError(where, line, f"{what} entry {show(entry)} is not NAME=VALUE")
        if key == "gres/gpu":
            untyped = whole(value, where, line, f"{what} gres/gpu", minimum=0)
        elif key.startswith("gres/gpu:"):
            model = gpu_type_for(key[len("gres/gpu:") :], DEFAULT_GPU_TYPES).name
            typed[model] = typed.get(model, 0) + whole(value, where, line, f"{what} {key}", minimum=0)
        elif key == "cpu":
            cpus = whole(value, where, line, f"{what} cpu", minimum=0)
        elif key == "mem":
            match = _MEM.match(value)
            if not match:
                raise TraceFormatError(where, line, f"{what} mem {show(value)} is not a size like 64G or 2000M")
            mem_mib = math.ceil(float(match.group(1)) * _MEM_MIB[match.group(2)])
            if mem_mib > MAX_MEM_MIB:
                raise TraceFormatError(where, line, f"{what} mem {show(value)} is out of range (at most "
                                                    f"{MAX_MEM_MIB:g} MiB)")
    gpus = untyped if untyped is not None else sum(typed.values())
    return _Tres(gpus, frozenset(t for t, n in typed.items() if n > 0), cpus, mem_mib)


@dataclass(frozen=True)
class _Record:
    """One line of the file."""

    line: int
    fields: dict[str, str]  # column -> value
    raw_id: int  # JobIDRaw without its step
    step: bool  # a job step, folded into its job
    offset: int  # heterogeneous job component offset (0 for other jobs)


def load_sacct(path: str | Path, comm_sensitivity: float = 0.5) -> Workload:
    """Read a ``sacct --parsable2`` output (plain or gzip); ``comm_sensitivity`` in [0, 1] is given to multi-GPU
    jobs."""
    comm = check_comm_sensitivity(comm_sensitivity)
    where = str(path)
    collector = JobCollector(path)
    groups: dict[str, list[_Record]] = {}
    for record, key in _records(where, read_lines(path)):
        groups.setdefault(key, []).append(record)
    jobs = [job for records in groups.values() if (job := _job(records, collector)) is not None]
    add_from_first_submit(collector, jobs, comm)
    return collector.workload()


def _records(where: str, lines: Sequence[str]) -> list[tuple[_Record, str]]:
    """(record, group key) of every data line: the key is the job a line belongs to (see the module docstring)."""
    start = next((i for i, text in enumerate(lines) if text.strip()), 0)
    header_text = lines[start] if lines else ""
    trailing = header_text.endswith("|")  # sacct --parsable ends every line with the delimiter
    header = (header_text[:-1] if trailing else header_text).split("|")
    missing = [c for c in SACCT_COLUMNS if c not in header]
    if missing or not any(c in header for c in SACCT_TRES_COLUMNS):
        lacks = ", ".join(missing + ([] if any(c in header for c in SACCT_TRES_COLUMNS) else ["ReqTRES or AllocTRES"]))
        raise TraceFormatError(
            where,
            start + 1,
            f"header lacks column(s) {lacks}; expected sacct --parsable2 output "
            f"with a header like {'|'.join(SACCT_COLUMNS)}|AllocTRES",
        )
    width = len(header)
    out: list[tuple[_Record, str]] = []
    for lineno, text in enumerate(lines[start + 1 :], start=start + 2):
        if not text.strip():
            continue
        values = (text[:-1] if trailing and text.endswith("|") else text).split("|")
        if len(values) != width:
            raise TraceFormatError(where, lineno, f"{len(values)} fields, but the header has {width}")
        fields = dict(zip(header, (v.strip() for v in values), strict=True))
        raw_text = fields["JobIDRaw"]
        base, dot, step_name = raw_text.partition(".")
        if integer(base) is None or base[:1] in "+-" or (dot and not step_name):
            raise TraceFormatError(where, lineno, f"JobIDRaw {show(raw_text)} is not N or N.STEP")
        key, offset = base, 0
        if fields.get("JobID"):
            job_text = fields["JobID"].partition(".")[0]
            key, plus, offset_text = job_text.partition("+")
            if plus:
                offset = whole(offset_text, where, lineno, f"JobID {show(fields['JobID'])} het offset", minimum=0)
        out.append((_Record(lineno, fields, int(base), bool(dot), offset), key))
    return out


def _job(records: list[_Record], collector: JobCollector) -> PendingJob | None:
    """The job of one group of records (or None when it is skipped), counting the folded records."""
    where = collector.path
    allocations = [r for r in records if not r.step]
    steps = len(records) - len(allocations)
    if steps:
        collector.skipped["job_step" if allocations else "orphan_step"] += steps
    if not allocations:
        return None
    last_run: dict[tuple[int, int], _Record] = {}
    for record in allocations:  # file order: a repeated id is a later run of a requeued job
        if (record.offset, record.raw_id) in last_run:
            collector.skipped["requeued_run"] += 1
        last_run[(record.offset, record.raw_id)] = record
    components = sorted(last_run.values(), key=lambda r: (r.offset, r.line))
    leader = components[0]
    if len(components) > 1:
        collector.skipped["het_component"] += len(components) - 1
    outcome = slurm_state(leader.fields["State"], where, leader.line)
    if isinstance(outcome, str):
        collector.skip(leader.line, leader.raw_id, outcome)
        return None
    submits, starts, ends = [], [], []
    for c in components:
        whole(c.fields["NNodes"], where, c.line, "NNodes", minimum=0)
        submits.append(required_time(c.fields["Submit"], where, c.line, "Submit"))
        starts.append(slurm_time(c.fields["Start"], where, c.line, "Start"))
        ends.append(slurm_time(c.fields["End"], where, c.line, "End"))
    if None in starts:
        collector.skip(leader.line, leader.raw_id, "never_started")
        return None
    for c, submit, start, end in zip(components, submits, starts, ends, strict=True):
        if end is None:
            raise TraceFormatError(
                where, c.line, f"End {show(c.fields['End'])} of a finished job ({c.fields['State']}) is not a time"
            )
        if start < submit:
            raise TraceFormatError(where, c.line, "Start is before Submit")
        if end < start:
            raise TraceFormatError(where, c.line, "End is before Start")
    runtime_s = max(ends) - min(starts)
    limits = [slurm_duration(c.fields["Timelimit"], where, c.line, "Timelimit") for c in components]
    limit_s = 0.0 if None in limits else max(limits)  # 0: no limit of its own
    counts = [_job_tres(c, where) for c in components]
    n_gpus = sum(tres.gpus for tres, _ in counts)
    if collector.skipped_as_empty(leader.line, leader.raw_id, n_gpus, runtime_s):
        return None
    most_gpus = max(range(len(components)), key=lambda i: counts[i][0].gpus)  # the first on a tie
    f = leader.fields
    return PendingJob(
        leader.line,
        min(submits),
        {
            "job_id": leader.raw_id,
            "runtime_s": runtime_s,
            "runtime_estimate_s": limit_s if limit_s > 0 else runtime_s,
            "n_gpus": n_gpus,
            "gpu_types": frozenset().union(*(types for _, types in counts)),
            "cpu_milli_per_gpu": -(-1000 * sum(tres.cpus for tres, _ in counts) // n_gpus),
            "ram_mib_per_gpu": -(-sum(tres.mem_mib for tres, _ in counts) // n_gpus),
            "user": f["User"] or "-",
            "team": f["Account"] or "-",
            "partition": components[most_gpus].fields["Partition"].split(",")[0],
            "qos": f["QOS"],
            "outcome": outcome,
        },
    )


def _job_tres(record: _Record, where: str) -> tuple[_Tres, frozenset[str]]:
    """(what the record counts, the GPU types it asks for): AllocTRES when there and not empty, else ReqTRES; the
    types from ReqTRES when that column is there (see the module docstring)."""
    found = {c: _tres(record.fields[c], where, record.line, c) for c in SACCT_TRES_COLUMNS if c in record.fields}
    use_alloc = "AllocTRES" in found and (bool(record.fields["AllocTRES"]) or "ReqTRES" not in found)
    counted = found["AllocTRES"] if use_alloc else found["ReqTRES"]
    types = found["ReqTRES"].types if "ReqTRES" in found else found["AllocTRES"].types
    return counted, types


def required_time(text: str, where: str, line: int, what: str) -> float:
    """A Slurm time stamp that must be there (:func:`slurm_time`; Unknown or None is malformed)."""
    value = slurm_time(text, where, line, what)
    if value is None:
        raise TraceFormatError(where, line, f"{what} {show(text)} is not a time like 2026-11-30T12:00:00")
    return value
