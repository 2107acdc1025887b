"""Decision latency at scale: wall-clock time of one ``policy.act(view)`` call, for every policy family, on clusters
of 64 to 10,000 GPUs with a long queue (the overview's fourth pitfall: past a few hundred nodes the scheduler's own
decision time becomes the bottleneck).

Clusters (:func:`latency_cluster`): 8 GPUs per node (two NVLink islands of 4), half the nodes A100-80GB and half H100,
racks of 16 nodes, CPU (128 cores) and RAM (1 TiB) modelled per node: 64, 512, 4,096 and 10,000 GPUs are 8, 64, 512
and 1,250 nodes. Load (:func:`loaded_snapshot`): the default synthetic workload scaled to the cluster at a target
load of 2 (arrivals outpace the cluster, so the queue keeps growing), replayed under ``fcfs+easy`` until ``--queue``
jobs are pending (default 500, the same for every size, so that only the cluster grows). That simulator is pickled,
and every policy continues from a copy of it: each ``act()`` is timed (perf_counter_ns), its action applied and the
next decision taken, for ``--decisions`` calls (after ``--warmup`` untimed ones) or until ``--max-seconds`` of wall
clock have passed, whichever comes first. A call is one decision: a Start, a Preempt or a Wait.

The learned policy (``model``) is :func:`agents.load` of a model file: ``--model PATH`` (a train.py run's
``model.zip``) or, by default, a MaskablePPO SlotPolicy with the default experiment's env settings and random
(seeded) initial weights, saved into a temporary run folder first: its latency does not depend on the weights. Torch
runs on ``--torch-threads`` threads (default 1, as train.py's sb3 engine: on 2 shared cores, two threads make the
forward pass's p99 ten times longer).

Prints one JSON object per (policy, size): decisions timed, their p50 and p99 [µs], decisions/s (decisions / Σ act
time: the policy's own throughput, the simulator's work excluded), the median and range of the queue length they saw,
the running jobs, the time of the very first call (``first_call_us``, warm-up included: where a policy builds
its state from scratch, e.g. conservative reservations or a Tiresias plan), and ``capped`` when the time cap stopped
it before ``--decisions``. The cap is checked between calls; a single call running past ``--max-call-seconds``
(default 60) is interrupted by SIGALRM and ends its run (``cut``; its first call is then reported as that limit):
conservative backfilling's first call on 10,000 GPUs took 6 minutes on 2 cores. With ``--repeat R`` each cell
runs R times from the same snapshot and the medians are printed (p50, p99 and decisions/s, each its own median).

    python benchmarks/bench_latency.py [--sizes 64,512,4096,10000] [--policies fcfs,k8s:mostallocated,...]
        [--decisions 2000] [--max-seconds 20] [--max-call-seconds 60] [--queue 500] [--repeat 1] [--model PATH]
        [--json]

Without ``--json`` a table is printed as well, after the JSON lines.
"""

from __future__ import annotations

import argparse
import gc
import json
import pickle
import signal
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from baselines.registry import make
from envs.core import ClusterSpec
from envs.core.presets import cluster_from_dict
from envs.sim import Simulator
from envs.sim.policy import Preempt, Start, Wait
from envs.workload.synthetic import generate, load_workload_config

ROOT = Path(__file__).resolve().parents[1]
SIZES = (64, 512, 4096, 10_000)
"""Cluster sizes [GPUs] (8 GPUs per node)."""
MODEL = "model"
"""The name of the learned policy in ``--policies``."""
FAMILIES: dict[str, tuple[str, ...]] = {
    "Orders and backfilling": ("fcfs", "fcfs+easy", "fcfs+conservative", "sjf+easy", "fairshare+easy",
                               "fairtree+easy", "multifactor+easy"),
    "Kubernetes filter-and-score": ("k8s:leastallocated", "k8s:mostallocated", "k8s:ratio", "k8s:balanced",
                                    "k8s:mostallocated+preempt"),
    "Preemptive schedulers": ("priority+easy/pack+preempt", "tiresias"),
    "Learned policy": (MODEL,),
}
"""Every policy family measured by default: the orders with backfilling, kube-scheduler's profiles, preemptive
priority, Tiresias and the learned policy."""
POLICIES = tuple(name for names in FAMILIES.values() for name in names)
GPUS_PER_NODE = 8
RACK_NODES = 16
TARGET_LOAD = 2.0
DRIVER = "fcfs+easy"
"""The policy that brings the simulator to the measured state."""


