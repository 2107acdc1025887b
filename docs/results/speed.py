"""Regenerate the speed page (issue 32's goals): every figure measured by a script of ``benchmarks/`` or by the
simulator's own entry points, old-against-new ratios in one run (a ``git worktree`` of the old commit), and for
every missed goal its profile, as ``docs/results/DATE-speed.md``.

    python docs/results/speed.py [--date YYYY-MM-DD] [--raw runs/speed.json] [--from-raw [--reprofile]]
                                 [--peer-repo PATH]

About 20 minutes on 2 cores. The measurements are saved to ``--raw`` (JSON) as they come; ``--from-raw`` writes
the page from that file without measuring again (with ``--reprofile``, after profiling its missed goals again).
``--peer-repo``: a checkout of DIR-LAB/deep-batch-scheduler (RLScheduler, unmodified) for the peer row; without it
that row says it was not measured.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import csv
import datetime
import functools
import json
import os
import platform
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from envs.core.files import write_text_atomically  # noqa: E402

OLD_MAIN = "6cdef88"
"""main when issue 32 was filed: the slurm policy's old code."""
WAVE_ONE = "f62e0b9"
"""The wave-1 commit the event env is compared with."""
LUBLIN = ROOT.parent / "shared" / "traces" / "lublin-synthetic" / "lublin_256.swf"
EASY_FAMILY = ("fcfs+easy", "sjf+easy", "fairshare+easy", "fairtree+easy", "multifactor+easy")
K8S_FAMILY = ("k8s:leastallocated", "k8s:mostallocated", "k8s:ratio", "k8s:balanced")
HEAVY_FAMILY = ("fcfs+conservative", "sjf+conservative", "priority+easy/pack+preempt", "k8s:mostallocated+preempt")
"""Conservative backfilling and the preemptive policies: the 100 decisions/s goal at 512 nodes."""
WORKERS = 2
PROFILE_S = 60.0
"""Wall-clock cap of a latency profile [s] (the decisions run until it, or until 300)."""
ENV_STEPS, ENV_PAIRS = 3000, 5
SLURM_SNIPPET = """
import json, sys, time
from evaluation.runner import RunSpec, run
t = time.perf_counter()
run(RunSpec(sys.argv[1], "default", None, 0, 1.0, None))
print(json.dumps({"policy": sys.argv[1], "wall_s": time.perf_counter() - t}))
"""
"""One run of a policy on the default workload (2,000 jobs on hetero-64, seed 0), timed in its process."""
ENV_SNIPPET = """
import sys
import gymnasium as gym
import numpy as np
import envs
env = gym.make("gpusched/GPUCluster-v0")
rng = np.random.default_rng(0)
env.reset(seed=0)
for _ in range(int(sys.argv[1])):
    mask = env.unwrapped.action_masks()
    _, _, terminated, truncated, _ = env.step(int(rng.choice(np.flatnonzero(mask))))
    if terminated or truncated:
        env.reset()
"""
"""The event env's default experiment under random masked actions, as ``benchmarks/bench_env.py`` drives it."""


@contextlib.contextmanager
def worktree(commit: str) -> Iterator[Path]:
    """A detached ``git worktree`` of ``commit`` for the duration, removed after."""
    folder = Path(tempfile.mkdtemp(prefix=f"speed-{commit}-"))
    subprocess.run(["git", "worktree", "add", "--detach", str(folder), commit], cwd=ROOT, check=True,
                   capture_output=True)
    try:
        yield folder
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(folder)], cwd=ROOT, check=False,
                       capture_output=True)


def python(args: list[str], cwd: Path = ROOT, timeout_s: float = 3600) -> str:
    """The standard output of ``python ARGS`` run in ``cwd`` (its packages first on the path); fails loudly."""
    env = {**os.environ, "PYTHONPATH": str(cwd)}
    done = subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout_s)
    if done.returncode:
        raise SystemExit(f"speed.py: {' '.join(args[:3])} failed in {cwd}:\n{done.stderr[-2000:]}")
    return done.stdout


