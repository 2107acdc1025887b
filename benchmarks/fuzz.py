"""Fuzz every command-line entry point with random mutations of every sample input and config.

Each case writes one mutated copy of a sample file (a trace or operator export from ``tests/data/exports``, a
cluster, workload, scenario or experiment YAML from ``configs/``) and runs the command that reads it, as a user
would, in a subprocess with a time limit. Mutations act on a line at a time: a field replaced by garbage (absurd
numbers such as ``1e308``, ``nan`` and ``9`` × 5,000, non-ASCII digits, control characters, YAML aliases), a line
deleted, duplicated or cut, or random bytes inserted. Outcomes:

- **handled**: exit 0, or exit 2 with a last stderr line ``PROG: error: ...``;
- **traceback**: any other exit, or a ``Traceback`` on stderr;
- **hang**: still running after ``--timeout`` seconds (killed).

The peak memory of every run (its maximum resident set) is reported too. The goal is 0 tracebacks, 0 hangs and a
bounded peak; the exit status is 1 otherwise. Every draw comes from ``--seed``.

    python benchmarks/fuzz.py                      # 8 mutations of each sample: about a minute on 2 cores
    python benchmarks/fuzz.py --n 50 --out runs/fuzz.json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from envs.core.files import write_text_atomically  # noqa: E402

EXPORTS = ROOT / "tests" / "data" / "exports"
CONFIGS = ROOT / "configs"
GARBAGE = ["", "-1", "0", "1e308", "-1e308", "1e-308", "nan", ".nan", ".inf", "-.inf", "9" * 5000, "3_0", "٣", "²",
           "１２", "\x00", "\u2028", "🙂", "[", "]", "{", "}", "&a", "*a", "!!python/object:os.system", "'", '"',
           "true", "null", "~", "- x", ": x", "2147483648", "18446744073709551617", "1e23", "-0"]
"""Field replacements: absurd numbers, non-ASCII digits, control characters, YAML syntax and tags."""
SEPARATORS = "|,= :\t"


@dataclass(frozen=True)
class Case:
    """A sample file and the command that reads it (``{path}`` stands for the mutated copy)."""

    name: str
    sample: Path
    command: list[str]


def cases() -> list[Case]:
    """Every sample input with the entry point that reads it."""
    evaluate = [sys.executable, str(ROOT / "evaluate.py"), "--seeds", "0", "--workers", "1", "--no-plots",
                "--policies", "fcfs+easy", "--json"]
    inspect = [sys.executable, "-m", "envs.workload"]
    found = [
        Case("sacct trace", EXPORTS / "sacct.txt",
             [*evaluate, "--workload", "sacct:{path}", "--cluster", "hetero-64", "--out", "{out}"]),
        Case("sacct inspect", EXPORTS / "sacct.txt", [*inspect, "--format", "sacct", "{path}"]),
        Case("helios inspect", EXPORTS / "helios_cluster_log.csv", [*inspect, "--format", "helios", "{path}"]),
        Case("scontrol nodes", EXPORTS / "scontrol_nodes.txt",
             [*evaluate, "--workload", "small", "--cluster", "scontrol:{path}", "--out", "{out}"]),
        Case("sinfo nodes", EXPORTS / "sinfo_nodes.txt",
             [*evaluate, "--workload", "small", "--cluster", "sinfo:{path}", "--out", "{out}"]),
        Case("kubectl nodes", EXPORTS / "kubectl_nodes.json",
             [*evaluate, "--workload", "small", "--cluster", "kubectl:{path}", "--out", "{out}"]),
        Case("cluster yaml", CONFIGS / "clusters" / "tiny.yaml",
             [*evaluate, "--workload", "small", "--cluster", "{path}", "--out", "{out}"]),
        Case("workload yaml", CONFIGS / "workloads" / "small.yaml",
             [*evaluate, "--workload", "{path}", "--cluster", "tiny", "--out", "{out}"]),
        Case("scenario yaml", CONFIGS / "scenarios" / "flaky.yaml",
             [*evaluate, "--workload", "small", "--cluster", "tiny", "--scenario", "{path}", "--out", "{out}"]),
        Case("experiment yaml", CONFIGS / "experiments" / "default.yaml",
             [sys.executable, str(ROOT / "train.py"), "--config", "{path}", "--total-timesteps", "64", "--no-eval",
              "--no-progress", "--device", "cpu", "--run-dir", "{out}", "--set", "pretrain.episodes=1",
              "--set", "env.episode_jobs=32"]),  # a short run: what is tested is the reading, not the training
    ]
    return found


def mutate(text: str, rng: random.Random) -> str:
    """``text`` with one to three line-level mutations (module docstring)."""
    lines = text.splitlines() or [""]
    for _ in range(rng.randint(1, 3)):
        i = rng.randrange(len(lines))
        op = rng.choice(["field", "field", "field", "delete", "duplicate", "cut", "bytes"])
        line = lines[i]
        if op == "field":
            pieces = [p for p in _split(line)]
            j = rng.randrange(len(pieces))
            pieces[j] = rng.choice(GARBAGE)
            lines[i] = "".join(pieces)
        elif op == "delete" and len(lines) > 1:
            del lines[i]
        elif op == "duplicate":
            lines.insert(i, line)
        elif op == "cut":
            lines[i] = line[: rng.randrange(len(line) + 1)]
        elif op == "bytes":
            at = rng.randrange(len(line) + 1)
            lines[i] = line[:at] + "".join(chr(rng.randrange(1, 0x2FFF)) for _ in range(rng.randint(1, 4))) + line[at:]
    return "\n".join(lines) + "\n"


def _split(line: str) -> list[str]:
    """``line`` as fields and separators, alternating (joined back it is ``line``)."""
    pieces, field = [], ""
    for char in line:
        if char in SEPARATORS:
            pieces += [field, char]
            field = ""
        else:
            field += char
    return [*pieces, field]


def run_case(command: list[str], timeout_s: float) -> tuple[str, float, str]:
    """(outcome, peak memory [MiB], last stderr line) of one run (module docstring)."""
    with tempfile.TemporaryFile() as err:
        process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err,
                                   env={**os.environ, "PYTHONHASHSEED": "0"})
        deadline = time.monotonic() + timeout_s
        while True:  # ends: at the process's exit, or at the deadline
            pid, status, usage = os.wait4(process.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                process.kill()
                _, status, usage = os.wait4(process.pid, 0)
                process.returncode = -9
                return "hang", usage.ru_maxrss / 1024, ""
            time.sleep(0.05)
        process.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        stderr = err.read().decode("utf-8", errors="replace")
    last = next((line for line in reversed(stderr.splitlines()) if line.strip()), "")
    handled = process.returncode == 0 or (process.returncode == 2 and ": error: " in last)
    outcome = "handled" if handled and "Traceback (most recent call last)" not in stderr else "traceback"
    return outcome, usage.ru_maxrss / 1024, last


def fuzz(n: int, seed: int, timeout_s: float, only: Callable[[Case], bool]) -> dict:
    """``n`` mutations of each case's sample, run; the tally per case and the failures."""
    rng = random.Random(seed)
    report: dict = {"seed": seed, "n": n, "timeout_s": timeout_s, "cases": {}, "failures": []}
    with tempfile.TemporaryDirectory() as tmp:
        for case in filter(only, cases()):
            tally = {"handled": 0, "traceback": 0, "hang": 0, "peak_mib": 0.0}
            text = case.sample.read_text()
            for k in range(n):
                mutated = Path(tmp) / f"{k}-{case.sample.name}"
                mutated.write_text(mutate(text, rng), encoding="utf-8", errors="surrogateescape")
                out = Path(tmp) / f"out-{case.name.replace(' ', '-')}-{k}"
                command = [part.replace("{path}", str(mutated)).replace("{out}", str(out)) for part in case.command]
                outcome, peak, last = run_case(command, timeout_s)
                tally[outcome] += 1
                tally["peak_mib"] = max(tally["peak_mib"], peak)
                if outcome != "handled":
                    kept = Path(tmp).parent / f"fuzz-{seed}-{case.name.replace(' ', '-')}-{k}{case.sample.suffix}"
                    kept.write_bytes(mutated.read_bytes())
                    report["failures"].append({"case": case.name, "outcome": outcome, "input": str(kept),
                                               "last_line": last[:300]})
            report["cases"][case.name] = tally
            print(f"{case.name:16} {tally['handled']:4} handled {tally['traceback']:3} tracebacks "
                  f"{tally['hang']:3} hangs, peak {tally['peak_mib']:,.0f} MiB", flush=True)
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=8, help="mutations of each sample (default 8)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds before a run counts as a hang")
    parser.add_argument("--cases", help="comma-separated case names (default: all)")
    parser.add_argument("--out", type=Path, help="write the report (JSON) here")
    args = parser.parse_args()
    wanted = set(args.cases.split(",")) if args.cases else None
    report = fuzz(args.n, args.seed, args.timeout, lambda c: wanted is None or c.name in wanted)
    totals = {k: sum(t[k] for t in report["cases"].values()) for k in ("handled", "traceback", "hang")}
    peak = max((t["peak_mib"] for t in report["cases"].values()), default=0.0)
    print(f"total: {totals['handled']} handled, {totals['traceback']} tracebacks, {totals['hang']} hangs; "
          f"peak memory {peak:,.0f} MiB")
    for failure in report["failures"]:
        print(f"  {failure['outcome']}: {failure['case']}: {failure['input']}: {failure['last_line']}")
    if args.out:
        write_text_atomically(args.out, json.dumps(report, indent=2))
    return 1 if totals["traceback"] or totals["hang"] else 0


if __name__ == "__main__":
    sys.exit(main())
