"""Train a MaskablePPO agent (permutation-equivariant SlotPolicy) on a GPUClusterEnv variant or the peer-mode env
(gpusched/RLSched-v0), then evaluate it.

    python train.py                                        # configs/experiments/default.yaml, about 2 min on 2 cores
    python train.py --config configs/experiments/vec_default.yaml   # the batched engine (GPU when present)
    python train.py --total-timesteps 2000 --run-dir runs/smoke --device cpu
    python train.py --run-dir runs/smoke --resume          # continue a run (killed or finished) to its total
    python train.py --run-dir runs/smoke --resume --total-timesteps 8000   # ... or to a new total
    python train.py --config configs/experiments/lublin.yaml --set backfill=true --set sampling=outside_test
    python train.py --sweep configs/sweeps/seeds-lr.yaml  # seeds × learning rates on Ray Tune (agents.sweep)

The run folder holds the resolved config (config.yaml), the model (model.zip), the best model on the periodic
validation episodes (best_model.zip, its score in best_model.json), TensorBoard events (tb/), checkpoints (a warm
start as model_0_steps.zip, then one every train.checkpoint_every_steps, by default every rollout) and the final
evaluation (eval/ with results.csv and summary.json), which is also printed beside the heuristics. Every file is
written atomically, so a killed run resumes from its newest checkpoint. The experiment is checked before anything
runs: an unknown key or a wrong type is a one-line error naming the file and the key.

The experiment's ``engine`` picks how PPO runs: ``sb3`` (the default) is SB3's MaskablePPO on ``n_envs`` event
envs; ``vec`` simulates ``vec.num_envs`` clusters in lockstep as tensors (envs.vec) and runs PPO on the same device
(agents.ppo_torch). Both train the same network from the same ``ppo:`` settings and leave the same run folder;
the imitation warm start, validation, checkpoints and the final evaluation run on the event simulator for both.
Progress bars (imitation, PPO steps and the latest validation score) go to stderr.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import dataclasses
import functools
import itertools
import os
import re
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from envs.core.cli import ArgumentParser, at_least, run_cli
from envs.core.errors import ConfigError

if TYPE_CHECKING:
    from agents.sweep import TrialRun

ROOT = Path(__file__).resolve().parent
BEST_MODEL = "best_model.zip"
"""The model with the best periodic-evaluation score (validation episodes, never the final test ones)."""
DEVICES = re.compile(r"auto|cpu|cuda(:\d+)?|mps")
"""The --device values: auto (cuda when present), cpu, cuda, cuda:N or mps."""


@dataclass
class Args:
    """Command-line arguments; each overrides the experiment config where it applies."""

    config: Path = ROOT / "configs" / "experiments" / "default.yaml"
    """experiment YAML (env id, env overrides, PPO settings, evaluation)"""
    sweep: Path | None = None
    """sweep YAML (configs/sweeps/): train the experiment once per trial (the file's seeds × settings of ppo. and
    env. keys, early stopping if it asks) on local Ray Tune, each trial a run folder in the sweep folder (--run-dir,
    default runs/sweep-SWEEP__EXPERIMENT), then summary tables; rerun the same command to continue a killed sweep"""
    total_timesteps: int | None = None
    """environment steps the run trains to (default: the config's; with --resume, a new total)"""
    device: str = "auto"
    """torch device: auto (cuda when present), cpu, cuda, cuda:N or mps"""
    threads: int | None = None
    """torch CPU threads (default: 1 with engine sb3, where more than the free cores slow its small batches many
    times over; every core with engine vec, whose batches are large)"""
    n_envs: int | None = None
    """parallel environments (SubprocVecEnv when > 1; with engine vec, its clusters; default: the config's)"""
    seed: int = 0
    """seed of the model and of the training environments (a resumed run keeps its own)"""
    run_dir: Path | None = None
    """run folder (default: runs/{env}__{seed}__{time})"""
    resume: bool = False
    """continue the run in run_dir to its total: from model.zip, else from its newest checkpoint"""
    overwrite: bool = False
    """clear an existing train.py run folder first (without it or --resume, a run_dir holding anything is refused)"""
    eval: bool = True
    """evaluate the trained model beside the heuristics at the end"""
    progress: bool = True
    """progress bars on stderr (imitation episodes and passes, PPO steps)"""
    set: list[str] = field(default_factory=list)
    """config overrides KEY=VALUE (repeatable; VALUE read as YAML): env settings, or dotted paths (ppo.n_steps=512)"""
    debug: bool = False
    """show the traceback of an error instead of its one line"""


def _device(text: str) -> str:
    if not DEVICES.fullmatch(text):
        raise argparse.ArgumentTypeError(f"must be auto, cpu, cuda, cuda:N or mps, got {text!r}")
    return text


def parse_args(argv: list[str] | None) -> Args:
    parser = ArgumentParser(prog="train.py", description=__doc__.split("\n\n")[0])
    kinds = {"total_timesteps": at_least(1), "n_envs": at_least(1), "threads": at_least(1), "seed": at_least(0),
             "device": _device}
    for f in dataclasses.fields(Args):
        flag = "--" + f.name.replace("_", "-")
        help_text = _field_doc(f.name)
        if f.name == "set":
            parser.add_argument(flag, action="append", default=[], metavar="KEY=VALUE", help=help_text)
        elif f.type in ("bool",):
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=f.default, help=help_text)
        else:
            kind = kinds.get(f.name, Path if "Path" in str(f.type) else str)
            parser.add_argument(flag, type=kind, default=f.default, help=help_text)
    args = Args(**vars(parser.parse_args(argv)))
    if args.resume and args.run_dir is None:
        parser.error("argument --resume: needs --run-dir (the run to continue)")
    if args.sweep is not None and (args.resume or args.overwrite):
        parser.error("argument --sweep: not allowed with --resume or --overwrite (rerun a sweep to continue it)")
    given = sys.argv[1:] if argv is None else argv
    if args.sweep is not None and any(a == "--seed" or a.startswith("--seed=") for a in given):
        parser.error("argument --seed: not allowed with --sweep (the sweep file's seeds are the trials' seeds)")
    if args.resume and args.overwrite:
        parser.error("argument --overwrite: not allowed with --resume (one continues the run, the other clears it)")
    return args


