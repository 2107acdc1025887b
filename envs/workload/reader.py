"""Reading machinery shared by the trace loaders: lines, numbers, CSV rows and the job collector.

Every function here turns bad input into :class:`~envs.core.errors.TraceFormatError` naming the file and the 1-based
line, so that no loader leaks ``ValueError``, ``IndexError`` or ``UnicodeDecodeError``. Files are read whole
(the largest published traces hold a few MB of text); gzip compression is detected by its magic bytes, whatever
the file is called. Lines are split on ``\\n`` only (a trailing ``\\r`` is dropped), so line numbers are those an
editor shows. A file that cannot be opened raises the usual ``OSError`` (it is not malformed, it is absent).
"""

from __future__ import annotations

import gzip
import math
import zlib
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envs.core.errors import ConfigError, JobSpecError, TraceFormatError
from envs.core.files import check_regular
from envs.core.job import MAX_TIME_S, Job
from envs.core.numbers import decimal
from envs.workload.table import Workload

_GZIP_MAGIC = b"\x1f\x8b"
_SNIFF_BYTES = 64 * 1024  # what format detection reads of a file; also the gzip read size
_SHOW_CHARS = 40  # longest field text quoted in full in an error message


MAX_TRACE_BYTES = 2**31
"""The largest trace read, as stored and uncompressed (the largest published traces hold a few hundred MB) [bytes]."""


