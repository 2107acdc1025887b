"""Learnability check: does MaskablePPO beat random and FIFO on the Tiny env within a few CPU minutes?

    python benchmarks/learn_tiny.py [--env gpusched/GPUCluster-Tiny-v0] [--timesteps 100000] [--episodes 30]
                                    [--seed 0]

Trains sb3-contrib's MaskablePPO ("MultiInputPolicy", CPU, 2 threads) on ``--env``; the training env is seeded
once with ``--seed`` and every later episode comes from its own RNG stream. Then it evaluates three policies on
the same held-out episodes (reset seeds 10_000, 10_001, ..., never used in training): the trained agent
(deterministic, masked), a uniformly random masked policy and FIFO (slot 0 with the first placement rule, else
Wait, else the first legal action). Per policy it reports the means over episodes of ``episode_metrics``'
mean_wait_s [s], mean_bsld [dimensionless] and utilization [fraction], and the mean episode return. Prints a
Markdown table, then one JSON line with everything: training wall seconds, train steps/s, and the agent's return
minus each baseline's on the same episodes (mean, standard error, share of episodes where the agent did better).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from sb3_contrib import MaskablePPO

import envs  # noqa: F401  (registers the ids)

EVAL_SEED_BASE = 10_000
"""Held-out episodes use reset seeds EVAL_SEED_BASE + i; training never resets with these."""

METRICS = ("mean_wait_s", "mean_bsld", "utilization")

ActionPolicy = Callable[[dict[str, np.ndarray], np.ndarray], int]
"""Picks an action index from the observation and the boolean action mask."""


def fifo_policy(obs: dict[str, np.ndarray], mask: np.ndarray) -> int:
    """Start the head of the queue with placement rule 0 if legal, else Wait if legal, else the first legal action."""
    if mask[0]:
        return 0
    if mask[-1]:
        return len(mask) - 1
    return int(np.flatnonzero(mask)[0])


def random_policy(seed: int) -> ActionPolicy:
    rng = np.random.default_rng(seed)
    return lambda obs, mask: int(rng.choice(np.flatnonzero(mask)))


def agent_policy(model: MaskablePPO) -> ActionPolicy:
    def act(obs: dict[str, np.ndarray], mask: np.ndarray) -> int:
        action, _ = model.predict(obs, action_masks=mask, deterministic=True)
        return int(action)
    return act


def evaluate(env_id: str, policy: ActionPolicy, episodes: int) -> list[dict[str, float]]:
    """Per held-out episode: the episode metrics and the episode return."""
    env = gym.make(env_id)
    rows: list[dict[str, float]] = []
    for i in range(episodes):
        obs, _ = env.reset(seed=EVAL_SEED_BASE + i)
        episode_return, done, info = 0.0, False, {}
        while not done:
            obs, reward, terminated, truncated, info = env.step(policy(obs, env.unwrapped.action_masks()))
            episode_return += float(reward)
            done = terminated or truncated
        if "episode_metrics" not in info:
            raise RuntimeError(f"{env_id}: held-out episode {i} was truncated before all jobs ended")
        rows.append({**{k: float(info["episode_metrics"][k]) for k in METRICS}, "return": episode_return})
    env.close()
    return rows


def paired_return_gap(agent: list[dict[str, float]], baseline: list[dict[str, float]]) -> dict[str, float]:
    """Agent minus baseline return on the same episodes: mean, standard error, and share of episodes won."""
    gap = np.array([a["return"] - b["return"] for a, b in zip(agent, baseline, strict=True)])
    se = float(gap.std(ddof=1) / np.sqrt(len(gap))) if len(gap) > 1 else float("nan")
    return {"mean": round(float(gap.mean()), 4), "se": round(se, 4), "win_share": round(float(np.mean(gap > 0)), 3)}


def train(env_id: str, timesteps: int, seed: int) -> tuple[MaskablePPO, float]:
    """MaskablePPO with default hyperparameters; returns the model and the training wall time [s]."""
    env = gym.make(env_id)
    env.reset(seed=seed)  # seeds the env's RNG once; later training episodes continue its stream
    model = MaskablePPO("MultiInputPolicy", env, seed=seed, device="cpu", verbose=0)
    t0 = time.perf_counter()
    model.learn(total_timesteps=timesteps)
    return model, time.perf_counter() - t0


def markdown_table(results: dict[str, dict[str, float]]) -> str:
    lines = ["| policy | mean wait [s] | mean bsld | utilization | return |", "|---|---:|---:|---:|---:|"]
    for name, r in results.items():
        lines.append(f"| {name} | {r['mean_wait_s']:.1f} | {r['mean_bsld']:.3f} | {r['utilization']:.3f} "
                     f"| {r['return']:.3f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="gpusched/GPUCluster-Tiny-v0")
    parser.add_argument("--timesteps", type=int, default=100_000)
    parser.add_argument("--episodes", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.seed >= EVAL_SEED_BASE:
        parser.error(f"--seed must be < {EVAL_SEED_BASE} (the held-out seeds start there)")
    torch.set_num_threads(2)

    model, train_wall_s = train(args.env, args.timesteps, args.seed)
    policies: dict[str, ActionPolicy] = {
        "maskable_ppo": agent_policy(model),
        "random_masked": random_policy(args.seed),
        "fifo": fifo_policy,
    }
    rows = {name: evaluate(args.env, policy, args.episodes) for name, policy in policies.items()}
    results = {name: {k: round(float(np.mean([r[k] for r in runs])), 4) for k in runs[0]}
               for name, runs in rows.items()}
    print(markdown_table(results))
    summary: dict[str, Any] = {
        "env": args.env, "timesteps": args.timesteps, "seed": args.seed, "episodes": args.episodes,
        "eval_seeds": [EVAL_SEED_BASE, EVAL_SEED_BASE + args.episodes - 1],
        "train_wall_s": round(train_wall_s, 1), "train_steps_per_s": round(args.timesteps / train_wall_s),
        "results": results,
        "agent_return_gap": {name: paired_return_gap(rows["maskable_ppo"], rows[name])
                             for name in ("random_masked", "fifo")},
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