def _field_doc(name: str) -> str:
    """The docstring under a field of Args (the string after its definition), on one line."""
    tree = ast.parse(Path(__file__).read_text())
    body = next(node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "Args").body
    for field_node, doc in itertools.pairwise(body):
        if (isinstance(field_node, ast.AnnAssign) and isinstance(field_node.target, ast.Name)
                and field_node.target.id == name and isinstance(doc, ast.Expr)
                and isinstance(doc.value, ast.Constant) and isinstance(doc.value.value, str)):
            return " ".join(doc.value.value.split())
    return ""


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    return run_cli("train.py", lambda: held_train(args) if args.sweep is None else sweep(args), args.debug)


def resolve_device(text: str) -> str:
    """The torch device ``--device`` names (``auto``: cuda when present, else cpu); a one-line ConfigError for a
    device this machine does not have, rather than training elsewhere than the run folder records."""
    import torch

    if text == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if text.startswith("cuda"):
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        index = int(text.partition(":")[2] or 0)
        if index >= count:
            raise ConfigError(f"--device {text}: this machine has {count} CUDA device(s); use --device auto or cpu")
    if text == "mps" and not torch.backends.mps.is_available():
        raise ConfigError("--device mps: not available on this machine; use --device auto or cpu")
    return text


def held_train(args: Args) -> int:
    """:func:`train`, its run folder held by this process until the run ends (:func:`open_run_dir`)."""
    with contextlib.ExitStack() as stack:
        return train(args, stack)