def json_lines(text: str) -> list[dict[str, Any]]:
    """The JSON objects printed one per line (other lines skipped)."""
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def measure_slurm() -> dict[str, Any]:
    """``slurm`` on the default workload with the old code and this code, and ``fcfs+easy`` for scale [s]."""
    with worktree(OLD_MAIN) as old:
        old_s = json_lines(python(["-c", SLURM_SNIPPET, "slurm"], cwd=old))[0]["wall_s"]
    new_s = json_lines(python(["-c", SLURM_SNIPPET, "slurm"]))[0]["wall_s"]
    easy_s = json_lines(python(["-c", SLURM_SNIPPET, "fcfs+easy"]))[0]["wall_s"]
    return {"old_s": old_s, "new_s": new_s, "fcfs_easy_s": easy_s, "ratio": old_s / new_s}


def measure_latency(gpus: int, policies: tuple[str, ...], decisions: int, max_s: float) -> list[dict[str, Any]]:
    """``benchmarks/bench_latency.py`` rows at one size."""
    return json_lines(python(["benchmarks/bench_latency.py", "--sizes", str(gpus), "--policies", ",".join(policies),
                              "--decisions", str(decisions), "--max-seconds", str(max_s), "--max-call-seconds",
                              "120", "--json"]))


def measure_rlscheduler() -> dict[str, Any]:
    """``evaluate.py --suite rlscheduler`` on Lublin-256 with ``WORKERS`` workers, timed whole [s], and the
    simulation time of its runs by kind of policy (from its ``timing.csv``)."""
    with tempfile.TemporaryDirectory(prefix="speed-rls-") as out:
        t0 = time.perf_counter()
        python(["evaluate.py", "--suite", "rlscheduler", "--workload", f"swf:{LUBLIN}", "--workers", str(WORKERS),
                "--no-plots", "--out", out])
        wall_s = time.perf_counter() - t0
        with open(Path(out) / "timing.csv", newline="") as f:
            rows = list(csv.DictReader(f))
    kinds: dict[str, float] = {}
    for row in rows:
        kind = _rls_kind(row["policy"])
        kinds[kind] = kinds.get(kind, 0.0) + float(row["sim_wall_s"])
    return {"runs": len(rows), "wall_s": wall_s, "sim_s_by_kind": kinds}


def _rls_kind(policy: str) -> str:
    """The kind of a policy of the rlscheduler suite: the peer's orders with or without its backfilling, ours with
    EASY or conservative backfilling."""
    if policy.startswith("rls:"):
        return "peer orders + rlsbackfill" if policy.endswith("+rlsbackfill") else "peer orders"
    return "our orders + " + policy.split("+", 1)[1]


def measure_vec() -> dict[str, Any]:
    """``benchmarks/bench_vec.py`` without PPO at N = 1 and 4,096: the ratio to the event env and the breakdown."""
    rows = json_lines(python(["benchmarks/bench_vec.py", "--no-ppo", "--sizes", "1,4096", "--steps", "30"]))
    at = next(r for r in rows if r.get("engine") == "vec" and r.get("n") == 4096)
    event = next(r for r in rows if r.get("engine") == "event")
    breakdown = next(r for r in rows if "breakdown_at_n" in r)
    return {"event_steps_per_s": event["steps_per_s"], "vec_steps_per_s": at["steps_per_s"],
            "ratio": at["x_event"], "breakdown": breakdown}


def measure_env() -> dict[str, Any]:
    """The event env's whole process (imports, make, ``ENV_STEPS`` random steps) with the wave-1 code and this
    code, ``ENV_PAIRS`` pairs run back to back (order alternating) [s]."""
    pairs = []
    with worktree(WAVE_ONE) as old:
        for k in range(ENV_PAIRS):
            times = {}
            for name, cwd in (("old", old), ("new", ROOT)) if k % 2 == 0 else (("new", ROOT), ("old", old)):
                t0 = time.perf_counter()
                python(["-c", ENV_SNIPPET, str(ENV_STEPS)], cwd=cwd)
                times[name] = time.perf_counter() - t0
            pairs.append(times)
    ratios = [p["new"] / p["old"] for p in pairs]
    return {"pairs": pairs, "ratio_median": statistics.median(ratios), "ratio_min": min(ratios),
            "ratio_max": max(ratios)}


