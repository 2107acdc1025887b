"""Env steps per second under a random masked policy: one process, and vectorized over subprocesses.

    python benchmarks/bench_env.py [--env gpusched/GPUCluster-v0] [--steps 20000] [--procs 2]

Prints one JSON object per setting: steps, wall seconds, steps/s (env.step + action_masks + the policy's choice).
"""

from __future__ import annotations

import argparse
import json
import time

import gymnasium as gym
import numpy as np
from sb3_contrib.common.maskable.utils import get_action_masks
from stable_baselines3.common.vec_env import SubprocVecEnv

import envs  # noqa: F401  (registers the ids)


def single_process(env_id: str, steps: int, seed: int, **overrides: object) -> dict[str, object]:
    """Steps per second of one env (``overrides``: EnvConfig settings), random masked actions."""
    env = gym.make(env_id, **overrides)
    rng = np.random.default_rng(seed)
    env.reset(seed=seed)
    episodes = 0
    t0 = time.perf_counter()
    for _ in range(steps):
        mask = env.unwrapped.action_masks()
        _, _, terminated, truncated, _ = env.step(int(rng.choice(np.flatnonzero(mask))))
        if terminated or truncated:
            episodes += 1
            env.reset()
    wall = time.perf_counter() - t0
    return {"setting": "single process", "env": env_id, "steps": steps, "episodes": episodes,
            "wall_s": round(wall, 2), "steps_per_s": round(steps / wall)}


def subprocesses(env_id: str, steps: int, procs: int, seed: int) -> dict[str, object]:
    vec = SubprocVecEnv([lambda: gym.make(f"envs:{env_id}") for _ in range(procs)])
    rng = np.random.default_rng(seed)
    vec.seed(seed)
    vec.reset()
    rounds = steps // procs
    t0 = time.perf_counter()
    for _ in range(rounds):
        masks = get_action_masks(vec)
        vec.step(np.array([rng.choice(np.flatnonzero(m)) for m in masks]))
    wall = time.perf_counter() - t0
    vec.close()
    return {"setting": f"SubprocVecEnv x{procs}", "env": env_id, "steps": rounds * procs,
            "wall_s": round(wall, 2), "steps_per_s": round(rounds * procs / wall)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="gpusched/GPUCluster-v0")
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--procs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(json.dumps(single_process(args.env, args.steps, args.seed)))
    print(json.dumps(subprocesses(args.env, args.steps, args.procs, args.seed)))


if __name__ == "__main__":
    main()