def open_run_dir(args: Args, default: Path, stack: contextlib.ExitStack) -> Path:
    """The run folder, held by this process for as long as ``stack`` is open (a second train.py on it gets a
    one-line error): ``--run-dir`` (a resumed run's as it is; a new run's created, and refused when it holds
    anything unless ``--overwrite``, which clears a train.py run folder first), or a new folder named ``default``
    (``default-2``, ... when that exists)."""
    from agents.model_file import CONFIG_FILE
    from envs.core.files import LOCK_FILE, folder_lock, new_folder

    if args.run_dir is None:
        folder = new_folder(default)
        stack.enter_context(folder_lock(folder, f"run folder {folder}"))
        return folder
    folder = args.run_dir
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"--run-dir {folder}: exists and is not a folder")
    held = [child for child in folder.iterdir() if child.name != LOCK_FILE] if folder.exists() else []
    if held and not args.resume:  # refused before anything is written into someone else's folder
        if not args.overwrite:
            raise ConfigError(f"--run-dir {folder}: holds a run already; --resume continues it, --overwrite clears "
                              "it first, or choose another folder")
        if not (folder / CONFIG_FILE).is_file():
            raise ConfigError(f"--run-dir {folder}: --overwrite clears only a train.py run folder (one with "
                              f"{CONFIG_FILE}); this one has none, so nothing was removed")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"--run-dir {folder}: cannot create it ({exc.strerror or exc})") from None
    stack.enter_context(folder_lock(folder, f"--run-dir {folder}"))
    if held and not args.resume:
        for child in (c for c in folder.iterdir() if c.name != LOCK_FILE):  # listed again: now that it is held
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()
        print(f"--overwrite: cleared {folder}")
    return folder


def resume_source(run_dir: Path) -> Path:
    """What ``--resume`` continues from: ``model.zip``, else the newest checkpoint that is a complete zip file."""
    import zipfile

    from agents.model_file import checkpoints

    model = run_dir / "model.zip"
    if model.is_file():
        return model
    steps = {n: path for n, path in checkpoints(run_dir).items() if zipfile.is_zipfile(path)}
    if not steps:
        raise ConfigError(f"--resume: {run_dir} has no model.zip and no checkpoint to continue from")
    return steps[max(steps)]


