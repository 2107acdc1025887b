"""Train a MaskablePPO agent (permutation-equivariant SlotPolicy) on a GPUClusterEnv variant or the peer-mode env
(gpusched/RLSched-v0), then evaluate it.

    python train.py                                        # configs/experiments/default.yaml, a few CPU minutes
    python train.py --total-timesteps 2000 --run-dir runs/smoke --device cpu
    python train.py --run-dir runs/smoke --resume --total-timesteps 4000   # continue from runs/smoke/model.zip
    python train.py --config configs/experiments/lublin.yaml --set backfill=true --set sampling=outside_test

The run folder holds the resolved config (config.yaml), the model (model.zip), the best model on the periodic
validation episodes (best_model.zip), TensorBoard events (tb/), checkpoints and the final evaluation (eval/ with
results.csv and summary.json), which is also printed beside the heuristics.
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
BEST_MODEL = "best_model.zip"
"""The model with the best periodic-evaluation score (validation episodes, never the final test ones)."""


@dataclass
class Args:
    """Command-line arguments; each overrides the experiment config where it applies."""

    config: Path = ROOT / "configs" / "experiments" / "default.yaml"
    """experiment YAML (env id, env overrides, PPO settings, evaluation)"""
    total_timesteps: int | None = None
    """environment steps to train for (default: the config's)"""
    device: str = "auto"
    """torch device: auto (cuda when present), cuda or cpu"""
    threads: int = 1
    """torch CPU threads (0: torch's default); more threads than free cores slow small-batch PPO many times over"""
    n_envs: int | None = None
    """parallel environments (SubprocVecEnv when > 1; default: the config's)"""
    seed: int = 0
    """seed of the model and of the training environments"""
    run_dir: Path | None = None
    """run folder (default: runs/{env}__{seed}__{time})"""
    resume: bool = False
    """continue training the model in run_dir with its config.yaml (step count and optimizer state kept)"""
    eval: bool = True
    """evaluate the trained model beside the heuristics at the end"""
    set: list[str] = field(default_factory=list)
    """config overrides KEY=VALUE (repeatable; VALUE read as YAML): env settings, or dotted paths (ppo.n_steps=512)"""


def parse_args(argv: list[str] | None) -> Args:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for f in dataclasses.fields(Args):
        flag = "--" + f.name.replace("_", "-")
        help_text = (Args.__doc__ or "") and _field_doc(f.name)
        if f.name == "set":
            parser.add_argument(flag, action="append", default=[], metavar="KEY=VALUE", help=help_text)
        elif f.type in ("bool",):
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=f.default, help=help_text)
        else:
            kind = {"int | None": int, "int": int, "Path": Path, "Path | None": Path}.get(str(f.type), str)
            parser.add_argument(flag, type=kind, default=f.default, help=help_text)
    return Args(**vars(parser.parse_args(argv)))


