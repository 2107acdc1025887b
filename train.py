"""Train a MaskablePPO agent (permutation-equivariant SlotPolicy) on a GPUClusterEnv variant, then evaluate it.

    python train.py                                        # configs/experiments/default.yaml, a few CPU minutes
    python train.py --total-timesteps 2000 --run-dir runs/smoke --device cpu
    python train.py --run-dir runs/smoke --resume --total-timesteps 4000   # continue from runs/smoke/model.zip

The run folder holds the resolved config (config.yaml), the model (model.zip), TensorBoard events (tb/) and the
final evaluation (eval/ with results.csv and summary.json), which is also printed beside the heuristics.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent


@dataclass
class Args:
    """Command-line arguments; each overrides the experiment config where it applies."""

    config: Path = ROOT / "configs" / "experiments" / "default.yaml"
    """experiment YAML (env id, env overrides, PPO settings, evaluation)"""
    total_timesteps: int | None = None
    """environment steps to train for (default: the config's)"""
    device: str = "auto"
    """torch device: auto (cuda when present), cuda or cpu"""
    n_envs: int | None = None
    """parallel environments (SubprocVecEnv when > 1; default: the config's)"""
    seed: int = 0
    """seed of the model and of the training environments"""
    run_dir: Path | None = None
    """run folder (default: runs/{env}__{seed}__{time})"""
    resume: bool = False
    """continue training the model in run_dir (step count and optimizer state kept)"""
    eval: bool = True
    """evaluate the trained model beside the heuristics at the end"""
    extra: dict[str, Any] = field(default_factory=dict)


def parse_args(argv: list[str] | None) -> Args:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for f in dataclasses.fields(Args):
        if f.name == "extra":
            continue
        flag = "--" + f.name.replace("_", "-")
        help_text = (Args.__doc__ or "") and _field_doc(f.name)
        if f.type in ("bool",):
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=f.default, help=help_text)
        else:
            kind = {"int | None": int, "int": int, "Path": Path, "Path | None": Path}.get(str(f.type), str)
            parser.add_argument(flag, type=kind, default=f.default, help=help_text)
    return Args(**vars(parser.parse_args(argv)))


def _field_doc(name: str) -> str:
    """The docstring under a field of Args (the line after its definition)."""
    lines = Path(__file__).read_text().splitlines()
    for i, line in enumerate(lines):
        if line.strip().startswith(f"{name}:"):
            return lines[i + 1].strip().strip('"')
    return ""


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import gymnasium as gym
    import torch
    from sb3_contrib import MaskablePPO
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecMonitor

    import envs  # noqa: F401  (registers the ids)
    from agents.adapter import CONFIG_FILE
    from agents.network import SlotPolicy

    config = yaml.safe_load(Path(args.config).read_text())
    total = args.total_timesteps or int(config["total_timesteps"])
    n_envs = args.n_envs or int(config.get("n_envs", 1))
    device = ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
    env_id, env_overrides = config["env_id"], dict(config.get("env") or {})
    stamp = time.strftime("%Y%m%d-%H%M%S")
    run_dir = args.run_dir or ROOT / "runs" / f"{env_id.split('/')[-1]}__{args.seed}__{stamp}"
    run_dir.mkdir(parents=True, exist_ok=True)
    env_config = gym.make(env_id, **env_overrides).unwrapped.config
    resolved = {**config, "total_timesteps": total, "n_envs": n_envs, "seed": args.seed, "device": device,
                "env": {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(env_config).items()}}
    (run_dir / CONFIG_FILE).write_text(yaml.safe_dump(resolved, sort_keys=False))

    def make_env() -> Any:
        return gym.make(f"envs:{env_id}", **env_overrides)

    vec = VecMonitor((SubprocVecEnv if n_envs > 1 else DummyVecEnv)([make_env for _ in range(n_envs)]))
    vec.seed(args.seed)
    ppo = dict(config.get("ppo") or {})
    hidden = int(ppo.pop("hidden", 64))
    model_path = run_dir / "model.zip"
    if args.resume:
        model = MaskablePPO.load(str(model_path), env=vec, device=device)
    else:
        model = MaskablePPO(SlotPolicy, vec, seed=args.seed, device=device, tensorboard_log=str(run_dir / "tb"),
                            policy_kwargs={"hidden": hidden}, **ppo)
    t0 = time.perf_counter()
    model.learn(total_timesteps=total, reset_num_timesteps=not args.resume, tb_log_name="ppo",
                callback=_callbacks(config, env_id, env_overrides, run_dir, n_envs))
    wall = time.perf_counter() - t0
    model.save(str(model_path))
    vec.close()
    print(f"trained {total:,} steps in {wall:.0f} s ({total / wall:,.0f} steps/s on {device}); "
          f"model: {model_path} (total steps {model.num_timesteps:,})")
    if args.eval:
        _evaluate(config.get("eval") or {}, model_path, run_dir, env_id, resolved["env"])
    return 0


def _callbacks(config: dict[str, Any], env_id: str, env_overrides: dict[str, Any], run_dir: Path,
               n_envs: int) -> list[Any]:
    """Periodic evaluation scalars (beside the best heuristic) and checkpoints, as the config's ``train`` asks."""
    from stable_baselines3.common.callbacks import CheckpointCallback

    from agents.callbacks import EvalScalars

    train = config.get("train") or {}
    callbacks: list[Any] = []
    if train.get("eval_every_steps"):
        callbacks.append(EvalScalars(env_id, env_overrides, train.get("eval_seeds", [2000, 2001]),
                                     (config.get("eval") or {}).get("heuristics", ["fifo"]),
                                     max(1, int(train["eval_every_steps"]) // n_envs)))
    if train.get("checkpoint_every_steps"):
        callbacks.append(CheckpointCallback(max(1, int(train["checkpoint_every_steps"]) // n_envs),
                                            str(run_dir / "checkpoints"), name_prefix="model"))
    return callbacks


def _evaluate(spec: dict[str, Any], model_path: Path, run_dir: Path, env_id: str, env: dict[str, Any]) -> None:
    """The final evaluation table: the model beside the config's heuristics on held-out episodes.

    Peer-mode models run the peer's protocol (10 sequences of 1024 jobs of their trace) beside the ``rls:`` orders
    with the same backfill mode; the others run on the simulator on the config's workload and seeds.
    """
    from envs.registration import PEER_ENV_ID
    from evaluate import main as evaluate_main

    if env_id == PEER_ENV_ID:
        suffix = "+rlsbackfill" if env.get("backfill") else ""
        policies = [f"rls:{model_path}", *(f"rls:{h}{suffix}" for h in spec.get("heuristics", ["sjf", "f1"]))]
        argv = ["--suite", "rlscheduler", "--workload", f"swf:{env['trace']}"]
    else:
        policies = [str(model_path), *spec.get("heuristics", ["fifo"])]
        argv = ["--workload", str(spec.get("workload", "default")),
                "--seeds", ",".join(str(s) for s in spec.get("seeds", [1000]))]
        if spec.get("cluster"):
            argv += ["--cluster", str(spec["cluster"])]
    evaluate_main([*argv, "--policies", ",".join(policies), "--out", str(run_dir / "eval"), "--no-plots",
                   "--workers", "1"])


if __name__ == "__main__":
    sys.exit(main())