def train(args: Args, stack: contextlib.ExitStack,
          on_validation: Callable[[int, dict[str, float]], None] | None = None) -> int:
    """The training run ``args`` ask for, its run folder held while ``stack`` is open (``on_validation``: handed
    each validation, :class:`agents.callbacks.EvalScalars`); the exit status."""
    import gymnasium as gym
    import torch

    import envs  # noqa: F401  (registers the ids)
    from agents.experiment import apply_sets, check_experiment, read_experiment
    from agents.model_file import CONFIG_FILE, checkpoint_path, load_model, save_model
    from agents.ppo import new_model
    from agents.ppo_torch import BatchedPPO, VecSettings, batched_model
    from envs.core.files import write_text_atomically

    if args.resume:
        config_path = args.run_dir / CONFIG_FILE
        if not config_path.is_file():
            raise ConfigError(f"--resume: {args.run_dir} has no {CONFIG_FILE} (not a train.py run folder)")
    else:
        config_path = args.config
    config = apply_sets(read_experiment(config_path), args.set)  # a resumed run keeps its own settings
    if args.set:
        check_experiment(config, f"{config_path.name} with --set")
    if config.get("recipe"):
        return train_recipe_run(args, config, stack)
    source = resume_source(args.run_dir) if args.resume else None
    total = args.total_timesteps or int(config["total_timesteps"])
    engine = str(config.get("engine", "sb3"))
    settings = VecSettings.from_section(config.get("vec")) if engine == "vec" else None
    if settings is not None and args.n_envs:
        settings = dataclasses.replace(settings, num_envs=args.n_envs)
    n_envs = settings.num_envs if settings is not None else args.n_envs or int(config.get("n_envs", 1))
    seed = int(config.get("seed", args.seed)) if args.resume else args.seed
    device = resolve_device(args.device)
    torch.set_num_threads(args.threads or ((os.cpu_count() or 1) if settings is not None else 1))
    env_id, env_overrides = str(config["env_id"]), dict(config.get("env") or {})
    if env_id not in gym.registry:
        known = ", ".join(sorted(i for i in gym.registry if i.startswith("gpusched/")))
        raise ConfigError(f"{config_path.name}: env_id: unknown id {env_id!r} (known: {known})")
    try:
        env_config = gym.make(env_id, **env_overrides).unwrapped.config
    except ConfigError as exc:
        raise ConfigError(f"{config_path.name}: {exc}") from exc
    envs_section = {"vec": dataclasses.asdict(settings)} if settings is not None else {"n_envs": n_envs}
    resolved = {**config, "engine": engine, "total_timesteps": total, **envs_section, "seed": seed, "device": device,
                "env": {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(env_config).items()}}
    try:  # the final evaluation's policies, workload and cluster are checked now, before training
        final = _final_evaluation(config.get("eval") or {}, env_id, resolved["env"])
    except ConfigError as exc:
        raise ConfigError(f"{config_path.name}: eval: {exc}") from exc
    stamp = time.strftime("%Y%m%d-%H%M%S")
    run_dir = open_run_dir(args, ROOT / "runs" / f"{env_id.split('/')[-1]}__{seed}__{stamp}", stack)
    write_text_atomically(run_dir / CONFIG_FILE, yaml.safe_dump(resolved, sort_keys=False))

    vec = make_vec(env_id, env_overrides, n_envs, seed) if settings is None else None  # SB3's event envs
    if args.resume:
        model = load_model(source, resolved, env=vec, device=device)
        model.tensorboard_log = str(run_dir / "tb")  # the run folder decides, not the model file's own entry
        print(f"resumed from {source} ({model.num_timesteps:,} steps; training to {total:,})")
    else:
        ppo, tb = config.get("ppo") or {}, str(run_dir / "tb")
        model = (new_model(ppo, vec, device, seed, tb) if vec is not None
                 else batched_model(ppo, gym.make(env_id, **env_overrides), device, seed, tb))
    batched = None  # built before the warm start, so that a config the engine refuses fails at once
    if settings is not None:
        try:
            batched = make_batched(env_config, settings, device, seed, model.num_timesteps)
        except ConfigError as exc:
            raise ConfigError(f"{config_path.name}: engine: vec: {exc}") from exc
    if not args.resume and config.get("pretrain"):
        _pretrain(config["pretrain"], model, gym.make(env_id, **env_overrides), seed, args.progress)
        warm_start = checkpoint_path(run_dir, 0)  # a resumed run keeps the warm start
        warm_start.parent.mkdir(exist_ok=True)
        save_model(model, warm_start)
    callbacks = _callbacks(resolved, env_id, env_overrides, run_dir, n_envs, args.resume, args.progress,
                           on_validation)
    start, t0 = model.num_timesteps, time.perf_counter()
    if total > start and batched is not None:
        BatchedPPO(model, batched, seed).learn(total, callback=callbacks, tb_log_name="ppo")
    elif total > start:
        model.learn(total_timesteps=total - start, reset_num_timesteps=False, tb_log_name="ppo", callback=callbacks)
    wall = time.perf_counter() - t0
    model_path = run_dir / "model.zip"
    save_model(model, model_path)
    if vec is not None:
        vec.close()
    trained = model.num_timesteps - start
    speed = f" ({trained / wall:,.0f} steps/s on {model.device})" if trained else ""
    if model.device.type == "cuda":
        speed += f", peak GPU memory {torch.cuda.max_memory_allocated(model.device) / 2**20:,.0f} MiB"
    print(f"trained {trained:,} steps in {wall:.0f} s{speed}; model: {model_path} (total steps "
          f"{model.num_timesteps:,})")
    if not args.eval:
        return 0
    status = _evaluate(final, model_path, run_dir)
    if status:
        print(f"train.py: error: the final evaluation failed (exit status {status}); the model is saved",
              file=sys.stderr)
    return status