def _apply_sets(config: dict[str, Any], items: list[str]) -> dict[str, Any]:
    """The experiment config with ``KEY=VALUE`` items applied, each value read as YAML (``true``, ``4``,
    ``[pack, spread]``): a plain KEY is an env setting, a dotted one a path in the config (``ppo.n_steps=512``)."""
    config = yaml.safe_load(yaml.safe_dump(config))  # a deep copy
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise SystemExit(f"--set {item!r}: expected KEY=VALUE")
        path = key.strip().split(".") if "." in key else ["env", key.strip()]
        node = config
        for part in path[:-1]:
            if not isinstance(node.get(part), dict):
                node[part] = {}
            node = node[part]
        node[path[-1]] = yaml.safe_load(value)
    return config


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

    import envs  # noqa: F401  (registers the ids)
    from agents.adapter import CONFIG_FILE

    resumed_config = args.run_dir / CONFIG_FILE if args.resume and args.run_dir else None
    config = yaml.safe_load(Path(resumed_config or args.config).read_text())  # a resumed run keeps its settings
    config = _apply_sets(config, args.set)
    total = args.total_timesteps or int(config["total_timesteps"])
    n_envs = args.n_envs or int(config.get("n_envs", 1))
    device = ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
    if args.threads:
        torch.set_num_threads(args.threads)
    env_id, env_overrides = config["env_id"], dict(config.get("env") or {})
    stamp = time.strftime("%Y%m%d-%H%M%S")
    run_dir = args.run_dir or ROOT / "runs" / f"{env_id.split('/')[-1]}__{args.seed}__{stamp}"
    run_dir.mkdir(parents=True, exist_ok=True)
    env_config = gym.make(env_id, **env_overrides).unwrapped.config
    resolved = {**config, "total_timesteps": total, "n_envs": n_envs, "seed": args.seed, "device": device,
                "env": {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(env_config).items()}}
    (run_dir / CONFIG_FILE).write_text(yaml.safe_dump(resolved, sort_keys=False))

    vec = make_vec(env_id, env_overrides, n_envs, args.seed)
    model_path = run_dir / "model.zip"
    if args.resume:
        model = MaskablePPO.load(str(model_path), env=vec, device=device)
    else:
        model = new_model(config.get("ppo") or {}, vec, device, args.seed, str(run_dir / "tb"))
        if config.get("pretrain"):
            _pretrain(config["pretrain"], model, gym.make(env_id, **env_overrides), args.seed)
    t0 = time.perf_counter()
    model.learn(total_timesteps=total, reset_num_timesteps=not args.resume, tb_log_name="ppo",
                callback=_callbacks(config, env_id, env_overrides, run_dir, n_envs, args.resume))
    wall = time.perf_counter() - t0
    model.save(str(model_path))
    vec.close()
    print(f"trained {total:,} steps in {wall:.0f} s ({total / wall:,.0f} steps/s on {device}); "
          f"model: {model_path} (total steps {model.num_timesteps:,})")
    if args.eval:
        _evaluate(config.get("eval") or {}, model_path, run_dir, env_id, resolved["env"])
    return 0


def make_vec(env_id: str, env_overrides: dict[str, Any], n_envs: int, seed: int) -> Any:
    """``n_envs`` monitored copies of the env (subprocesses when more than one), seeded with ``seed``."""
    import gymnasium as gym
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecMonitor

    def make_env() -> Any:
        return gym.make(f"envs:{env_id}", **env_overrides)

    vec = VecMonitor((SubprocVecEnv if n_envs > 1 else DummyVecEnv)([make_env for _ in range(n_envs)]))
    vec.seed(seed)
    return vec


def new_model(ppo: dict[str, Any], vec: Any, device: str, seed: int, tensorboard_log: str | None) -> Any:
    """A fresh MaskablePPO with the SlotPolicy network; ``ppo`` holds PPO's settings, ``hidden`` (width) and
    optionally ``learning_rate_end`` (the learning rate decays linearly from ``learning_rate`` to it)."""
    from sb3_contrib import MaskablePPO

    from agents.network import SlotPolicy

    settings = dict(ppo)
    hidden = int(settings.pop("hidden", 64))
    if "learning_rate_end" in settings:  # linear decay over training (SB3's progress goes from 1 to 0)
        start, end = float(settings.get("learning_rate", 3e-4)), float(settings.pop("learning_rate_end"))
        settings["learning_rate"] = lambda progress: end + (start - end) * progress
    return MaskablePPO(SlotPolicy, vec, seed=seed, device=device, tensorboard_log=tensorboard_log,
                       policy_kwargs={"hidden": hidden}, **settings)