def read_lines(path: str | Path) -> list[str]:
    """The lines of a text trace (plain or gzip, at most :data:`MAX_TRACE_BYTES` either way), decoded as UTF-8;
    element ``i`` is line ``i + 1``."""
    data = _read_bytes(path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise TraceFormatError(str(path), line, f"byte {data[exc.start]:#04x} is not UTF-8 text") from None
    return [line.removesuffix("\r") for line in text.removeprefix("\ufeff").split("\n")]


def first_line(path: str | Path) -> str:
    """The first non-blank line of a trace, stripped (format sniffing; a damaged file gives what can be read)."""
    check_regular(path, "trace")
    with open(path, "rb") as f:
        head = f.read(_SNIFF_BYTES)
    if head.startswith(_GZIP_MAGIC):
        try:  # a decompressor object, unlike gzip.open, returns what it has from a truncated stream
            head = zlib.decompressobj(wbits=31).decompress(head, _SNIFF_BYTES)
        except zlib.error:
            return ""
    for line in head.decode("utf-8", errors="replace").removeprefix("\ufeff").split("\n"):
        if line.strip():
            return line.strip()
    return ""


def _is_gzip(path: str | Path) -> bool:
    with open(path, "rb") as f:
        return f.read(2) == _GZIP_MAGIC


def _read_bytes(path: str | Path) -> bytes:
    check_regular(path, "trace")
    if not _is_gzip(path):
        with open(path, "rb") as f:
            data = f.read(MAX_TRACE_BYTES + 1)
        if len(data) > MAX_TRACE_BYTES:
            raise ConfigError(f"{path}: larger than {MAX_TRACE_BYTES:,} bytes; not read")
        return data
    chunks: list[bytes] = []
    newlines = size = 0
    with gzip.open(path, "rb") as f:
        try:
            while chunk := f.read(_SNIFF_BYTES):  # ends: the size is bounded below
                chunks.append(chunk)
                newlines += chunk.count(b"\n")
                size += len(chunk)
                if size > MAX_TRACE_BYTES:
                    raise ConfigError(f"{path}: unpacks to more than {MAX_TRACE_BYTES:,} bytes; not read")
        except (OSError, EOFError, zlib.error) as exc:  # gzip.BadGzipFile is an OSError
            raise TraceFormatError(str(path), newlines + 1, f"corrupt gzip data at or after this line: {exc}") from None
    return b"".join(chunks)


def show(text: str) -> str:
    """``text`` quoted for an error message, shortened when long."""
    return repr(text if len(text) <= _SHOW_CHARS else text[:_SHOW_CHARS] + "...")


def _float_or_nan(text: str) -> float:
    value = decimal(text)
    return math.nan if value is None else value


def number(text: str, path: str, line: int, what: str) -> float:
    """``text`` as a finite float, read by the project's one number rule (:mod:`envs.core.numbers`: plain ASCII
    decimals); ``what`` names the field in the error message."""
    value = decimal(text)
    if value is None:
        raise TraceFormatError(path, line, f"{what} {show(text)} is not a number")
    if not math.isfinite(value):
        raise TraceFormatError(path, line, f"{what} {show(text)} is not a finite number")
    return value


MAX_WHOLE = 2**53
"""The largest whole number a field may hold in absolute value (every integer up to it is exact as a float)."""


def whole(text: str, path: str, line: int, what: str, minimum: int | None = None) -> int:
    """``text`` as an integer (``"16"`` or ``"16.0"``), at least ``minimum`` when given, at most :data:`MAX_WHOLE`
    in absolute value."""
    value = _float_or_nan(text)
    if value.is_integer() and (minimum is None or value >= minimum) and abs(value) <= MAX_WHOLE:  # the fast path
        return int(value)
    value = number(text, path, line, what)
    if not value.is_integer():
        raise TraceFormatError(path, line, f"{what} {show(text)} is not a whole number")
    if abs(value) > MAX_WHOLE:
        raise TraceFormatError(path, line, f"{what} {show(text)} is out of range (at most 2^53)")
    raise TraceFormatError(path, line, f"{what} {show(text)} must be >= {minimum}")


def seconds(text: str, path: str, line: int, what: str) -> float:
    """``text`` as a time in [0, ``MAX_TIME_S``] [s] (:data:`envs.core.job.MAX_TIME_S`)."""
    value = _float_or_nan(text)
    if 0 <= value <= MAX_TIME_S:  # false for nan
        return value
    number(text, path, line, what)
    if value > MAX_TIME_S:
        raise TraceFormatError(path, line, f"{what} {show(text)} is out of range (at most {MAX_TIME_S:g} s)")
    raise TraceFormatError(path, line, f"{what} {show(text)} must be >= 0")


def csv_rows(path: str | Path, lines: Sequence[str], columns: Sequence[str]) -> Iterator[tuple[int, list[str]]]:
    """(line number, stripped fields in the order of ``columns``) for every non-blank data row of a CSV trace.

    The first non-blank line is the header; it must name every column of ``columns`` (in any order; extra
    columns are ignored). Fields are split on commas without quoting rules (no published trace quotes its
    fields), so a line number always points at one physical line. A row with another field count than the header
    is malformed.
    """
    where = str(path)
    start = next((i for i, text in enumerate(lines) if text.strip()), 0)
    header = [name.strip() for name in lines[start].split(",")] if lines else []
    missing = [c for c in columns if c not in header]
    if missing:
        raise TraceFormatError(
            where,
            start + 1,
            f"header lacks column(s) {', '.join(missing)}; expected a header like {','.join(columns)}",
        )
    index = [header.index(c) for c in columns]
    width = len(header)
    for lineno, text in enumerate(lines[start + 1 :], start=start + 2):
        if not text.strip():
            continue
        fields = text.split(",")
        if len(fields) != width:
            raise TraceFormatError(where, lineno, f"{len(fields)} fields, but the header has {width}")
        yield lineno, [fields[i].strip() for i in index]


def trace_name(path: str | Path) -> str:
    """A workload name from a file name: ``philly_trace.csv.gz`` → ``philly_trace``."""
    name = Path(path).name
    for suffix in (".gz", ".swf", ".csv", ".txt"):
        name = name.removesuffix(suffix)
    return name or "trace"


def check_comm_sensitivity(value: float) -> float:
    """Validate a loader's ``comm_sensitivity`` argument (in [0, 1])."""
    if not 0 <= value <= 1:
        raise ConfigError(f"comm_sensitivity: must be in [0, 1], got {value}")
    return float(value)


class JobCollector:
    """Collects a loader's jobs and skip counts, then builds the :class:`Workload`.

    Every record registers its job id, loaded or skipped, so a repeated id is reported at its second line.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self.jobs: list[Job] = []
        self.skipped: Counter[str] = Counter()
        self._line_of_id: dict[int, int] = {}

    def claim(self, line: int, job_id: int) -> None:
        """Register ``job_id`` as read at ``line`` (again at the same line is no repeat): a loader that adds its
        jobs later calls it as it reads, so a repeated id is reported at its second line."""
        first = self._line_of_id.setdefault(job_id, line)
        if first != line:
            raise TraceFormatError(self.path, line, f"job id {job_id} repeats the id of line {first}")

    def skip(self, line: int, job_id: int, reason: str) -> None:
        """Count a well-formed but unusable record under ``reason``."""
        self.claim(line, job_id)
        self.skipped[reason] += 1

    def add(self, line: int, **fields: object) -> None:
        """Turn one record into a :class:`Job` (keyword arguments are Job's fields)."""
        job_id = fields["job_id"]
        assert isinstance(job_id, int)
        self.claim(line, job_id)
        try:
            self.jobs.append(Job(**fields))  # type: ignore[arg-type]
        except JobSpecError as exc:
            raise TraceFormatError(self.path, line, str(exc)) from None

    def add_gpu_job(
        self, line: int, job_id: int, submit_s: float, runtime_s: float, n_gpus: int, comm_sensitivity: float
    ) -> None:
        """A whole-GPU job with a perfect estimate; skipped as ``no_gpus`` (n_gpus == 0) or ``zero_runtime``.

        ``comm_sensitivity`` applies to multi-GPU jobs only (a one-GPU job does not communicate).
        """
        if not self.skipped_as_empty(line, job_id, n_gpus, runtime_s):
            self.add(
                line,
                job_id=job_id,
                submit_time_s=submit_s,
                runtime_s=runtime_s,
                runtime_estimate_s=runtime_s,
                n_gpus=n_gpus,
                comm_sensitivity=comm_sensitivity if n_gpus > 1 else 0.0,
            )

    def skipped_as_empty(self, line: int, job_id: int, n_gpus: int, runtime_s: float) -> bool:
        """Skip a job without GPUs (``no_gpus``) or without runtime (``zero_runtime``), as every GPU loader does;
        True when it was skipped."""
        reason = "no_gpus" if n_gpus == 0 else "zero_runtime" if runtime_s == 0 else ""
        if reason:
            self.skip(line, job_id, reason)
        return bool(reason)

    def workload(self, machine_gpus: int = 0) -> Workload:
        """The collected jobs sorted by (submit time, job id), with the skip counts by reason."""
        jobs = tuple(sorted(self.jobs, key=lambda j: (j.submit_time_s, j.job_id)))
        return Workload(
            name=trace_name(self.path),
            jobs=jobs,
            source=self.path,
            skipped=dict(sorted(self.skipped.items())),
            machine_gpus=machine_gpus,
        )


@dataclass(frozen=True)
class PendingJob:
    """A job read from a trace, added once the earliest submit time is known (:func:`add_from_first_submit`)."""

    line: int
    submit_s: float  # on the trace's clock [s]
    fields: dict[str, Any]  # the other Job fields (job_id, runtime_s, n_gpus, ...)


def add_from_first_submit(collector: JobCollector, jobs: Sequence[PendingJob], comm_sensitivity: float) -> None:
    """Add ``jobs`` with submit times counted from the earliest one (so the first job submits at 0);
    ``comm_sensitivity`` goes to the multi-GPU jobs."""
    first_s = min((job.submit_s for job in jobs), default=0.0)
    for job in jobs:
        multi = job.fields["n_gpus"] > 1
        collector.add(
            job.line,
            submit_time_s=job.submit_s - first_s,
            comm_sensitivity=comm_sensitivity if multi else 0.0,
            **job.fields,
        )


def no_jobs_left(path: str | Path, skipped: dict[str, int]) -> ConfigError:
    """The error for a trace none of whose records is a usable job: ``PATH: no jobs left after skipping: ...``."""
    counts = ", ".join(f"{n:,} {reason}" for reason, n in sorted(skipped.items())) or "the file has no record"
    return ConfigError(f"{path}: no jobs left after skipping: {counts}")