def sweep(args: Args) -> int:
    """The sweep of ``--sweep`` (:mod:`agents.sweep`) over the experiment of ``--config`` (``--set`` and
    ``--total-timesteps`` applied to every trial) in ``--run-dir`` or ``runs/sweep-SWEEP__EXPERIMENT``; 0 when
    every trial finished or was stopped early."""
    from agents.sweep import run_sweep
    from agents.sweep_plan import read_sweep

    plan = read_sweep(args.sweep, args.config, args.set, args.total_timesteps)
    folder = args.run_dir or ROOT / "runs" / f"sweep-{args.sweep.stem}__{args.config.stem}"
    return run_sweep(plan, folder, functools.partial(sweep_trial, args))


def sweep_trial(args: Args, trial: TrialRun) -> int:
    """One trial of a sweep (:class:`agents.sweep.TrialRun`): this command's options, the trial's experiment, seed
    and run folder (continued when it holds a checkpoint or a model, else started afresh), threads as its CPUs
    unless ``--threads``, device (with ``--device auto``) cuda when it holds a GPU share, else cpu; no progress
    bars."""
    from agents.model_file import checkpoints

    started = (trial.run_dir / "model.zip").is_file() or bool(checkpoints(trial.run_dir))
    device = args.device if args.device != "auto" else "cuda" if trial.gpu else "cpu"
    run = dataclasses.replace(args, config=trial.experiment, sweep=None, seed=trial.seed, run_dir=trial.run_dir,
                              resume=started, overwrite=not started, set=[], progress=False, device=device,
                              threads=args.threads or max(1, int(trial.cpus)))
    with contextlib.ExitStack() as stack:
        return train(run, stack, trial.report)


def train_recipe_run(args: Args, config: dict[str, Any], stack: contextlib.ExitStack) -> int:
    """A heuristic-selection recipe (``recipe:``): the world resolved from its learning-suite case (the candidates
    ranked on the case's validation seeds unless listed), trained in the run folder, resumable."""
    import torch
    from torch.utils.tensorboard import SummaryWriter

    from agents.model_file import CONFIG_FILE
    from agents.recipes import recipe_settings, train_recipe
    from envs.core.files import write_text_atomically
    from evaluation.learning import selection_world

    recipe = str(config["recipe"])
    settings = recipe_settings(recipe, config.get(recipe))
    seed = int(config.get("seed", args.seed)) if args.resume else args.seed
    torch.set_num_threads(args.threads or 1)
    device = resolve_device(args.device)
    world = selection_world(config["world"])
    resolved = {**config, "seed": seed, "device": device,
                "world": {**config["world"], "candidates": list(world.candidates), "train_seeds": list(world.train)}}
    stamp = time.strftime("%Y%m%d-%H%M%S")
    run_dir = open_run_dir(args, ROOT / "runs" / f"{recipe}__{world.workload.split(':')[0]}__{seed}__{stamp}", stack)
    write_text_atomically(run_dir / CONFIG_FILE, yaml.safe_dump(resolved, sort_keys=False))
    print(f"{recipe} on {config['world']['case']} (updates on {device}): candidates "
          f"{', '.join(world.candidates)} (the reference first); "
          f"{len(world.train)} training seeds, {len(world.validation)} validation seeds; run folder {run_dir}")
    writer = SummaryWriter(str(run_dir / "tb"))
    t0 = time.perf_counter()
    try:
        result = train_recipe(recipe, settings, world, run_dir, seed, writer, device=device)
    finally:
        writer.close()
    print(f"trained in {time.perf_counter() - t0:.0f} s; best validation mean wait "
          f"{result['best_validation_ratio']:.3f} x the reference's; models: {run_dir / 'model.zip'}, "
          f"{run_dir / BEST_MODEL}")
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