def measure_peer(peer_repo: Path | None) -> list[dict[str, Any]]:
    """``benchmarks/bench_peer.py`` (with the unmodified peer beside it when ``peer_repo`` is given)."""
    extra = ["--peer-repo", str(peer_repo)] if peer_repo is not None else []
    return json_lines(python(["benchmarks/bench_peer.py", "--repeat", "3", *extra]))


def measure_simulator() -> dict[str, Any]:
    """``benchmarks/bench_simulator.py`` on 100,000 jobs and 10,000 GPUs (median of 3)."""
    return json_lines(python(["benchmarks/bench_simulator.py", "--case", "synthetic100k", "--repeat", "3"]))[0]


def top_functions(run: Callable[[], Any], n: int = 8) -> dict[str, Any]:
    """Profile ``run()`` (cProfile): its total seconds and the ``n`` functions of most own time, with their own and
    cumulative shares of the total."""
    profiler = cProfile.Profile()
    profiler.enable()
    run()
    profiler.disable()
    stats = pstats.Stats(profiler).stats  # (file, line, name) -> (calls, primitive, own s, cumulative s, callers)
    total = sum(entry[2] for entry in stats.values())
    rows = sorted(stats.items(), key=lambda item: -item[1][2])[:n]
    return {"total_s": total, "top": [{"function": _where(key), "calls": entry[1], "own": entry[2] / total,
                                       "cumulative": entry[3] / total} for key, entry in rows]}


def _where(key: tuple[str, int, str]) -> str:
    file, line, name = key
    path = Path(file)
    with contextlib.suppress(ValueError):
        path = path.relative_to(ROOT)
    return f"{name} ({path.name}:{line})" if file != "~" else name


def latency_profile(gpus: int, policy: str, decisions: int) -> dict[str, Any]:
    """The profile of up to ``decisions`` decisions of ``policy`` (or :data:`PROFILE_S` seconds), each applied,
    from the latency benchmark's snapshot at ``gpus`` (unpickling it not included)."""
    import pickle

    from bench_latency import _apply

    from baselines.registry import make

    snapshot, _ = _snapshot(gpus)
    sim, chosen = pickle.loads(snapshot), make(policy)
    chosen.reset()
    done = []

    def decide() -> None:
        deadline = time.perf_counter() + PROFILE_S
        while not sim.done and len(done) < decisions and time.perf_counter() < deadline:
            _apply(sim, chosen.act(sim.view))
            done.append(1)
    return {**top_functions(decide), "decisions": len(done)}


@functools.lru_cache
def _snapshot(gpus: int) -> tuple[bytes, dict[str, Any]]:
    """The latency benchmark's loaded snapshot at ``gpus`` (built once per size)."""
    from bench_latency import latency_cluster, loaded_snapshot

    return loaded_snapshot(latency_cluster(gpus), 500)


def env_profile() -> dict[str, Any]:
    """The profile of ``ENV_STEPS`` random masked steps of the event env (make and reset included)."""
    def steps() -> None:
        exec(compile(ENV_SNIPPET.replace("int(sys.argv[1])", str(ENV_STEPS)), "env-steps", "exec"), {})
    return top_functions(steps)


def peer_profile() -> dict[str, Any]:
    """The profile of the peer protocol with backfilling (five orders, ten sequences)."""
    from bench_peer import ORDERS

    from baselines.rls import rls_policy
    from envs.peer.engine import evaluate_peer
    from envs.peer.swf import load_swf_peer

    trace = load_swf_peer(LUBLIN)
    return top_functions(lambda: [evaluate_peer(trace, rls_policy(order)[0], True) for order in ORDERS])