def _pretrain(spec: dict[str, Any], model: Any, env: Any, seed: int) -> None:
    """Warm start by imitation of the heuristic ``spec["teacher"]`` (an ``rls:`` order on the peer-mode env) on
    ``spec["episodes"]`` episodes (reset seeds 10^6 + 1000 seed + i, never an evaluation seed), ``spec["epochs"]``
    passes at Adam rate ``spec["learning_rate"]``, then ``spec["dagger_rounds"]`` DAgger rounds of as many
    episodes each (the policy drives, the teacher labels)."""
    from agents.imitation import make_teacher, pretrain

    n, rounds = int(spec.get("episodes", 4)), int(spec.get("dagger_rounds", 0))
    seeds = [1_000_000 + 1000 * seed + i for i in range(n * (rounds + 1))]
    stats = pretrain(model, env, make_teacher(env, str(spec["teacher"])), seeds[:n], int(spec.get("epochs", 10)),
                     seed=seed, learning_rate=float(spec.get("learning_rate", 3e-4)),
                     dagger_seeds=[seeds[n * r : n * (r + 1)] for r in range(1, rounds + 1)])
    print(f"pretrained by imitation of {spec['teacher']} ({rounds} DAgger rounds): {stats['decisions']:,} "
          f"decisions, loss {stats['loss']:.3f}, agreement {stats['agreement']:.1%}")


def _callbacks(config: dict[str, Any], env_id: str, env_overrides: dict[str, Any], run_dir: Path,
               n_envs: int, resume: bool) -> list[Any]:
    """Periodic evaluation scalars (beside the best heuristic) and checkpoints, as the config's ``train`` asks."""
    from stable_baselines3.common.callbacks import CheckpointCallback

    from agents.adapter import CHECKPOINT_DIR
    from agents.callbacks import EvalScalars

    train = config.get("train") or {}
    callbacks: list[Any] = []
    if train.get("eval_every_steps"):
        eval_env = {**env_overrides, **(train.get("eval_env") or {})}  # validation episodes may differ in size
        callbacks.append(EvalScalars(env_id, eval_env, train.get("eval_seeds", [2000, 2001]),
                                     (config.get("eval") or {}).get("heuristics", ["fifo"]),
                                     max(1, int(train["eval_every_steps"]) // n_envs), run_dir / BEST_MODEL,
                                     resume))
    if train.get("checkpoint_every_steps"):
        callbacks.append(CheckpointCallback(max(1, int(train["checkpoint_every_steps"]) // n_envs),
                                            str(run_dir / CHECKPOINT_DIR), name_prefix="model"))
    return callbacks


def _evaluate(spec: dict[str, Any], model_path: Path, run_dir: Path, env_id: str, env: dict[str, Any]) -> None:
    """The final evaluation table: the model (and the best one on validation episodes, when periodic evaluation
    saved one) beside the config's heuristics on held-out episodes.

    Peer-mode models run the peer's protocol (10 sequences of 1024 jobs of their trace) beside the ``rls:`` orders
    with the same backfill mode, each model also decoded with every shortlist of ``spec["decode"]``
    (``ORDER@RATIO``); the others run on the simulator on the config's workload and seeds.
    """
    from envs.registration import PEER_ENV_ID
    from evaluate import main as evaluate_main

    models = [str(p) for p in (model_path, run_dir / BEST_MODEL) if p.exists()]
    if env_id == PEER_ENV_ID:
        suffix = "+rlsbackfill" if env.get("backfill") else ""
        decodings = ["", *(f"+{d}" for d in spec.get("decode", []))]  # ORDER@RATIO shortlists beside argmax
        policies = [f"rls:{m}{d}" for m in models for d in decodings] + \
            [f"rls:{h}{suffix}" for h in spec.get("heuristics", ["sjf", "f1"])]
        argv = ["--suite", "rlscheduler", "--workload", f"swf:{env['trace']}"]
    else:
        policies = [*models, *spec.get("heuristics", ["fifo"])]
        argv = ["--workload", str(spec.get("workload", "default")),
                "--seeds", ",".join(str(s) for s in spec.get("seeds", [1000])),
                "--load", str(spec.get("load", 1.0))]
        if spec.get("cluster"):
            argv += ["--cluster", str(spec["cluster"])]
        if spec.get("starts"):  # held-out windows of a trace workload
            argv += ["--starts", ",".join(str(s) for s in spec["starts"]), "--length", str(spec.get("length", 1024))]
    evaluate_main([*argv, "--policies", ",".join(policies), "--out", str(run_dir / "eval"), "--no-plots",
                   "--workers", "1"])


if __name__ == "__main__":
    sys.exit(main())
