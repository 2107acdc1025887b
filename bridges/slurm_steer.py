"""Steer a running Slurm with any gpusched policy: a daemon that ranks the pending jobs with the policy and writes
the ranking into Slurm as priorities, nothing else.

    python -m bridges.slurm_steer --policy sjf --dry-run --once          # print what it would set, then stop
    python -m bridges.slurm_steer --policy sjf --period 10               # steer until stopped (Ctrl-C, SIGTERM)

Each tick (every ``--period`` seconds, on a fixed grid from the first tick, so ticks do not drift):

1. **read** ``squeue --json``, ``sinfo --json`` and ``sprio -h -o "%i %S"`` (the site factor of each pending job;
   22.05's JSON lacks it), each under ``--timeout`` seconds;
2. **rank** the pending GPU jobs with the policy on a mirror of the cluster (:mod:`bridges.slurm_state`,
   :func:`baselines.ranking.rank_jobs`): an order, a two-stage order, a ``k8s:`` profile, a trained model
   (``PATH/model.zip``) or the lookahead planner (``--futures WORKLOAD`` gives the streams it draws futures from);
3. **write** the values of :func:`baselines.ranking.site_factors` (``--scale`` × (jobs − rank), first ranked
   highest) with ``scontrol update JobId=N SiteFactor=V`` to each job whose value differs from what Slurm holds,
   at most ``--max-updates`` per tick (the first ranked first). With ``--field Priority`` it writes
   ``Priority=V+1`` instead: a strict order in which Slurm's age, fair share and QOS no longer count (Slurm then
   never recalculates those jobs' priorities).

Why the site factor: under ``PriorityType=priority/multifactor`` Slurm adds a job's site factor to its priority and
keeps it through every ``PriorityCalcPeriod`` recalculation when no site-factor plugin is configured
(``PrioritySiteFactorPlugin`` unset, i.e. ``site_factor/none``): checked on Slurm 22.05.8, where a job's SITE stayed
5000 across recalculations while its AGE rose (``docs/bridges/slurm-steering.md``). Slurm's own factors, fair share,
backfill and limits keep working. The daemon refuses to start (one line) when the priority type is not multifactor
or a site-factor plugin would overwrite its values.

What it never does: cancel, hold, release, requeue or modify any other field of a job, or touch a running job.
Every command goes through :func:`checked`, which refuses anything but the reads above and ``scontrol update
JobId=<n> SiteFactor=<n>`` / ``Priority=<n>``. Each write is one ``scontrol`` call that Slurm applies atomically,
so the daemon can be stopped at any moment: a job holds either its old or its new value, both valid priorities.
Writes are idempotent (a value already held is not written again).

Slurm down or slow: a command that fails or runs past ``--timeout`` is a one-line warning on standard error; the
tick is abandoned and the next one comes after a back-off (``--period``, doubling up to :data:`MAX_BACKOFF_S`).
With ``--log PATH`` each write is appended as one JSON line (Unix time, job, field, old and new value) — the live
harness uses it to compare the simulated twin with the real run.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from baselines.lookahead import LOOKAHEAD_PREFIX
from baselines.ranking import rank_jobs, site_factors
from baselines.slurm import STEER_FIELDS
from bridges.slurm_state import SlurmOutputError, mirror, snapshot
from envs.core.cli import ArgumentParser, at_least, run_cli
from envs.core.errors import ConfigError
from evaluation.runner import RunSpec, make_policy

PROG = "slurm_steer"
SQUEUE = ("squeue", "--json")
SINFO = ("sinfo", "--json")
SPRIO = ("sprio", "-h", "-o", "%i %S")
CONFIG = ("scontrol", "show", "config")
READS = (SQUEUE, SINFO, SPRIO, CONFIG)
"""The only read commands the daemon runs."""
_UPDATE = re.compile(r"JobId=([0-9]{1,10})")
_VALUE = {"SiteFactor": re.compile(r"SiteFactor=(-?[0-9]{1,10})"), "Priority": re.compile(r"Priority=([0-9]{1,10})")}
MAX_SITE_FACTOR = 2_147_483_645
"""The largest site factor Slurm takes (scontrol: ±2147483645)."""
MAX_BACKOFF_S = 60.0
"""The longest wait after failed ticks [s]."""


class RefusedCommand(ConfigError):
    """A command the daemon must never run."""


class SlurmUnavailable(ConfigError):
    """A Slurm command failed, was missing or ran past its timeout (one line)."""


def checked(argv: Sequence[str]) -> tuple[str, ...]:
    """``argv`` when it is one of :data:`READS` or ``scontrol update JobId=<n> <Field>=<n>`` with Field in
    SiteFactor, Priority; else :class:`RefusedCommand`."""
    argv = tuple(argv)
    if argv in READS:
        return argv
    if (len(argv) == 4 and argv[:2] == ("scontrol", "update") and _UPDATE.fullmatch(argv[2])
            and any(pattern.fullmatch(argv[3]) for pattern in _VALUE.values())):
        return argv
    raise RefusedCommand(f"refused to run {' '.join(argv)!r}: the daemon only reads and writes SiteFactor or Priority")


Runner = Callable[[Sequence[str], float], str]
"""Runs a command with a timeout [s] and returns its standard output, or raises :class:`SlurmUnavailable`."""


def run_command(argv: Sequence[str], timeout_s: float, env: Mapping[str, str] | None = None) -> str:
    """The default :data:`Runner`: a subprocess (no shell; ``env``: its environment, default this one's), its
    standard output."""
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout_s, check=False, env=env)
    except subprocess.TimeoutExpired:
        raise SlurmUnavailable(f"{' '.join(argv)} timed out after {timeout_s:g} s") from None
    except OSError as exc:
        raise SlurmUnavailable(f"{' '.join(argv)}: {exc.strerror or exc}") from None
    if done.returncode != 0:
        raise SlurmUnavailable(f"{' '.join(argv)} failed ({done.returncode}): {' '.join(done.stderr.split())}")
    return done.stdout


@dataclass(frozen=True)
class Update:
    """One write: ``scontrol update JobId=<slurm_id> <field>=<value>``."""

    slurm_id: int
    field: str
    old: int
    value: int
    rank: int  # 0 = first

    @property
    def argv(self) -> tuple[str, ...]:
        """The command."""
        return ("scontrol", "update", f"JobId={self.slurm_id}", f"{self.field}={self.value}")


def plan(ranking: Sequence[int], held: Mapping[int, int], field: str, scale: int, max_updates: int) -> list[Update]:
    """The writes that put ``ranking`` (pending Slurm job ids, first favoured first) into Slurm, given the values
    Slurm ``held`` (job -> site factor or priority): only changed values, first ranked first, at most
    ``max_updates``."""
    if field not in STEER_FIELDS:
        raise ConfigError(f"field must be one of {', '.join(STEER_FIELDS)}, got {field!r}")
    targets = site_factors(list(ranking), scale)
    if targets and max(targets.values()) + 1 > MAX_SITE_FACTOR:
        raise ConfigError(f"{len(ranking):,} jobs x scale {scale:,} exceeds Slurm's largest value "
                          f"{MAX_SITE_FACTOR:,}; lower --scale")
    out = []
    for rank, job_id in enumerate(ranking):
        value = targets[job_id] + (1 if field == "Priority" else 0)  # Priority=0 would hold the job
        old = held.get(job_id, 0)
        if old != value:
            out.append(Update(job_id, field, old, value, rank))
    return out[:max_updates]


def read_sprio(text: str) -> dict[int, int]:
    """Job id -> site factor from ``sprio -h -o "%i %S"``."""
    out = {}
    for number, line in enumerate(text.splitlines(), start=1):
        words = line.split()
        if not words:
            continue
        if len(words) != 2 or not words[0].isdigit() or not re.fullmatch(r"-?[0-9]+", words[1]):
            raise SlurmOutputError(f"sprio line {number}: expected 'JOBID SITE', got {line.strip()!r}")
        out[int(words[0])] = int(words[1])
    return out


def check_config(text: str, field: str) -> None:
    """Refuse (one line) a Slurm whose ``scontrol show config`` would not keep the daemon's values."""
    config = dict(re.findall(r"^(\S+)\s*=\s*(.*?)\s*$", text, flags=re.MULTILINE))
    if config.get("PriorityType") != "priority/multifactor":
        raise ConfigError(f"PriorityType is {config.get('PriorityType')!r}: steering needs priority/multifactor")
    plugin = config.get("PrioritySiteFactorPlugin", "(null)")
    if field == "SiteFactor" and plugin not in ("(null)", "", "site_factor/none"):
        raise ConfigError(f"PrioritySiteFactorPlugin is {plugin!r}: it would overwrite the site factors; use "
                          "--field Priority or unset the plugin")


class Daemon:
    """The steering loop (module docstring). ``runner`` runs Slurm's commands, ``clock`` gives Unix time [s]."""

    def __init__(self, policy: Any, field: str = "SiteFactor", scale: int = 1000, period_s: float = 10.0,
                 timeout_s: float = 10.0, max_updates: int = 100, dry_run: bool = False,
                 runner: Runner = run_command, clock: Callable[[], float] = time.time, out: TextIO = sys.stdout,
                 err: TextIO = sys.stderr, log: Path | None = None) -> None:
        if not period_s > 0 or not timeout_s > 0:
            raise ConfigError("period and timeout must be positive numbers of seconds")
        self.policy, self.field, self.scale, self.period_s = policy, field, scale, period_s
        self.timeout_s, self.max_updates, self.dry_run = timeout_s, max_updates, dry_run
        self._runner, self.clock, self.out, self.err, self.log = runner, clock, out, err, log
        self.stop = threading.Event()
        self._checked = False

    def run(self, argv: Sequence[str]) -> str:
        """One Slurm command, checked first (:func:`checked`)."""
        return self._runner(checked(argv), self.timeout_s)

    def tick(self) -> list[Update]:
        """Read, rank, write once; the writes made (or, dry, planned). Raises :class:`SlurmUnavailable` or
        :class:`SlurmOutputError` when Slurm cannot be read."""
        if not self._checked:
            check_config(self.run(CONFIG), self.field)
            self._checked = True
        now = self.clock()
        snap = snapshot(_json(self.run(SQUEUE), "squeue --json"), _json(self.run(SINFO), "sinfo --json"))
        if not snap.pending:
            return []
        held = (read_sprio(self.run(SPRIO)) if self.field == "SiteFactor"
                else {j.slurm_id: j.priority for j in snap.pending})
        ranking = rank_jobs(self.policy, mirror(snap, now).view)
        updates = plan(ranking, held, self.field, self.scale, self.max_updates)
        done = []
        for update in updates:
            if self.stop.is_set():
                break
            if self.dry_run:
                print(f"would set JobId={update.slurm_id} {update.field}={update.value} (now {update.old}; rank "
                      f"{update.rank + 1} of {len(ranking)})", file=self.out, flush=True)
            else:
                try:
                    self.run(update.argv)
                except SlurmUnavailable as exc:  # the job may have started or ended since the read
                    self.warn(f"{exc}; left as it was")
                    continue
                self._log(update)
            done.append(update)
        return done

    def loop(self, cycles: int | None = None) -> int:
        """Tick every ``period_s`` on a fixed grid until :attr:`stop` is set or ``cycles`` ticks have run; a failed
        tick is a warning and a back-off. The number of ticks that wrote or planned anything."""
        start, backoff, ran, busy = self.clock(), self.period_s, 0, 0
        while not self.stop.is_set() and (cycles is None or ran < cycles):  # ends: stop, or cycles ticks
            ran += 1
            try:
                busy += bool(self.tick())
                backoff = self.period_s
                wait = self.period_s - (self.clock() - start) % self.period_s
            except (SlurmUnavailable, SlurmOutputError) as exc:
                last = cycles is not None and ran >= cycles
                self.warn(f"{exc}; " + ("giving up (last tick)" if last else f"retrying in {backoff:g} s"))
                wait, backoff = backoff, min(MAX_BACKOFF_S, 2 * backoff)
            if cycles is None or ran < cycles:
                self.stop.wait(wait)
        return busy

    def warn(self, message: str) -> None:
        """One line on standard error."""
        print(f"{PROG}: warning: {message}", file=self.err, flush=True)

    def _log(self, update: Update) -> None:
        if self.log is not None:
            with open(self.log, "a") as f:
                f.write(json.dumps({"t": round(self.clock(), 3), "job": update.slurm_id, "field": update.field,
                                    "old": update.old, "value": update.value, "rank": update.rank}) + "\n")


def _json(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise SlurmOutputError(f"{what}: not JSON ({exc.msg}, line {exc.lineno})") from None
    except RecursionError:
        raise SlurmOutputError(f"{what}: JSON nested too deeply") from None


def build_policy(name: str, futures: str | None, config: str | None) -> Any:
    """A policy by name (evaluate.py's names: heuristics, ``k8s:``, ``PATH/model.zip``, ``lookahead...``);
    ``futures``: the workload a planner draws futures from; ``config``: a policy config file."""
    from baselines.config import load_policy_config

    if name.strip().lower().startswith(LOOKAHEAD_PREFIX) and not futures:
        raise ConfigError(f"policy {name!r}: a lookahead planner draws its futures from a workload: give --futures "
                          "WORKLOAD (a preset, YAML or FORMAT:PATH like the one the cluster runs)")
    spec = RunSpec(policy=name, workload=futures) if futures else None
    return make_policy(name, load_policy_config(config) if config else None, spec)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("--policy", required=True, help="the policy that ranks the jobs (evaluate.py's names)")
    parser.add_argument("--policy-config", help="a policy config file (orders' parameters)")
    parser.add_argument("--futures", help="the workload a lookahead planner draws futures from")
    parser.add_argument("--field", choices=STEER_FIELDS, default="SiteFactor",
                        help="what to write: SiteFactor (keeps Slurm's own factors; default) or Priority (strict)")
    parser.add_argument("--scale", type=at_least(1), default=1000, help="value step between ranks (default 1000)")
    parser.add_argument("--period", type=float, default=10.0, help="seconds between ticks (default 10)")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds a Slurm command may take (default 10)")
    parser.add_argument("--max-updates", type=at_least(1), default=100, help="most writes per tick (default 100)")
    parser.add_argument("--dry-run", action="store_true", help="print what it would set; write nothing")
    parser.add_argument("--once", action="store_true", help="one tick, then stop")
    parser.add_argument("--log", type=Path, help="append each write to this JSON-lines file")
    parser.add_argument("--debug", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    for key in ("period", "timeout"):
        if not math.isfinite(getattr(args, key)) or getattr(args, key) <= 0:
            parser.error(f"argument --{key}: must be a positive number of seconds, got {getattr(args, key)!r}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)

    def body() -> int:
        if args.log is not None and not args.log.parent.is_dir():
            raise ConfigError(f"--log {args.log}: no such folder {args.log.parent}")
        daemon = Daemon(build_policy(args.policy, args.futures, args.policy_config), args.field, args.scale,
                        args.period, args.timeout, args.max_updates, args.dry_run, log=args.log)
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: daemon.stop.set())
        print(f"{PROG}: steering with {args.policy} ({args.field}, every {args.period:g} s"
              f"{', dry run' if args.dry_run else ''})", file=sys.stderr, flush=True)
        daemon.loop(1 if args.once else None)
        return 0
    return run_cli(PROG, body, args.debug)


if __name__ == "__main__":
    raise SystemExit(main())