def make_batched(env_config: Any, settings: Any, device: str, seed: int, steps: int) -> Any:
    """The batched engine (:class:`envs.vec.VecClusterEnv`): ``settings.num_envs`` clusters of ``env_config`` on
    ``device``, their episodes seeded from the run's seed and the step count it continues from."""
    from agents.ppo_torch import derived_seed

    try:
        from envs.vec import VecClusterEnv
    except ImportError as exc:
        raise ConfigError(f"the batched engine (envs.vec) cannot be imported here: {exc}") from None
    return VecClusterEnv(env_config, settings.num_envs, device=device, seed=derived_seed(seed, steps, 0),
                         workloads=settings.workloads)


def _pretrain(spec: dict[str, Any], model: Any, env: Any, seed: int, progress: bool = False) -> None:
    """Warm start by imitation of the heuristic ``spec["teacher"]`` (an ``rls:`` order on the peer-mode env;
    ``reference:CASE``: the learning suite's reference of CASE, the best heuristic on its validation seeds) on
    ``spec["episodes"]`` episodes (reset seeds 10^6 + 1000 seed + i, never an evaluation seed), ``spec["epochs"]``
    passes at Adam rate ``spec["learning_rate"]``, then ``spec["dagger_rounds"]`` DAgger rounds of as many
    episodes each (the policy drives, the teacher labels); ``progress``: bars on stderr."""
    from agents.imitation import make_teacher, pretrain

    n, rounds = int(spec.get("episodes", 4)), int(spec.get("dagger_rounds", 0))
    seeds = [1_000_000 + 1000 * seed + i for i in range(n * (rounds + 1))]
    teacher = resolve_teacher(str(spec["teacher"]))
    stats = pretrain(model, env, make_teacher(env, teacher), seeds[:n], int(spec.get("epochs", 10)),
                     seed=seed, learning_rate=float(spec.get("learning_rate", 3e-4)),
                     dagger_seeds=[seeds[n * r : n * (r + 1)] for r in range(1, rounds + 1)], progress=progress)
    print(f"pretrained by imitation of {teacher} ({rounds} DAgger rounds): {stats['decisions']:,} decisions, loss "
          f"{stats['loss']:.3f}, agreement {stats['agreement']:.1%} ({stats['agreement_contested']:.1%} on the "
          f"{stats['contested_share']:.0%} of decisions between jobs, {stats['agreement_uncontested']:.1%} on the "
          "others)")


REFERENCE_PREFIX = "reference:"


def resolve_teacher(name: str) -> str:
    """A teacher's heuristic: ``name`` itself, or for ``reference:CASE`` the learning suite's reference of CASE."""
    if not name.startswith(REFERENCE_PREFIX):
        return name
    from evaluation.learning import CASES, validation_ranking_of

    known = {case.name: case for case in CASES}
    case = name[len(REFERENCE_PREFIX):]
    if case not in known:
        raise ConfigError(f"pretrain.teacher: unknown case {case!r} in {name!r} (known: {', '.join(known)})")
    return validation_ranking_of(known[case])[0]


