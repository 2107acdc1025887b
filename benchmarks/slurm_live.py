"""Replay a job stream on a real Slurm on this machine, record every job's start and end, and compare the record
with our simulator's presets.

    python benchmarks/slurm_live.py record CASE.yaml --out RECORD.yaml      # needs root, slurm-wlm and munge
    python benchmarks/slurm_live.py compare RECORD.yaml [--policies fcfs,fcfs+easy,fcfs+conservative,slurm]
    python benchmarks/slurm_live.py stream --workload default --jobs 20 --scale 0.02 --seed 0 --out CASE.yaml
    python benchmarks/slurm_live.py record CASE.yaml --out RECORD.yaml --steer sjf [--steer-period 5]
    python benchmarks/slurm_live.py sitefactor-check       # does a SiteFactor survive PriorityCalcPeriod? (4 min)

``record --steer POLICY`` runs the steering daemon (:mod:`bridges.slurm_steer`) in the loop: from just before the
first submission until every job has ended it ranks the pending jobs with POLICY and writes their site factors
(``--steer-field Priority``: their priorities) every ``--steer-period`` seconds; the record gains a ``steering``
section (the policy, field, scale, period, its first tick and every write, in seconds from slurmctld's start) from
which ``compare`` builds the simulated twin: the ``slurm`` policy with the same daemon (:mod:`baselines.slurm`,
**Steering**). The daemon runs under the case's priority/multifactor; Slurm ignores the age weight without
slurmdbd, so a steered case should have accounts.

``record`` writes a ``slurm.conf`` (and ``gres.conf``) for the case's nodes and its ``slurm:`` section
(:mod:`baselines.slurm_conf`) into a fresh folder, starts ``munged`` (unless one runs), ``slurmctld`` and one
``slurmd`` per node on localhost (``slurmd -N NAME``, each on its own port, for a case of several nodes) as root
(and, for a case with ``accounts`` or ``qos``, MariaDB and ``slurmdbd``, with the accounts, users and QOS created
by ``sacctmgr``), submits every job with ``sbatch --wrap "sleep S"`` at its submit
offset, waits until every job has ended (``jobcomp/filetxt``), stops the daemons it started, and writes the record:
the case, the conf files, Slurm's version, ``sacct --parsable2`` output when accounting ran (also written beside
the record as ``NAME.sacct.txt``, a real sample for the sacct loader), and per job its Slurm
id, submission, start and end [s from slurmctld's start, the origin of its periodic work], read with millisecond
precision from ``slurmctld.log`` (jobcomp logs whole seconds; the two are checked against each other), which part
of slurmctld started it (``main`` scheduler or ``backfill``), its state and any earlier (requeued) runs.
``reread`` rebuilds a record from a run folder kept with ``--keep``.
What is missing on a machine that cannot run it (not root, no ``slurmctld``, no munge key, ...) is said in one line.

GPUs are count-only GRES: Debian's slurmd drops file-less GPUs, so ``gres.conf`` names eight character devices
made in the run folder (``mknod c 1 3``, the same device as /dev/null); a task plugin that constrains devices would
need real ones, and ``task/none`` is used. The node's CPUs and memory come from the case (``SlurmdParameters=
config_overrides`` lets them exceed the machine's); every job asks for 1 CPU and 100 MB, so only GPUs bind.

``compare`` replays a record in the simulator (:mod:`evaluation.slurm_replay`: the recorded submits, runtimes =
recorded end - start, requested times = the whole minutes of ``--time``) under each policy and prints per-job
|start difference| [s] and the start-order inversions (pairs of jobs that Slurm started at different seconds in
one order and the simulator in the other).

``stream`` turns any workload into a case: its first ``--jobs`` jobs, times scaled by ``--scale``, GPUs capped at
the node's, requested times rounded up to whole minutes (Slurm's unit for ``--time``), runtimes kept below them.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import getpass
import json
import math
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bridges.slurm_steer import Daemon, build_policy, run_command  # noqa: E402
from envs.core.cli import ArgumentParser, run_cli  # noqa: E402
from envs.core.errors import ConfigError  # noqa: E402
from envs.core.files import read_yaml, write_text_atomically  # noqa: E402
from evaluation.slurm_logs import jobcomp_runs, read_run  # noqa: E402
from evaluation.slurm_replay import (  # noqa: E402
    START_TOLERANCE_S,
    SlurmCase,
    case_from_dict,
    case_from_workload,
    compare,
    node_names,
    slurm_conf_text,
)

DAEMONS = ("slurmctld", "slurmd", "munged", "sbatch", "squeue", "scontrol")
"""Programs ``record`` needs on the PATH (``sbin`` included)."""

ACCOUNTING_DAEMONS = ("slurmdbd", "sacctmgr", "sacct", "mariadbd")
"""Programs a case with accounts or QOS needs as well."""

GPU_DEVICES = 8
"""How many fake GPU devices the run folder gets (the most GPUs a case's node may have)."""

SACCT_FORMAT = ("JobID,JobIDRaw,JobName,Submit,Start,End,Timelimit,ReqTRES,AllocTRES,NNodes,Partition,QOS,Account,"
                "User,State")
"""The sacct columns a record keeps (what :mod:`envs.workload.operators.sacct` reads)."""

MUNGE_SOCKET = "/run/munge/munge.socket.2"
"""Where munged listens (Debian's default)."""

POLL_S = 0.5
"""How often ``record`` checks for ended jobs [s]."""


class Missing(ConfigError):
    """Something ``record`` needs is not on this machine."""


def _which(program: str) -> str | None:
    return shutil.which(program) or shutil.which(program, path="/usr/sbin:/sbin:/usr/bin")


def check_machine(case: SlurmCase) -> None:
    """Raise :class:`Missing` (one line: everything missing) unless this machine can run ``case`` live."""
    missing = []
    if os.geteuid() != 0:
        missing.append(f"root (running as {getpass.getuser()})")
    needed = DAEMONS + (ACCOUNTING_DAEMONS if case.needs_accounting else ())
    missing.extend(p for p in needed if _which(p) is None)
    if not Path("/etc/munge/munge.key").is_file():
        missing.append("/etc/munge/munge.key")
    if missing:
        raise Missing(f"cannot run Slurm here; missing: {', '.join(missing)} (apt-get install slurm-wlm munge"
                      + (" slurmdbd mariadb-server" if case.needs_accounting else "") + ")")


def _alive(program: str) -> bool:
    """Whether a process of that name runs (zombies, which an init that does not reap leaves, do not count)."""
    states = subprocess.run(["ps", "-C", program, "-o", "stat="], capture_output=True, text=True).stdout.split()
    return any(not state.startswith("Z") for state in states)


class LiveSlurm:
    """The daemons of one recording, in a run folder; :meth:`stop` stops what :meth:`start` started."""

    def __init__(self, case: SlurmCase, folder: Path) -> None:
        self.case, self.folder = case, folder
        self.host = socket.gethostname().split(".")[0]
        self.nodes = node_names(case, self.host)
        self.env = dict(os.environ, SLURM_CONF=str(folder / "slurm.conf"),
                        PATH=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")
        self.started: list[str] = []

    def run(self, *argv: str, check: bool = True) -> str:
        """Run a Slurm command; its standard output."""
        done = subprocess.run(argv, env=self.env, capture_output=True, text=True, check=False)
        if check and done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()}")
        return done.stdout

    def write_confs(self) -> None:
        """slurm.conf, gres.conf (and slurmdbd.conf) and the fake GPU devices."""
        for sub in ("state", "spool"):
            (self.folder / sub).mkdir(parents=True, exist_ok=True)
        for i in range(GPU_DEVICES):
            device = self.folder / f"gpu{i}"
            if not device.exists():
                os.mknod(device, 0o666 | 0o020000, os.makedev(1, 3))
        conf = slurm_conf_text(self.case, self.host, self.folder)
        (self.folder / "slurm.conf").write_text(conf)
        (self.folder / "gres.conf").write_text(f"NodeName={','.join(self.nodes)} Name=gpu "
                                               f"File={self.folder}/gpu[0-{GPU_DEVICES - 1}]\n")
        if self.case.needs_accounting:
            dbd = self.folder / "slurmdbd.conf"
            dbd.write_text(f"AuthType=auth/munge\nDbdHost=localhost\nSlurmUser=root\nStorageType="
                           f"accounting_storage/mysql\nStorageHost=localhost\nStorageUser=root\nStorageLoc="
                           f"gpusched_acct\nLogFile={self.folder}/slurmdbd.log\nPidFile={self.folder}/slurmdbd.pid\n")
            dbd.chmod(0o600)

    def start(self) -> None:
        """Start munge (unless it runs), the database and slurmdbd (for accounting), slurmctld and slurmd."""
        if not _alive("munged"):
            Path("/run/munge").mkdir(parents=True, exist_ok=True)
            shutil.chown("/run/munge", "munge")
            subprocess.run(["runuser", "-u", "munge", "--", _which("munged")], check=True)
            self.started.append("munged")
            self._until(Path(MUNGE_SOCKET).exists, 30, "munged to open its socket")  # else slurmd cannot register
        if self.case.needs_accounting:
            self._start_accounting()
        self.run(_which("slurmctld"), "-c", "-f", self.env["SLURM_CONF"])
        self.started.append("slurmctld")
        for node in self.nodes:  # one slurmd per node, each under its own name (slurmd -N)
            self.run(_which("slurmd"), "-c", "-f", self.env["SLURM_CONF"],
                     *(("-N", node) if len(self.nodes) > 1 else ()))
        self.started.append("slurmd")
        for node in self.nodes:
            self._wait_for_node(node)

    def _start_accounting(self) -> None:
        if not _alive("mariadbd"):
            Path("/run/mysqld").mkdir(parents=True, exist_ok=True)
            shutil.chown("/run/mysqld", "mysql")
            subprocess.Popen(["mysqld_safe"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.started.append("mariadbd")
            self._until(lambda: subprocess.run(["mysqladmin", "ping"], capture_output=True).returncode == 0,
                        30, "MariaDB to answer")
        subprocess.run(["mysql", "-e", "DROP DATABASE IF EXISTS gpusched_acct"], check=True)
        self.run(_which("slurmdbd"))  # reads slurmdbd.conf beside SLURM_CONF
        self.started.append("slurmdbd")
        self._until(lambda: "gpusched" in self._add_cluster(), 30, "slurmdbd to take the cluster")

    def _add_cluster(self) -> str:
        self.run("sacctmgr", "-i", "add", "cluster", "gpusched", check=False)
        return self.run("sacctmgr", "-n", "-P", "list", "cluster", "format=cluster", check=False)

    def add_associations(self) -> None:
        """QOS, accounts (with their shares) and the root user in every account, as the case says."""
        for qos in self.case.qos:
            self.run("sacctmgr", "-i", "add", "qos", qos["name"], check=False)
            fields = [f"{k}={v}" for k, v in qos.items() if k != "name"]
            if fields:
                self.run("sacctmgr", "-i", "modify", "qos", "where", f"name={qos['name']}", "set", *fields)
        qos_names = ",".join(["normal"] + [q["name"] for q in self.case.qos])
        for account, shares in self.case.accounts.items():
            self.run("sacctmgr", "-i", "add", "account", account, "cluster=gpusched", f"fairshare={shares}")
            self.run("sacctmgr", "-i", "add", "user", "root", f"account={account}", "cluster=gpusched",
                     f"qos={qos_names}")
        self.run("scontrol", "reconfigure")

    def _wait_for_node(self, node: str) -> None:
        """Count-only GPUs: set the node's GRES and resume it once its slurmd has registered."""
        self._until(lambda: "State=" in self.run("scontrol", "show", "node", node, "--oneliner", check=False),
                    30, f"slurmd of {node} to register")
        gres = f"gpu:{self.case.node_gpus}"
        self.run("scontrol", "update", f"nodename={node}", f"gres={gres}", check=False)
        self.run("scontrol", "update", f"nodename={node}", "state=resume", check=False)

        def idle() -> bool:
            line = self.run("scontrol", "show", "node", node, "--oneliner", check=False)
            return "State=IDLE " in line and f"Gres={gres}" in line
        self._until(idle, 30, f"node {node} to be idle with {gres}")

    @staticmethod
    def _until(ready: Any, limit_s: float, what: str) -> None:
        deadline = time.monotonic() + limit_s
        while not ready():
            if time.monotonic() > deadline:
                raise RuntimeError(f"gave up waiting for {what} after {limit_s:.0f} s")
            time.sleep(0.5)

    def stop(self) -> None:
        """Stop what :meth:`start` started (last first), each gone before the next is stopped (a daemon still
        shutting down would hold its port against the next recording)."""
        for daemon in reversed(self.started):
            subprocess.run(["pkill", "-x", daemon], check=False)
            self._until(lambda d=daemon: not _alive(d), 60, f"{daemon} to exit")
        self.started.clear()


def submit_all(live: LiveSlurm, case: SlurmCase, log: Any) -> dict[int, int]:
    """Submit each job at its offset from now; {case job id: Slurm job id}."""
    ids: dict[int, int] = {}
    t0 = time.monotonic()
    for job in sorted(case.jobs, key=lambda j: (j["submit_s"], j["id"])):
        delay = t0 + job["submit_s"] - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        nodes = int(job.get("nodes") or 1)
        argv = ["sbatch", "--parsable", f"--job-name=g{job['id']}", f"--gres=gpu:{job['gpus'] // nodes}", "-c", "1",
                "--mem=100", f"--time={job['time_min']}", "-o", "/dev/null", "-e", "/dev/null"]
        argv += [f"--nodes={nodes}"] if job.get("nodes") else []
        argv += [f"--partition={job['partition']}"] if job.get("partition") else []
        argv += [f"--account={job['account']}"] if job.get("account") else []
        argv += [f"--qos={job['qos']}"] if job.get("qos") else []
        argv += ["--wrap", f"sleep {job['run_s']}"]
        ids[job["id"]] = int(live.run(*argv).strip().split(";")[0])
        print(f"  t={time.monotonic() - t0:6.1f} s  job {job['id']} -> Slurm {ids[job['id']]}", file=log, flush=True)
    return ids


class SteerRun:
    """The steering daemon of a recording, in a thread, running Slurm's commands with the run's configuration."""

    def __init__(self, live: LiveSlurm, policy: str, field: str, period_s: float, scale: int) -> None:
        self.policy, self.field, self.period_s, self.scale = policy, field, period_s, scale
        self.log = live.folder / "steer.jsonl"
        self.log.unlink(missing_ok=True)
        self.daemon = Daemon(build_policy(policy, None, None), field, scale, period_s, timeout_s=10.0,
                             max_updates=1000, runner=functools.partial(run_command, env=live.env),
                             log=self.log)
        self.thread = threading.Thread(target=self.daemon.loop, daemon=True)
        self.started_s = math.nan

    def start(self) -> None:
        """Start ticking now."""
        self.started_s = time.time()
        self.thread.start()

    def stop(self) -> None:
        """Stop after the current command."""
        self.daemon.stop.set()
        self.thread.join(timeout=30)

    def section(self, origin: float) -> dict[str, Any]:
        """The record's ``steering`` section, times in seconds from ``origin`` (slurmctld's start, Unix)."""
        writes = [json.loads(line) for line in self.log.read_text().splitlines()] if self.log.exists() else []
        return {"policy": self.policy, "field": self.field, "scale": self.scale, "period_s": self.period_s,
                "origin_s": round(self.started_s - origin, 3),
                "writes": [{"t_s": round(w["t"] - origin, 3), "job": w["job"], "value": w["value"]} for w in writes]}


def record(case: SlurmCase, out: Path, keep: Path | None, log: Any = sys.stdout,
           steer: tuple[str, str, float, int] | None = None) -> dict[str, Any]:
    """Run ``case`` on a live Slurm (see the module docstring) and write its record to ``out``; the record.
    ``steer``: (policy, field, period [s], scale) of a steering daemon to run in the loop."""
    check_machine(case)
    folder = Path(tempfile.mkdtemp(prefix="slurm-live-")) if keep is None else keep
    folder.mkdir(parents=True, exist_ok=True)
    live = LiveSlurm(case, folder)
    live.write_confs()
    steering: SteerRun | None = None
    try:
        live.start()
        if case.needs_accounting:
            live.add_associations()
        version = live.run("scontrol", "--version").strip()
        print(f"{version} up on {live.host} in {folder}; submitting {len(case.jobs)} jobs", file=log, flush=True)
        steering = SteerRun(live, *steer) if steer else None
        if steering is not None:
            steering.start()
        ids = submit_all(live, case, log)
        final = {"COMPLETED", "FAILED", "TIMEOUT", "CANCELLED", "NODE_FAIL", "OUT_OF_MEMORY"}
        deadline = time.monotonic() + max(j["submit_s"] for j in case.jobs) + sum(
            60 * j["time_min"] for j in case.jobs) + 300
        while True:
            runs = jobcomp_runs(folder / "jobcomp.txt")
            if all(runs.get(s) and runs[s][-1]["JobState"] in final for s in ids.values()):
                break
            if time.monotonic() > deadline:
                raise RuntimeError("jobs still not ended after every time limit passed")
            time.sleep(POLL_S)
        sacct = read_sacct(live, len(ids)) if case.needs_accounting else ""
    finally:
        if steering is not None:
            steering.stop()
        live.stop()
    result = record_of_folder(case, folder, version, live.host, sacct)
    if steering is not None:
        result["steering"] = steering.section(result["recorded"]["epoch_s"])
        ids_by_slurm = {int(j["slurm_id"]): int(j["id"]) for j in result["jobs"]}
        result["steering"]["writes"] = [{**w, "job": ids_by_slurm.get(w["job"], w["job"])}
                                        for w in result["steering"]["writes"]]
    write_text_atomically(out, yaml.safe_dump(result, sort_keys=False, width=120))
    if sacct:
        write_text_atomically(sacct_path(out), sacct)
    if keep is None:
        shutil.rmtree(folder, ignore_errors=True)
    return result


def read_sacct(live: LiveSlurm, n_jobs: int, limit_s: float = 30.0) -> str:
    """``sacct --parsable2`` once slurmdbd holds every job's end (it learns of an end a moment after jobcomp)."""
    text = ""

    def complete() -> bool:
        nonlocal text
        text = live.run("sacct", "--parsable2", "--duplicates", "-S", "now-1days", "--format", SACCT_FORMAT,
                        check=False)
        rows = [line.split("|") for line in text.splitlines()[1:] if line]
        jobs = [row for row in rows if row and "." not in row[0]]  # job lines, not steps
        return len(jobs) >= n_jobs and not any(row[-1] in ("PENDING", "RUNNING") for row in jobs)
    live._until(complete, limit_s, "sacct to hold every job's end")
    return text


def sacct_path(record_path: Path) -> Path:
    """Where ``record`` puts the sacct output of a record (beside it: ``NAME.sacct.txt``)."""
    return record_path.with_name(record_path.stem + ".sacct.txt")


def record_of_folder(case: SlurmCase, folder: Path, version: str, host: str, sacct: str = "") -> dict[str, Any]:
    """The record of a finished run kept in ``folder`` (``record`` writes it; ``reread`` rebuilds it)."""
    marks, jobs = read_run(case, folder)
    origin = marks["origin"]
    decay = {"decay_s": round(marks["decay"] - origin, 3)} if "decay" in marks else {}
    return {**case.as_dict(), "jobs": jobs, "recorded": {
        "slurm": version, "date": datetime.date.fromtimestamp(origin).isoformat(), "host": host,
        "epoch_s": round(origin, 3), **decay, "origin": "slurmctld's start (times from slurmctld.log, in ms)",
        "command": " ".join(["python", "benchmarks/slurm_live.py", *sys.argv[1:]]),
        "slurm_conf": (folder / "slurm.conf").read_text(), "gres_conf": (folder / "gres.conf").read_text(),
        **({"sacct": sacct} if sacct else {})}}


SITEFACTOR_CASE = {
    "name": "sitefactor-check",
    "description": "does a SiteFactor set by hand survive PriorityCalcPeriod under site_factor/none?",
    "slurm": {"SchedulerType": "sched/backfill", "PriorityType": "priority/multifactor", "PriorityWeightAge": 1000,
              "PriorityMaxAge": 10, "PriorityCalcPeriod": 1, "Accounts": {"a": {"Fairshare": 1}}},
    "jobs": [{"id": 1, "submit_s": 0, "gpus": 8, "time_min": 5, "run_s": 240, "account": "a"}],
}
"""The site-factor check's slurm.conf (age weight 1000 over 10 minutes, recalculated every minute, with slurmdbd)."""


def sitefactor_check(folder: Path, samples: int = 8, every_s: float = 25.0, log: Any = sys.stdout) -> list[str]:
    """On a live Slurm: job 1 holds the node, jobs 2-4 wait; job 3 gets ``SiteFactor=5000`` and job 4
    ``Priority=3000``; then ``sprio`` every ``every_s`` seconds. The lines of a table: t [s], then per waiting job
    its priority / site factor / age factor."""
    case = case_from_dict(SITEFACTOR_CASE, "sitefactor-check")
    check_machine(case)
    folder.mkdir(parents=True, exist_ok=True)
    live = LiveSlurm(case, folder)
    live.write_confs()
    rows = ["| t [s] | job 2: priority / site / age | job 3: priority / site / age | job 4: priority / site / age |",
            "|---:|---|---|---|"]
    try:
        live.start()
        live.add_associations()

        def submit(sleep_s: int) -> str:
            return live.run("sbatch", "--parsable", "--account=a", "--gres=gpu:8", "-c", "1", "--mem=100",
                            "--time=5", "-o", "/dev/null", "-e", "/dev/null", "--wrap", f"sleep {sleep_s}").strip()
        submit(240)
        time.sleep(2)
        waiting = [submit(30) for _ in range(3)]
        time.sleep(2)
        live.run("scontrol", "update", f"JobId={waiting[1]}", "SiteFactor=5000")
        live.run("scontrol", "update", f"JobId={waiting[2]}", "Priority=3000")
        t0 = time.monotonic()
        for _ in range(samples):
            table = {int(w[0]): w[1:] for line in live.run("sprio", "-h", "-o", "%i %Y %S %A").splitlines()
                     if len(w := line.split()) == 4}
            rows.append(f"| {time.monotonic() - t0:.0f} | " + " | ".join(
                " / ".join(table.get(int(j), ["-"] * 3)) for j in waiting) + " |")
            print(rows[-1], file=log, flush=True)
            time.sleep(every_s)
    finally:
        live.stop()
    return rows


def print_comparison(record_data: dict[str, Any], policies: Sequence[str], log: Any = sys.stdout) -> None:
    """Per policy: each job's |start difference| [s], the largest, and the start-order inversions."""
    for policy in policies:
        result = compare(record_data, policy)
        print(f"{record_data['name']}  {policy}: max |start diff| {result.max_diff_s:.1f} s, "
              f"{result.within(START_TOLERANCE_S)} of {len(result.diffs)} within {START_TOLERANCE_S:g} s, "
              f"{result.inversions} order inversions", file=log)
        print("  job    slurm      sim  |diff|", file=log)
        for job_id, (slurm_s, sim_s) in sorted(result.starts.items(), key=lambda kv: (kv[1][0], kv[0])):
            print(f"  {job_id:>3}  {slurm_s:>7.1f}  {sim_s:>7.1f}  {abs(sim_s - slurm_s):>5.1f}", file=log)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = ArgumentParser(prog="slurm_live", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record", help="run a case on a live Slurm and write its record")
    rec.add_argument("case", type=Path)
    rec.add_argument("--out", type=Path, required=True)
    rec.add_argument("--keep", type=Path, help="run folder to keep (confs, logs); default a temporary one")
    rec.add_argument("--policies", default="fcfs,fcfs+easy,fcfs+conservative,slurm", help="compare afterwards")
    rec.add_argument("--steer", help="run the steering daemon with this policy in the loop")
    rec.add_argument("--steer-field", default="SiteFactor", choices=("SiteFactor", "Priority"))
    rec.add_argument("--steer-period", type=float, default=5.0, help="seconds between the daemon's ticks")
    rec.add_argument("--steer-scale", type=int, default=1000, help="value step between ranks")
    cmp_ = sub.add_parser("compare", help="replay a record in the simulator")
    cmp_.add_argument("record", type=Path)
    cmp_.add_argument("--policies", default="fcfs,fcfs+easy,fcfs+conservative,slurm")
    again = sub.add_parser("reread", help="rebuild a record from a kept run folder (record --keep)")
    again.add_argument("case", type=Path)
    again.add_argument("folder", type=Path)
    again.add_argument("--out", type=Path, required=True)
    again.add_argument("--slurm-version", default="slurm-wlm 22.05.8")
    check = sub.add_parser("sitefactor-check", help="does a hand-set SiteFactor survive PriorityCalcPeriod?")
    check.add_argument("--keep", type=Path, help="run folder to keep; default a temporary one")
    gen = sub.add_parser("stream", help="a case from a workload")
    gen.add_argument("--workload", default="default")
    gen.add_argument("--jobs", type=int, default=20)
    gen.add_argument("--scale", type=float, default=0.02, help="factor on submit offsets and runtimes")
    gen.add_argument("--seed", type=int, default=0)
    gen.add_argument("--slurm", type=Path, help="YAML of the slurm: section (default: Slurm's defaults)")
    gen.add_argument("--out", type=Path, required=True)
    for p in (parser, rec, cmp_, again, check, gen):
        p.add_argument("--debug", action="store_true", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)

    def body() -> int:
        policies = [p for p in args.policies.split(",") if p] if hasattr(args, "policies") else []
        if args.command == "record":
            steer = (args.steer, args.steer_field, args.steer_period, args.steer_scale) if args.steer else None
            data = record(case_from_dict(read_yaml(args.case, "Slurm case"), str(args.case)), args.out, args.keep,
                          steer=steer)
            print(f"wrote {args.out}")
            print_comparison(data, policies)
        elif args.command == "reread":
            case = case_from_dict(read_yaml(args.case, "Slurm case"), str(args.case))
            data = record_of_folder(case, args.folder, args.slurm_version, socket.gethostname().split(".")[0])
            write_text_atomically(args.out, yaml.safe_dump(data, sort_keys=False, width=120))
            print(f"wrote {args.out}")
        elif args.command == "sitefactor-check":
            folder = args.keep or Path(tempfile.mkdtemp(prefix="slurm-sitefactor-"))
            print("\n".join(sitefactor_check(folder)))
        elif args.command == "compare":
            print_comparison(read_yaml(args.record, "Slurm record"), policies)
        else:
            slurm = read_yaml(args.slurm, "slurm section") if args.slurm else {}
            case = case_from_workload(args.workload, args.jobs, args.scale, args.seed, slurm)
            write_text_atomically(args.out, yaml.safe_dump(case.as_dict(), sort_keys=False, width=120))
            print(f"wrote {args.out}: {len(case.jobs)} jobs")
        return 0
    return run_cli("slurm_live", body, args.debug)


if __name__ == "__main__":
    raise SystemExit(main())
