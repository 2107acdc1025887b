"""SWF traces read exactly as the RLScheduler (SchedGym) peer reads them, for its compatibility mode.

This is *not* the project's SWF loader (:func:`envs.workload.swf.load_swf`, which maps processors to GPUs and
keeps its own filters); it reproduces the peer's reading rules (§1 and §2 of the peer reference's ``SEMANTICS.md``,
in ``../shared/reference`` beside the checkout), so that :mod:`envs.peer.engine` can reproduce the peer's published
heuristic results job for job. Times are in seconds. :func:`peer_trace_once` reads each trace once per process.

Reading rules:

- A line starting with ``;`` (first character) is a comment. Only ``; MaxNodes:`` and ``; MaxProcs:`` (exactly
  that spelling, one space) are read, as integers; when one appears twice the last one wins.
- Every other line is a record of at least 18 white-space separated fields. Each field must be an integer,
  except field 6 (a float) and field 16 (anything). A blank line, a short line or a non-integer field is
  malformed (the peer's loader crashes on it): :class:`~envs.core.errors.TraceFormatError` names the file and line.
- ``job_id`` = field 1, ``submit`` = field 2, ``run`` = field 4, ``procs`` = max(field 5, field 8),
  ``request`` = field 9, or the run time *as read* when field 9 is exactly -1.
- Run time 0: the record is dropped (skip reason ``zero_runtime``). Negative run time: becomes 10 (the request
  time stays as derived above, so -1/-1 gives request -1).
- The kept jobs are sorted by job id; indices into :attr:`PeerTrace.jobs` are the peer's job indices.
  A repeated job id (among kept jobs) is malformed here: the peer's outcome is undefined for it (it keys
  results by job id).
- Machine: ``MaxNodes`` nodes of ``MaxProcs / MaxNodes`` processors each (a float; ``MaxProcs`` absent or 0
  means one processor per node). A missing or non-positive ``MaxNodes`` is malformed (the peer divides by zero).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path

from envs.core.errors import ConfigError, TraceFormatError
from envs.core.numbers import decimal, integer
from envs.workload.reader import no_jobs_left, read_lines, show

_FIELDS = 18
_FLOAT_FIELD = 5  # field 6 (average CPU time) is read as a float
_UNREAD_FIELD = 15  # field 16 (partition) falls back to 0 when it is not an integer
_RUNTIME_FIX_S = 10  # what a negative run time becomes [s]
_HEADERS = {"; MaxNodes:": "MaxNodes", "; MaxProcs:": "MaxProcs"}


@dataclass(frozen=True, slots=True, eq=False)
class PeerJob:
    """One parsed job, as the peer sees it. Equality is identity (a job is itself; keys may be cached per job)."""

    job_id: int
    """SWF field 1."""
    submit: int
    """Submit time [s] from the trace origin (absolute, not relative to a sequence)."""
    run: int
    """Actual run time [s] (> 0; a negative run time in the file reads as 10)."""
    request: int
    """Requested (estimated) run time [s]; may be 0 or negative, exactly as the file says."""
    procs: int
    """Processors: max(allocated, requested); may be 0 or -1."""


@dataclass(frozen=True, slots=True)
class PeerMachine:
    """The peer's cluster: a count of identical nodes, no topology, no node identity."""

    nodes: int
    """Number of nodes (``MaxNodes``)."""
    procs_per_node: float
    """Processors per node (``MaxProcs / MaxNodes``, real division)."""

    def nodes_for(self, procs: int) -> int:
        """Nodes a job of ``procs`` processors occupies: ceil(procs / procs_per_node) (0 or negative allowed)."""
        return math.ceil(procs / self.procs_per_node)


@dataclass(frozen=True)
class PeerTrace:
    """A trace read by the peer's rules: the parsed jobs (sorted by job id) and the machine."""

    jobs: tuple[PeerJob, ...]
    machine: PeerMachine
    source: str = ""
    """Where the jobs came from (a path, plus how they were derived)."""
    skipped: dict[str, int] = field(default_factory=dict)
    """Dropped records by reason (only ``zero_runtime`` exists)."""


