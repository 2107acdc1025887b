"""The runs a run folder holds: ``runs.jsonl``, one JSON line per finished run, appended as each run finishes.

A record is ``{"key": [...], "row": {...}, "trace": {...}, "timing": {...}}``: the run's key
(``evaluate.run_key``: its arguments, input digests and code version), its result row, its trace (per-job data for
the plots, the report and the exports) and its wall-clock figures.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from evaluation.backends import Result

RUNS_FILE = "runs.jsonl"
"""One JSON line per finished run (row, trace, timing), appended as each run finishes."""

def read_records(out: Path, prog: str = "evaluate.py", repair: bool = True) -> dict[str, Result]:
    """The finished runs a run folder holds, by run key. A last line cut short (a killed run, a full disk) is
    skipped, and with ``repair`` (a writer about to append) cut off the file, so that the next record starts on a
    line of its own; any other line that is not a record (not
    JSON, not an object with a key list and row, trace and timing objects) is skipped with a one-line warning
    (standard error, prefixed with ``prog``)."""
    records: dict[str, Result] = {}
    path = out / RUNS_FILE
    if not path.is_file():
        return records
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        kept = data.rfind(b"\n") + 1
        if repair:
            with path.open("r+b") as handle:
                handle.truncate(kept)
        print(f"{prog}: warning: {path}: {'removed' if repair else 'skipped'} a last record cut short "
              f"({len(data) - kept} bytes)", file=sys.stderr)
        data = data[:kept]
    bad = []
    for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        record = _record(line)
        if record is None:
            bad.append(number)
            continue
        records[json.dumps(record["key"])] = (record["row"], record["trace"], record["timing"])
    if bad:
        print(f"{prog}: warning: {path}: skipped {len(bad)} line(s) that are not run records (line "
              f"{', '.join(map(str, bad[:5]))}{', ...' if len(bad) > 5 else ''})", file=sys.stderr)
    return records


def _record(line: str) -> dict[str, Any] | None:
    """The run record on a line of ``runs.jsonl``, or None when the line is not one."""
    try:
        record = json.loads(line)
    except (json.JSONDecodeError, RecursionError):
        return None
    if not isinstance(record, dict) or not isinstance(record.get("key"), list):
        return None
    return record if all(isinstance(record.get(k), dict) for k in ("row", "trace", "timing")) else None