def simulator_profile() -> dict[str, Any]:
    """The profile of the 100,000-job simulation."""
    from bench_simulator import case_inputs

    from baselines import FifoFirstFit
    from envs.sim import simulate

    cluster, workload, runtime = case_inputs("synthetic100k")
    return top_functions(lambda: simulate(cluster, workload, FifoFirstFit(), runtime))


def goals(raw: dict[str, Any]) -> list[dict[str, Any]]:
    """Each goal of the issue: what was measured, the goal, met or not, and the profile key of a missed one."""
    by = {(r["policy"], r["gpus"]): r for r in raw["latency"] if "policy" in r}
    out = []
    slurm = raw["slurm"]
    out.append({"part": "`slurm` on the default workload (2,000 jobs, 64 nodes)",
                "now": f"{slurm['new_s']:.1f} s against {slurm['old_s']:.1f} s at {OLD_MAIN} "
                       f"(`fcfs+easy`: {slurm['fcfs_easy_s']:.1f} s): {slurm['ratio']:.1f}× faster",
                "goal": "≥ 20× faster", "met": slurm["ratio"] >= 20, "profile": None})
    for title, family, gpus, goal_dps, p99 in (
            ("EASY backfilling, 1,250 nodes, 500 pending", EASY_FAMILY, 10_000, 1000, 5000.0),
            ("the `k8s:` profiles, 1,250 nodes", K8S_FAMILY, 10_000, 1000, 5000.0),
            ("`+preempt` and conservative backfilling, 512 nodes", HEAVY_FAMILY, 4096, 100, None)):
        for policy in family:
            row = by.get((policy, gpus))
            met = row is not None and row.get("decisions_per_s", 0) >= goal_dps and (
                p99 is None or row.get("p99_us", float("inf")) <= p99)
            goal = f"≥ {goal_dps:,} decisions/s" + (", p99 ≤ 5 ms" if p99 else "")
            out.append({"part": f"{title}: `{policy}`", "now": _latency_text(row), "goal": goal, "met": met,
                        "profile": None if met else f"latency {policy} {gpus}"})
    rls = raw["rlscheduler"]
    minutes = rls["wall_s"] / 60
    out.append({"part": "`evaluate.py --suite rlscheduler` (Lublin-256)",
                "now": f"{minutes:.1f} min for its {rls['runs']} runs with {WORKERS} workers (simulation time: "
                       + ", ".join(f"{kind} {s:.0f} s" for kind, s in rls["sim_s_by_kind"].items()) + ")",
                "goal": "≤ 10 min on 2 cores", "met": minutes <= 10,
                "profile": None if minutes <= 10 else "latency fcfs+conservative 512"})
    vec = raw["vec"]
    out.append({"part": "batched engine, N = 4,096, against the event env",
                "now": f"{vec['ratio']:.1f}× ({vec['vec_steps_per_s']:,} against {vec['event_steps_per_s']:,} "
                       "steps/s)", "goal": "≥ 30×", "met": vec["ratio"] >= 30,
                "profile": None if vec["ratio"] >= 30 else "vec"})
    env = raw["env"]
    out.append({"part": f"event env, against the wave-1 commit {WAVE_ONE}",
                "now": f"{env['ratio_median']:.2f}× its time (median of {len(env['pairs'])} paired whole-process "
                       f"runs; {env['ratio_min']:.2f}-{env['ratio_max']:.2f})",
                "goal": "at least as fast (≤ 1.00×)", "met": env["ratio_median"] <= 1.0,
                "profile": None if env["ratio_median"] <= 1.0 else "env"})
    for row in raw["peer"]:
        ratio = row.get("ratio")
        text = (f"{ratio}× ({row['jobs_per_s']:,} against {row['peer_jobs_per_s']:,} jobs/s)" if ratio
                else f"{row['jobs_per_s']:,} jobs/s (peer not measured: no --peer-repo)")
        met = ratio is not None and ratio >= 10
        out.append({"part": f"peer-compatibility engine, {row['mode']}", "now": text, "goal": "≥ 10× the peer",
                    "met": met, "profile": None if met or ratio is None else "peer"})
    sim = raw["simulator"]
    out.append({"part": "100,000 jobs on 10,000 GPUs (`fifo`)", "now": f"{sim['sim_wall_s']:.1f} s",
                "goal": "< 10 s", "met": sim["sim_wall_s"] < 10,
                "profile": None if sim["sim_wall_s"] < 10 else "simulator"})
    return out