def _callbacks(config: dict[str, Any], env_id: str, env_overrides: dict[str, Any], run_dir: Path,
               n_envs: int, resume: bool, progress: bool = False,
               on_validation: Callable[[int, dict[str, float]], None] | None = None) -> list[Any]:
    """Periodic evaluation scalars (beside the best heuristic), checkpoints and the progress bar, as the config's
    ``train`` asks; checkpoints default to one per rollout, so a killed run loses at most one rollout of work. Both
    engines call them once per step of their ``n_envs`` envs (clusters)."""
    from agents.callbacks import Checkpoints, EvalScalars, ProgressBar
    from agents.ppo import PPO_DEFAULTS

    train = config.get("train") or {}
    callbacks: list[Any] = []
    validation = None
    if train.get("eval_every_steps"):
        eval_env = {**env_overrides, **(train.get("eval_env") or {})}  # validation episodes may differ in size
        validation = EvalScalars(env_id, eval_env, train.get("eval_seeds", [2000, 2001]),
                                 (config.get("eval") or {}).get("heuristics", ["fifo"]),
                                 max(1, int(train["eval_every_steps"]) // n_envs), run_dir / BEST_MODEL, resume,
                                 on_validation)
        callbacks.append(validation)
    rollout = int((config.get("ppo") or {}).get("n_steps", PPO_DEFAULTS["n_steps"])) * n_envs
    every = int(train.get("checkpoint_every_steps", rollout))
    if every:
        callbacks.append(Checkpoints(run_dir, every))
    callbacks.append(ProgressBar(validation, enabled=progress))  # after the validation: shows its latest score
    return callbacks


@dataclass(frozen=True)
class FinalEvaluation:
    """What the final evaluation runs: evaluate.py's arguments, and the policies beside the models."""

    argv: list[str]
    heuristics: list[str]
    decodings: list[str]  # peer-mode models: each also decoded with these shortlists (+ORDER@RATIO)
    peer: bool


def _final_evaluation(spec: dict[str, Any], env_id: str, env: dict[str, Any]) -> FinalEvaluation:
    """The final evaluation the config's ``eval`` section asks for, every policy name, workload and cluster checked
    now, before training: an unknown name fails the run at once rather than after hours of training.

    Peer-mode models run the peer's protocol (10 sequences of 1024 jobs of their trace) beside the ``rls:`` orders
    with the same backfill mode, each model also decoded with every shortlist of ``spec["decode"]``
    (``ORDER@RATIO``); the others run on the simulator on the config's workload and seeds.
    """
    from agents.peer_policy import Shortlist
    from baselines import make
    from envs.registration import PEER_ENV_ID
    from envs.scenario import plan

    peer = env_id == PEER_ENV_ID
    if peer:
        suffix = "+rlsbackfill" if env.get("backfill") else ""
        heuristics = [f"rls:{h}{suffix}" for h in spec.get("heuristics", ["sjf", "f1"])]
        decodings = [Shortlist.parse(d).suffix for d in spec.get("decode", [])]
        argv = ["--suite", "rlscheduler", "--workload", f"swf:{env['trace']}"]
    else:
        heuristics, decodings = list(spec.get("heuristics", ["fifo"])), []
        argv = ["--workload", str(spec.get("workload", "default")),
                "--seeds", ",".join(str(s) for s in spec.get("seeds", [1000])),
                "--load", str(spec.get("load", 1.0))]
        if spec.get("cluster"):
            argv += ["--cluster", str(spec["cluster"])]
        if spec.get("starts"):  # held-out windows of a trace workload
            argv += ["--starts", ",".join(str(s) for s in spec["starts"]), "--length", str(spec.get("length", 1024))]
    for name in heuristics:
        make(name)  # raises ConfigError naming an unknown order, backfilling or placement
    if not peer:  # and the workload, windows and cluster resolve
        windows = [(start, int(spec.get("length", 1024))) for start in spec.get("starts", [])] or [None]
        for window in windows:
            plan(str(spec.get("workload", "default")), spec.get("cluster"), float(spec.get("load", 1.0)), window)
    return FinalEvaluation(argv, heuristics, decodings, peer)


def _evaluate(final: FinalEvaluation, model_path: Path, run_dir: Path) -> int:
    """The final evaluation table: the model (and the best one on validation episodes, when periodic evaluation
    saved one) beside the config's heuristics on held-out episodes, with its plots and report in eval/; then the run
    folder's report.html (learning curves beside that table, :mod:`evaluation.training_report`); evaluate.py's exit
    status."""
    from evaluate import main as evaluate_main

    models = [str(p) for p in (model_path, run_dir / BEST_MODEL) if p.exists()]
    names = [f"rls:{m}{d}" for m in models for d in ["", *final.decodings]] if final.peer else models
    status = evaluate_main([*final.argv, "--policies", ",".join([*names, *final.heuristics]),
                            "--out", str(run_dir / "eval"), "--workers", "1"])
    if status == 0:
        try:
            from evaluation.report import write_training_page

            print(f"training report: {write_training_page(run_dir)}")
        except ImportError as exc:  # plotly missing: the tables are there, say how to get the page
            print(f"train.py: no report.html: {exc}", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
