"""Where PPO training time goes (env stepping, rollout inference, updates), per device and setting.

    python benchmarks/train_profile.py [--config configs/experiments/default.yaml] [--devices cpu,cuda]
                                       [--n-envs 1,4] [--hidden 64] [--batch-size 256] [--steps 8192]

For every combination it builds the experiment's env and model as train.py does (SlotPolicy, MaskablePPO,
SubprocVecEnv when n_envs > 1) and trains ``--steps`` steps (one or more rollouts of n_steps x n_envs), timing
SB3's two phases: ``collect_rollouts`` (env steps + the policy's inference on ``device`` + buffer work) and
``train`` (the PPO updates on ``device``). Beside it, the env alone under a random masked policy (one process)
gives the env's share of the rollout, and a batched forward pass gives the inference cost per call. A device
that is not present is reported as skipped. Prints one JSON object per combination.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import torch
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import envs  # noqa: E402, F401  (registers the ids)
from benchmarks.bench_env import single_process  # noqa: E402
from train import make_vec, new_model  # noqa: E402


def inference_ms(model: Any, vec: Any, calls: int = 200) -> float:
    """Milliseconds per masked, deterministic forward pass on a batch of n_envs observations (incl. transfers)."""
    from sb3_contrib.common.maskable.utils import get_action_masks

    obs, masks = vec.reset(), get_action_masks(vec)
    model.predict(obs, action_masks=masks, deterministic=True)  # warm-up (CUDA context, kernels)
    t0 = time.perf_counter()
    for _ in range(calls):
        model.predict(obs, action_masks=masks, deterministic=True)
    if model.device.type == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - t0) / calls * 1e3


def profile(config: dict[str, Any], device: str, n_envs: int, hidden: int, batch_size: int, steps: int,
            seed: int) -> dict[str, Any]:
    env_id, overrides = config["env_id"], dict(config.get("env") or {})
    ppo = {**(config.get("ppo") or {}), "hidden": hidden, "batch_size": batch_size}
    ppo["n_steps"] = max(ppo.get("n_steps", 1024) // n_envs, batch_size // n_envs, 8)
    vec = make_vec(env_id, overrides, n_envs, seed)
    model = new_model(ppo, vec, device, seed, None)
    phases = {"collect_rollouts": 0.0, "train": 0.0}
    for name in phases:
        original = getattr(model, name)

        def timed(*args: Any, _original: Any = original, _name: str = name, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            out = _original(*args, **kwargs)
            if device == "cuda":
                torch.cuda.synchronize()
            phases[_name] += time.perf_counter() - t0
            return out

        setattr(model, name, timed)
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    model.learn(total_timesteps=steps)
    wall = time.perf_counter() - t0
    row = {
        "env": env_id, "device": device, "n_envs": n_envs, "hidden": hidden, "batch_size": batch_size,
        "n_steps": ppo["n_steps"], "n_epochs": model.n_epochs, "steps": model.num_timesteps,
        "wall_s": round(wall, 2), "steps_per_s": round(model.num_timesteps / wall),
        "rollout_s": round(phases["collect_rollouts"], 2), "update_s": round(phases["train"], 2),
        "inference_ms_per_call": round(inference_ms(model, vec), 3),
        "parameters": sum(p.numel() for p in model.policy.parameters()),
    }
    if device == "cuda":
        row["gpu_peak_mib"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
    vec.close()
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=Path, default=ROOT / "configs" / "experiments" / "default.yaml")
    parser.add_argument("--devices", default="cpu,cuda")
    parser.add_argument("--n-envs", default="1,4")
    parser.add_argument("--hidden", default="64")
    parser.add_argument("--batch-size", default="256")
    parser.add_argument("--steps", type=int, default=8192)
    parser.add_argument("--env-steps", type=int, default=3000, help="steps of the env-only measurement")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    config = yaml.safe_load(args.config.read_text())
    overrides = dict(config.get("env") or {})
    env_only = single_process(config["env_id"], args.env_steps, args.seed, **overrides)
    print(json.dumps({**env_only, "setting": "env only, random masked actions, one process",
                      "torch_threads": torch.get_num_threads()}), flush=True)
    for device in args.devices.split(","):
        if device == "cuda" and not torch.cuda.is_available():
            print(json.dumps({"device": "cuda", "skipped": "no CUDA device here"}), flush=True)
            continue
        for n_envs in map(int, args.n_envs.split(",")):
            for hidden in map(int, args.hidden.split(",")):
                for batch in map(int, args.batch_size.split(",")):
                    print(json.dumps(profile(config, device, n_envs, hidden, batch, args.steps, args.seed)),
                          flush=True)


if __name__ == "__main__":
    main()