def _latency_text(row: dict[str, Any] | None) -> str:
    if row is None:
        return "not measured"
    if not row.get("decisions"):
        return f"first call {row['first_call_us'] / 1e6:.1f} s, none after it in the time cap"
    return (f"{row['decisions_per_s']:,.0f} decisions/s, p50 {row['p50_us'] / 1e3:.1f} ms, "
            f"p99 {row['p99_us'] / 1e3:.1f} ms (first call {row['first_call_us'] / 1e3:,.0f} ms)")


def profiles(raw: dict[str, Any], wanted: list[str]) -> dict[str, Any]:
    """The profiles of the missed goals (keys of :func:`goals`), measured now."""
    out = {}
    for key in dict.fromkeys(k for k in wanted if k):
        if key.startswith("latency "):
            _, policy, gpus = key.split(" ")
            out[key] = latency_profile(int(gpus), policy, 300)
        elif key == "env":
            out[key] = env_profile()
        elif key == "peer":
            out[key] = peer_profile()
        elif key == "simulator":
            out[key] = simulator_profile()
        elif key == "vec":
            out[key] = {"breakdown": raw["vec"]["breakdown"]}
        print(f"profiled {key}", file=sys.stderr, flush=True)
    return out


NEEDED = {
    "fairshare+easy": "the fair-share usage is integrated afresh over every running job at each decision time "
                      "(4,800 jobs at 1,250 nodes); an incremental sum per account would remove that pass, but it "
                      "changes the floating-point values, so schedules would no longer be bit-identical",
    "fairtree+easy": "as `fairshare+easy`: the decayed usage of every running job is recomputed at each decision "
                     "time",
    "multifactor+easy": "as `fairshare+easy`: its fair-share factor recomputes the decayed usage at each decision "
                        "time",
    "fcfs+conservative": "each decision rebuilds the availability profile from the running jobs and applies every "
                         "queued job's reservation to it breakpoint by breakpoint (and a held job's twice more: "
                         "freed to try it, then held again); keeping the profile between decisions, with the "
                         "breakpoints as rows of 2-D arrays so that a reservation is one vectorized update, is what "
                         "is needed",
    "sjf+conservative": "as `fcfs+conservative`",
    "priority+easy/pack+preempt": "for every node holding lower-priority jobs the victim search copies the whole "
                                  "cluster's state for each trial (`ResourceState.on_node`, `without`); states "
                                  "local to the node are what is needed",
    "k8s:mostallocated+preempt": "as `priority+easy/pack+preempt`: whole-cluster state copies per node and victim",
    "vec": "building the observation takes most of a step: planning every class for every cluster and assembling "
           "features and masks; computing classes only for the clusters and classes that changed is the change "
           "needed",
    "env": "the added time is spread thin over the step (the mask, the observation, the simulator's start and "
           "advance each a few percent slower than at wave 1, and imports about 0.2 s longer: pydantic schemas, "
           "operator formats); no single function holds it",
    "peer": "the rule loop itself (the `decisions` generator, pure Python) holds most of the time; a compiled loop "
            "would be needed for a further 2×",
    "simulator": "the time is spread over the event loop (placement, holdings, the metrics' integration)",
}
"""What a missed goal would need, from its profile (the policy name or the profile key)."""


