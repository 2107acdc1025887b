"""The batched engine's speed beside the event env's, measured in one run: env-only steps/s under random masked
actions, and PPO training steps/s of the torch loop beside SB3 MaskablePPO on the event env (same network).

    python benchmarks/bench_vec.py                              # CPU: N = 1, 64, 1024, 4096
    python benchmarks/bench_vec.py --device cuda --sizes 1,64,1024,4096,16384
    python benchmarks/bench_vec.py --no-ppo --steps 30

Prints one JSON row per setting (engine, device, N, steps, wall seconds, steps/s, ratio to the event env in this
run, peak memory) and a last row with the breakdown of one batched step at the best N (where its time goes). The
env is the default experiment's (hetero-64, 2,000-job episodes, 64 visible slots, 3 placement rules,
work-conserving) on the whole-gpu workload, the one the batched engine supports.
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from pathlib import Path

import torch
from bench_env import single_process

from envs.gymenv.config import EnvConfig
from envs.gymenv.env import GPUClusterEnv
from envs.vec import VecClusterEnv

ENV = {"workload": "whole-gpu", "episode_jobs": 2000, "slots": 64, "work_conserving": True, "wait_scale_s": 86400.0}
"""The default experiment's env settings (configs/experiments/vec_default.yaml)."""


def peak_memory_mib(device: torch.device) -> float:
    """Peak memory so far [MiB]: of the CUDA device, or the process's resident set on CPU."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def event_env_rate(steps: int, seed: int) -> dict[str, object]:
    """Steps/s of one GPUClusterEnv with the ENV settings (one process), random masked actions (bench_env.py's
    loop)."""
    row = single_process("gpusched/GPUCluster-v0", steps, seed, **ENV)
    return {"engine": "event", "device": "cpu", "n": 1, "steps": steps, "wall_s": row["wall_s"],
            "steps_per_s": row["steps_per_s"]}


def random_actions(mask: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """One uniformly random legal action per cluster."""
    scores = torch.rand(mask.shape, generator=generator, device=mask.device)
    return scores.masked_fill(~mask, -1.0).argmax(1)


def vec_rate(config: EnvConfig, n: int, steps: int, device: torch.device, pool: int, seed: int) -> dict[str, object]:
    """Steps/s of N batched clusters (N × steps cluster-steps), random masked actions, after a short warm-up."""
    env = VecClusterEnv(config, n, device=device, seed=seed, workloads=pool)
    generator = torch.Generator(device=device).manual_seed(seed)
    _, mask = env.reset()
    for _ in range(5):
        _, mask, _, _, _ = env.step(random_actions(mask, generator))
    _sync(device)
    t0 = time.perf_counter()
    for _ in range(steps):
        _, mask, _, _, _ = env.step(random_actions(mask, generator))
    _sync(device)
    wall = time.perf_counter() - t0
    return {"engine": "vec", "device": str(device), "n": n, "steps": n * steps, "wall_s": round(wall, 2),
            "steps_per_s": round(n * steps / wall), "peak_mib": round(peak_memory_mib(device))}


def step_breakdown(config: EnvConfig, n: int, steps: int, device: torch.device, pool: int, seed: int) -> dict:
    """Where one batched step's time goes at N clusters: the share of the profiled CPU time per engine part."""
    from torch.profiler import ProfilerActivity, profile, record_function

    env = VecClusterEnv(config, n, device=device, seed=seed, workloads=pool)
    parts = {"start": (env, "_start"), "skip": (env, "_skip"), "plan": (env.placement, "plan"),
             "observe": (env, "_observe")}
    for label, (owner, name) in parts.items():
        method = getattr(owner, name)

        def timed(*args, _method=method, _label=label, **kwargs):
            with record_function(_label):
                return _method(*args, **kwargs)
        setattr(owner, name, timed)
    generator = torch.Generator(device=device).manual_seed(seed)
    _, mask = env.reset()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        for _ in range(steps):
            _, mask, _, _, _ = env.step(random_actions(mask, generator))
        _sync(device)
    totals = {e.key: e.cpu_time_total for e in prof.key_averages() if e.key in parts}
    step_us = sum(v for k, v in totals.items() if k in ("start", "skip", "observe"))
    ops = sorted(((e.key, e.self_cpu_time_total) for e in prof.key_averages() if e.key.startswith("aten::")),
                 key=lambda kv: -kv[1])[:6]
    return {"breakdown_at_n": n, "ms_per_step": round(step_us / steps / 1000, 2),
            **{f"share_{k}": round(v / step_us, 3) for k, v in totals.items()},
            "top_ops": {k: round(v / step_us, 3) for k, v in ops}}