def load_swf_peer(path: str | Path) -> PeerTrace:
    """Read an SWF trace (plain or gzip) by the peer's rules; see the module docstring."""
    where = str(path)
    headers: dict[str, int] = {}
    jobs: list[PeerJob] = []
    line_of_id: dict[int, int] = {}
    dropped = 0
    lines = read_lines(path)
    if lines and lines[-1] == "":
        lines.pop()  # the file's final newline ends the last line; it does not start a blank one
    for lineno, text in enumerate(lines, start=1):
        if text.startswith(";"):
            _read_header(text, where, lineno, headers)
            continue
        job = _read_record(text, where, lineno)
        if job is None:
            dropped += 1
            continue
        first = line_of_id.setdefault(job.job_id, lineno)
        if first != lineno:
            raise TraceFormatError(where, lineno, f"job id {job.job_id} repeats the id of line {first}")
        jobs.append(job)
    machine = _machine(headers, where, len(lines))
    jobs.sort(key=lambda j: j.job_id)
    skipped = {"zero_runtime": dropped} if dropped else {}
    return PeerTrace(tuple(jobs), machine, where, skipped)


@lru_cache(maxsize=4)
def peer_trace_once(path: str) -> PeerTrace:
    """The SWF trace at ``path`` (an absolute path) read by the peer's rules, once per process."""
    if not Path(path).exists():
        raise ConfigError(f"trace: {path}: no such file")
    trace = load_swf_peer(path)
    if not trace.jobs:
        raise no_jobs_left(path, dict(trace.skipped))
    return trace


def divide_submits(trace: PeerTrace, divisor: int) -> PeerTrace:
    """The same trace with every submit time replaced by ``submit // divisor`` (integer division).

    ``divide_submits(load_swf_peer(nasa), 2)`` is the reference's contended "NASA submit // 2" variant; the
    division commutes with the reading rules (it changes no run time, job id or order), so it can follow them.
    """
    if divisor < 1:
        raise ConfigError(f"divisor: must be >= 1, got {divisor}")
    jobs = tuple(replace(j, submit=j.submit // divisor) for j in trace.jobs)
    return PeerTrace(jobs, trace.machine, f"{trace.source} (submit // {divisor})", dict(trace.skipped))


def _read_header(text: str, where: str, lineno: int, headers: dict[str, int]) -> None:
    for prefix, key in _HEADERS.items():
        if text.startswith(prefix):
            value = text[len(prefix) :].strip()
            number = integer(value)
            if number is None:
                raise TraceFormatError(where, lineno, f"header {key} value {show(value)} is not an integer")
            headers[key] = number


def _read_record(text: str, where: str, lineno: int) -> PeerJob | None:
    """The job of one record line, or None when the peer drops it (run time 0)."""
    parts = text.split()
    if len(parts) < _FIELDS:
        raise TraceFormatError(where, lineno, f"{len(parts)} fields, but an SWF record has at least {_FIELDS}")
    ints = [integer(t) for t in parts[:_FIELDS]]
    if decimal(parts[_FLOAT_FIELD]) is None or None in ints[:_FLOAT_FIELD] + ints[_FLOAT_FIELD + 1 : _UNREAD_FIELD] \
            + ints[_UNREAD_FIELD + 1 :]:
        raise TraceFormatError(where, lineno, _culprit(parts))
    job_id, submit, _, run, allocated = ints[:5]
    _, requested, request, *_ = ints[6:_UNREAD_FIELD] + ints[_UNREAD_FIELD + 1 : _FIELDS]
    if run == 0:
        return None
    return PeerJob(
        job_id=job_id,
        submit=submit,
        run=run if run > 0 else _RUNTIME_FIX_S,
        request=run if request == -1 else request,  # the run time as read, before the negative fix
        procs=max(allocated, requested),
    )


def _culprit(parts: list[str]) -> str:
    """The error message for a record with a field the peer cannot read."""
    for index, text in enumerate(parts[:_FIELDS]):
        if index == _UNREAD_FIELD:
            continue
        if (decimal(text) if index == _FLOAT_FIELD else integer(text)) is None:
            kind = "a number" if index == _FLOAT_FIELD else "an integer"
            return f"field {index + 1} {show(text)} is not {kind}"
    return "unreadable record"  # not reached: some field failed above


def _machine(headers: dict[str, int], where: str, last_line: int) -> PeerMachine:
    nodes = headers.get("MaxNodes")
    if nodes is None or nodes <= 0:
        found = "no '; MaxNodes:' header" if nodes is None else f"MaxNodes {nodes}"
        raise TraceFormatError(where, max(last_line, 1), f"{found}: the peer needs a positive node count")
    procs = headers.get("MaxProcs", 0)
    if procs < 0:
        raise TraceFormatError(where, max(last_line, 1), f"MaxProcs {procs} is negative")
    return PeerMachine(nodes=nodes, procs_per_node=(procs or nodes) / nodes)