def latency_cluster(n_gpus: int) -> ClusterSpec:
    """``n_gpus`` GPUs (a multiple of 16): nodes of 8 GPUs in two NVLink islands of 4, half A100-80GB and half H100,
    racks of 16 nodes, 128 cores and 1 TiB of RAM per node."""
    n_nodes = n_gpus // GPUS_PER_NODE
    if n_nodes * GPUS_PER_NODE != n_gpus or n_nodes % 2:
        raise SystemExit(f"--sizes: {n_gpus} GPUs is not an even number of {GPUS_PER_NODE}-GPU nodes")
    half = n_nodes // 2
    racks = list(range(-(-n_nodes // RACK_NODES)))
    groups = [{"name": name, "count": half, "gpu_type": gpu_type, "gpus": GPUS_PER_NODE, "island_size": 4,
               "cpus": 128, "ram_gib": 1024, "cache_gib": 2000,
               "racks": racks[k * len(racks) // 2:max((k + 1) * len(racks) // 2, k * len(racks) // 2 + 1)]}
              for k, (name, gpu_type) in enumerate((("a100", "A100-80GB"), ("h100", "H100")))]
    return cluster_from_dict({"name": f"latency-{n_gpus}", "node_groups": groups})


def loaded_snapshot(cluster: ClusterSpec, queue: int, seed: int = 0) -> tuple[bytes, dict[str, Any]]:
    """A pickled :class:`Simulator` at the first decision point with at least ``queue`` pending jobs, reached by
    :data:`DRIVER` on the default workload at load :data:`TARGET_LOAD`; and a description of that state."""
    config = replace(load_workload_config("default"), n_jobs=cluster.n_gpus * 2 + 4 * queue + 3000,
                     target_load=TARGET_LOAD)
    workload = generate(config, seed=seed, capacity_gpus=cluster.n_gpus)
    sim = Simulator(cluster, workload)
    driver = make(DRIVER)
    driver.reset()
    view = sim.view
    while not sim.done and len(view.pending) < queue:
        _apply(sim, driver.act(view))
    if sim.done:
        raise SystemExit(f"{cluster.name}: the workload ended before {queue} jobs were pending")
    state = {"time_s": round(sim.time_s, 1), "pending": len(view.pending), "running": len(view.running),
             "free_gpus": view.free_gpus, "jobs": len(workload)}
    return pickle.dumps(sim), state


def _apply(sim: Simulator, action: Any) -> None:
    if isinstance(action, Start):
        sim.start(action.job_id, action.gpus)
    elif isinstance(action, Preempt):
        sim.preempt(action.job_id)
    elif isinstance(action, Wait):
        sim.wait(action.until_s)
    else:
        raise TypeError(f"not an action: {action!r}")


def random_model(folder: Path, seed: int = 0) -> Path:
    """A MaskablePPO SlotPolicy with random initial weights and the default experiment's env and PPO settings,
    saved as a train.py run folder (``config.yaml`` and ``model.zip``) in ``folder``; returns the model's path."""
    from agents.model_file import save_model
    from agents.ppo import new_model
    from envs.gymenv import EnvConfig, GPUClusterEnv

    experiment = yaml.safe_load((ROOT / "configs" / "experiments" / "default.yaml").read_text())
    env = GPUClusterEnv(config=EnvConfig.from_dict(experiment["env"]))
    ppo = {"hidden": experiment["ppo"]["hidden"]}
    model = new_model(ppo, env, device="cpu", seed=seed, tensorboard_log=None)
    (folder / "config.yaml").write_text(yaml.safe_dump({"env_id": experiment["env_id"], "env": experiment["env"],
                                                        "ppo": ppo, "seed": seed, "device": "cpu"}))
    path = folder / "model.zip"
    save_model(model, path)
    return path


class CallTooLong(Exception):
    """One act() call ran past the per-call limit."""


def _too_long(signum: int, frame: Any) -> None:
    raise CallTooLong


def measure(snapshot: bytes, policy: Any, decisions: int, warmup: int, max_s: float,
            max_call_s: float = 60.0) -> dict[str, Any]:
    """Time ``policy.act`` on a copy of ``snapshot``'s simulator, applying each action, for ``warmup`` untimed and
    then ``decisions`` timed calls or until ``max_s`` seconds of wall clock have passed; a call running past
    ``max_call_s`` is interrupted (SIGALRM) and ends the run (``cut``)."""
    sim: Simulator = pickle.loads(snapshot)
    policy.reset()
    view, act = sim.view, policy.act
    times_ns: list[int] = []
    queue: list[int] = []
    running: list[int] = []
    kinds = {"start": 0, "preempt": 0, "wait": 0}
    gc.collect()
    deadline = time.perf_counter() + max_s
    calls, first_ns = 0, 0
    clock = time.perf_counter_ns
    cut = False
    previous = signal.signal(signal.SIGALRM, _too_long)
    while not sim.done and len(times_ns) < decisions and time.perf_counter() < deadline:
        pending = len(view.pending)
        t0 = clock()
        signal.setitimer(signal.ITIMER_REAL, max_call_s)
        try:
            action = act(view)
        except CallTooLong:
            cut = True
            break
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        elapsed = clock() - t0
        calls += 1
        if calls == 1:
            first_ns = elapsed
        if calls > warmup:
            times_ns.append(elapsed)
            queue.append(pending)
            running.append(len(view.running))
            kinds["start" if isinstance(action, Start) else "preempt" if isinstance(action, Preempt) else "wait"] += 1
        _apply(sim, action)
    signal.signal(signal.SIGALRM, previous)
    if cut and calls == 0:
        first_ns = int(max_call_s * 1e9)
    if not times_ns:
        return {"decisions": 0, "capped": True, "cut": cut, "calls": calls, "first_call_us": first_ns / 1e3}
    t = np.array(times_ns) / 1e3  # [µs]
    return {"decisions": len(t), "p50_us": float(np.percentile(t, 50)), "p99_us": float(np.percentile(t, 99)),
            "max_us": float(t.max()), "decisions_per_s": len(t) / (t.sum() / 1e6),
            "queue_median": int(statistics.median(queue)), "queue_min": min(queue), "queue_max": max(queue),
            "running_median": int(statistics.median(running)), "first_call_us": first_ns / 1e3, **kinds,
            "capped": len(t) < decisions and not sim.done, "cut": cut, "ended": sim.done}


def median_of(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One result from repeats of a cell: the median of each timing, the rest from the median-throughput run."""
    if len(runs) == 1:
        return runs[0]
    timed = [r for r in runs if r["decisions"]] or runs
    middle = sorted(timed, key=lambda r: r.get("decisions_per_s", 0.0))[len(timed) // 2]
    out = dict(middle)
    for key in ("p50_us", "p99_us", "max_us", "decisions_per_s", "first_call_us"):
        if key in middle:
            out[key] = statistics.median(r[key] for r in timed)
    out["repeats"] = len(runs)
    return out


def rounded(row: dict[str, Any]) -> dict[str, Any]:
    return {k: (round(v, 1) if isinstance(v, float) else v) for k, v in row.items()}


def table(rows: list[dict[str, Any]]) -> str:
    """A plain-text table of the rows."""
    lines = [f"{'policy':<28} {'GPUs':>6} {'nodes':>5} {'queue':>5} {'n':>5} {'p50 µs':>10} {'p99 µs':>10} "
             f"{'decisions/s':>11}"]
    for r in rows:
        if not r["decisions"]:
            lines.append(f"{r['policy']:<28} {r['gpus']:>6} {r['nodes']:>5} {'':>5} {0:>5}  (nothing measured)")
            continue
        lines.append(f"{r['policy']:<28} {r['gpus']:>6} {r['nodes']:>5} {r['queue_median']:>5} {r['decisions']:>5} "
                     f"{r['p50_us']:>10,.0f} {r['p99_us']:>10,.0f} {r['decisions_per_s']:>11,.0f}"
                     + ("  (capped)" if r["capped"] else ""))
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="cluster sizes [GPUs], comma-separated")
    parser.add_argument("--policies", default=",".join(POLICIES),
                        help=f"policy names (python -m baselines), comma-separated; '{MODEL}' is the learned policy")
    parser.add_argument("--decisions", type=int, default=2000, help="timed act() calls per (policy, size)")
    parser.add_argument("--warmup", type=int, default=20, help="untimed act() calls first")
    parser.add_argument("--max-seconds", type=float, default=20.0,
                        help="wall-clock cap per (policy, size) run [s]; fewer decisions are then reported")
    parser.add_argument("--max-call-seconds", type=float, default=60.0,
                        help="one act() call running longer is interrupted and ends its run [s]")
    parser.add_argument("--queue", type=int, default=500, help="pending jobs at the snapshot")
    parser.add_argument("--repeat", type=int, default=1, help="runs per (policy, size); medians are reported")
    parser.add_argument("--model", type=Path, default=None,
                        help="a trained model.zip for the 'model' policy (default: random weights)")
    parser.add_argument("--torch-threads", type=int, default=1,
                        help="torch CPU threads for the learned policy (1: no thread contention on a shared machine)")
    parser.add_argument("--seed", type=int, default=0, help="workload seed")
    parser.add_argument("--json", action="store_true", help="JSON lines only (no table)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    names = [p.strip() for p in args.policies.split(",") if p.strip()]
    for name in names:
        if name != MODEL:
            make(name)  # an unknown name fails before anything is measured
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench_latency_") as tmp:
        model_path = args.model
        if MODEL in names:
            import torch

            torch.set_num_threads(args.torch_threads)
            if model_path is None:
                model_path = random_model(Path(tmp))
        for gpus in sizes:
            cluster = latency_cluster(gpus)
            t0 = time.perf_counter()
            snapshot, state = loaded_snapshot(cluster, args.queue, args.seed)
            print(json.dumps({"snapshot": cluster.name, "nodes": cluster.n_nodes, **state,
                              "driver": DRIVER, "build_s": round(time.perf_counter() - t0, 1)}),
                  file=sys.stderr, flush=True)
            for name in names:
                runs = []
                for _ in range(args.repeat):
                    if name == MODEL:
                        from agents import load
                        policy = load(model_path)
                    else:
                        policy = make(name)
                    runs.append(measure(snapshot, policy, args.decisions, args.warmup, args.max_seconds,
                                        args.max_call_seconds))
                family = next((title for title, members in FAMILIES.items() if name in members), "other")
                row = {"policy": name, "family": family, "gpus": gpus, "nodes": cluster.n_nodes,
                       **rounded(median_of(runs))}
                if name == MODEL:
                    row["model"] = "random weights" if args.model is None else str(args.model)
                rows.append(row)
                print(json.dumps(row), flush=True)
    if not args.json:
        print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