def ppo_rows(config: EnvConfig, device: torch.device, seed: int, sizes: list[int]) -> list[dict[str, object]]:
    """PPO training steps/s, same network and PPO settings (configs/experiments/vec_default.yaml's ppo section):
    SB3 MaskablePPO on one event env (rollouts of 2,048 steps), then the torch loop on N batched clusters
    (rollouts of 4,096 decisions), each timed after one warm-up rollout, from the same freshly built policy."""
    import yaml

    from agents.ppo import new_model
    from agents.ppo_torch import BatchedPPO, batched_model

    ppo = yaml.safe_load((Path(__file__).resolve().parents[1] / "configs/experiments/vec_default.yaml")
                         .read_text())["ppo"]
    sb3 = new_model({**ppo, "n_steps": 2048}, GPUClusterEnv(config), str(device), seed, None)
    sb3.learn(2048)
    t0 = time.perf_counter()
    sb3.learn(4096, reset_num_timesteps=False)
    sb3_rate = 4096 / (time.perf_counter() - t0)
    rows = [{"ppo": "sb3 MaskablePPO, event env", "device": str(device), "n": 1, "steps": 4096,
             "steps_per_s": round(sb3_rate)}]
    for n in sizes:
        rollout = max(1, 4096 // n) * n
        env = VecClusterEnv(config, n, device=device, seed=seed, workloads=16)
        model = batched_model({**ppo, "n_steps": rollout // n}, GPUClusterEnv(config), str(device), seed, None)
        loop = BatchedPPO(model, env, seed)
        loop.learn(rollout)
        _sync(device)
        t0 = time.perf_counter()
        loop.learn(4 * rollout)
        _sync(device)
        rate = 3 * rollout / (time.perf_counter() - t0)
        rows.append({"ppo": "torch loop, batched engine", "device": str(device), "n": n, "steps": 3 * rollout,
                     "steps_per_s": round(rate), "x_sb3": round(rate / sb3_rate, 1),
                     "peak_mib": round(peak_memory_mib(device))})
    return rows


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--sizes", default="1,64,1024,4096", help="numbers of clusters N, comma-separated")
    parser.add_argument("--steps", type=int, default=40, help="batched steps per N (each is N cluster-steps)")
    parser.add_argument("--event-steps", type=int, default=4000, help="steps of the event env")
    parser.add_argument("--pool", type=int, default=16, help="workloads in the batched engine's pool")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    parser.add_argument("--ppo", action=argparse.BooleanOptionalAction, default=True,
                        help="also time PPO training: the torch loop against SB3 MaskablePPO")
    parser.add_argument("--ppo-sizes", default="64,256", help="numbers of clusters of the torch PPO loop")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    config = EnvConfig().replace(**ENV)
    event = event_env_rate(args.event_steps, args.seed)
    print(json.dumps(event), flush=True)
    best = None
    for n in (int(x) for x in args.sizes.split(",")):
        row = vec_rate(config, n, args.steps if n > 1 else 10 * args.steps, device, args.pool, args.seed)
        row["x_event"] = round(row["steps_per_s"] / event["steps_per_s"], 1)
        print(json.dumps(row), flush=True)
        if best is None or row["steps_per_s"] > best["steps_per_s"]:
            best = row
    print(json.dumps(step_breakdown(config, best["n"], 10, device, args.pool, args.seed)), flush=True)
    if args.ppo:
        for row in ppo_rows(config, device, args.seed, [int(x) for x in args.ppo_sizes.split(",")]):
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