def page(raw: dict[str, Any], date: str) -> str:
    rows = goals(raw)
    met = sum(r["met"] for r in rows)
    lines = [f"# Speed (issue 32), {date}", "",
             f"Regenerated by `python docs/results/speed.py --date {date}` (about 20 minutes on 2 cores) from "
             "`benchmarks/`; old-against-new ratios come from one run (a `git worktree` of the old commit). "
             f"Machine: {raw['machine']}; commit {raw['commit']}. Figures on a shared 2-core machine move by "
             "10-30% between runs. Every speed-up kept every schedule bit-identical: "
             f"`benchmarks/schedule_digests.py` compares {_digest_count()} (checked by the test suite), and the "
             "live-Slurm records, the peer references and the batched engine's exactness tests pass.", "",
             f"**{met} of {len(rows)} goals met.**", "",
             "| part | now | goal | met |", "|---|---|---|---|"]
    lines += [f"| {r['part']} | {r['now']} | {r['goal']} | {'yes' if r['met'] else '**no**'} |" for r in rows]
    lines += ["", *CHANGES]
    missed = [r for r in rows if not r["met"] and r["profile"]]
    if missed:
        lines += ["", "## Missed goals: where the time goes", "",
                  "Each profile is cProfile's: the functions of most own time, their share of the total (own / "
                  "with callees), and what would be needed.", ""]
        for key in dict.fromkeys(r["profile"] for r in missed):
            lines += _profile_section(key, raw["profiles"].get(key))
    return "\n".join(lines) + "\n"


def _digest_count() -> str:
    """How many seeded runs of how many policies the schedule digests hold."""
    data = json.loads((ROOT / "tests" / "data" / "golden" / "schedule_digests.json").read_text())
    runs = sum(len(d) for d in data["digests"].values())
    return f"{runs} seeded runs of {len(data['digests'])} policies ({', '.join(data['digests'])})"


CHANGES = [
    "## What changed", "",
    "- **`slurm`**: the will-run test gives back each batch of running jobs as a slice of per-(job, GPU) arrays laid "
    "out once per cycle, shares the holdings after each batch among the jobs tested on the same nodes, counts each "
    "holding's whole free GPUs once, and refuses a job short of nodes with enough whole GPUs before its placement "
    "rule runs (`baselines/slurm_backfill.py`).",
    "- **EASY and the `k8s:` profiles**: the running jobs' order by expected end is kept from state to state and "
    "its changes found from the end of the running jobs; placement answers by job shape are kept on the view while "
    "the holdings are unchanged; a job whose GPUs (or share) exceed what is free anywhere is refused before its "
    "rule runs; kube's placement picks the one node that fits without scoring every node "
    "(`envs/sim/profile.py`, `baselines/shapes.py`, `baselines/kubernetes.py`).",
    "- **No backfilling at scale**: a scheduler without backfilling reads only the head of the queue instead of "
    "copying thousands of pending jobs at every decision (100,000 jobs: 50.7 s before).",
    "- **Preemption**: the victim search on a node builds each trial from the node's free shares and the free CPU "
    "and RAM instead of copying the whole cluster's state and then restricting it (`baselines/preemption.py`).",
    "- **Conservative backfilling**: window minima in place, the MIG union skipped while no slice is held, "
    "reservations that recount only their own GPUs, and a held job tried only now and where it held; its first "
    "call at 512 nodes went from 37 s to 10 s, still far from the goal.",
    "",
]
"""The page's summary of the changes (the commits of issue 32 say each with its measurement)."""


def _profile_section(key: str, profile: dict[str, Any] | None) -> list[str]:
    name = key.split(" ")[1] if key.startswith("latency ") else key
    title = (f"`{name}` at {int(key.split(' ')[2]):,} GPUs ({profile and profile.get('decisions')} decisions)"
             if key.startswith("latency ")
             else {"vec": "batched engine at N = 4,096", "env": f"event env ({ENV_STEPS:,} steps)",
                   "peer": "peer engine with backfilling", "simulator": "100,000 jobs on 10,000 GPUs"}[key])
    lines = [f"### {title}", ""]
    if profile is None:
        return [*lines, "Not profiled.", ""]
    if "breakdown" in profile:
        b = profile["breakdown"]
        lines += [f"{b['ms_per_step']} ms a step: observation {b['share_observe']:.0%} (planning the classes "
                  f"{b['share_plan']:.0%}), starting jobs {b['share_start']:.0%}, skipping {b['share_skip']:.0%}; "
                  "top operators: " + ", ".join(f"`{op}` {share:.0%}" for op, share in b["top_ops"].items()) + "."]
    else:
        lines += [f"Total {profile['total_s']:.1f} s under the profiler.", "",
                  "| function | calls | own | with callees |", "|---|---:|---:|---:|"]
        lines += [f"| `{t['function']}` | {t['calls']:,} | {t['own']:.0%} | {t['cumulative']:.0%} |"
                  for t in profile["top"]]
    return [*lines, "", f"Needed: {NEEDED.get(name, 'see the profile')}.", ""]


def machine() -> str:
    """Cores, CPU model and Python of this machine."""
    model = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return f"{os.cpu_count()} cores ({model}), Python {platform.python_version()}"


RAW_KEYS = ("machine", "commit", "slurm", "latency", "rlscheduler", "vec", "env", "peer", "simulator")
"""What a saved measurement holds (``profiles`` besides, once profiled)."""


def _read_raw(path: Path, parser: argparse.ArgumentParser) -> dict[str, Any]:
    """The measurements saved in ``path``; a one-line usage error when it is missing, not JSON or incomplete."""
    try:
        raw = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        parser.error(f"argument --raw: cannot read {path}: {exc}")
    missing = [key for key in RAW_KEYS if key not in raw] if isinstance(raw, dict) else list(RAW_KEYS)
    if missing:
        parser.error(f"argument --raw: {path} lacks {', '.join(missing)} (an interrupted measurement? run without "
                     "--from-raw)")
    return raw


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--date", default=datetime.date.today().isoformat(), help="the page's date (YYYY-MM-DD)")
    parser.add_argument("--raw", type=Path, default=ROOT / "runs" / "speed.json", help="measurements (JSON)")
    parser.add_argument("--from-raw", action="store_true", help="write the page from --raw without measuring")
    parser.add_argument("--reprofile", action="store_true",
                        help="with --from-raw: profile the missed goals of --raw again first")
    parser.add_argument("--peer-repo", type=Path, help="a checkout of DIR-LAB/deep-batch-scheduler")
    args = parser.parse_args()
    if args.reprofile and not args.from_raw:
        parser.error("argument --reprofile: needs --from-raw")
    if args.from_raw:
        raw = _read_raw(args.raw, parser)
        if args.reprofile:
            raw["profiles"] = profiles(raw, [g["profile"] for g in goals(raw) if not g["met"]])
            write_text_atomically(args.raw, json.dumps(raw, indent=1) + "\n")
    else:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                                check=True).stdout.strip()
        raw = {"machine": machine(), "commit": commit}
        steps: list[tuple[str, Callable[[], Any]]] = [
            ("slurm", measure_slurm),
            ("latency", lambda: measure_latency(10_000, EASY_FAMILY + K8S_FAMILY, 1000, 10)
             + measure_latency(4096, HEAVY_FAMILY, 300, 20)),
            ("rlscheduler", measure_rlscheduler), ("vec", measure_vec), ("env", measure_env),
            ("peer", lambda: measure_peer(args.peer_repo)), ("simulator", measure_simulator)]
        args.raw.parent.mkdir(parents=True, exist_ok=True)
        for name, step in steps:
            t0 = time.perf_counter()
            raw[name] = step()
            write_text_atomically(args.raw, json.dumps(raw, indent=1) + "\n")
            print(f"measured {name} in {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
        raw["profiles"] = profiles(raw, [g["profile"] for g in goals(raw) if not g["met"]])
        write_text_atomically(args.raw, json.dumps(raw, indent=1) + "\n")
    out = ROOT / "docs" / "results" / f"{args.date}-speed.md"
    write_text_atomically(out, page(raw, args.date))
    print(f"wrote {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
