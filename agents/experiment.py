"""The experiment YAML that ``train.py`` reads (``configs/experiments/*.yaml``), and its validation.

Top level: ``env_id`` (a registered id), ``env`` (that env's settings), ``total_timesteps``, ``engine`` (``sb3``,
the default: SB3's MaskablePPO on ``n_envs`` event envs; ``vec``: the batched engine :mod:`envs.vec` with
:mod:`agents.ppo_torch`, set up by the ``vec`` section), and the sections ``ppo`` (MaskablePPO's settings and this
project's ``hidden`` and ``learning_rate_end``; the same keys on both engines), ``train`` (periodic validation and
checkpoints), ``pretrain`` (imitation warm start), ``vec`` (``num_envs``, ``workloads``) and ``eval`` (the final
evaluation). A heuristic-selection experiment (``env_id: gpusched/HeuristicSelect-v0``) names instead a ``recipe``
(``rollout`` or ``group_ppo``, :mod:`agents.recipes`), its settings in the section of that name, and a ``world``
(``case``: a learning-suite case; ``candidates``: a count, the best on the case's validation seeds, or a list, the
reference first; ``commit_s``; ``train_seeds``). A run folder's ``config.yaml`` also holds ``seed`` and
``device``. :func:`check_experiment` raises :class:`~envs.core.errors.ConfigError` naming the file and the key for
an unknown key or a value of the wrong type, before anything is trained.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import Field

from envs.core.errors import ConfigError
from envs.core.files import parse_yaml, read_yaml
from envs.core.job import MAX_TIME_S
from envs.core.schema import FileModel, validated
from envs.vec.env import MAX_NUM_ENVS
from envs.workload.table import LOAD_FACTORS

Seed = Annotated[int, Field(ge=0, le=2**63 - 1)]
Text = Annotated[str, Field(min_length=1, pattern=r"\S")]
RECIPE_NAMES = ("rollout", "group_ppo")
"""The heuristic-selection recipes (:mod:`agents.recipes`): rollout policy iteration, PPO with a group baseline."""
ENGINES = ("sb3", "vec")
"""The training engines: SB3's MaskablePPO on event envs, or the batched engine (envs.vec) with agents.ppo_torch."""


def _between(low: float, high: float, *, above: bool = False) -> Any:
    """A finite number in [low, high] (``above``: (low, high])."""
    return Annotated[float, Field(gt=low, le=high) if above else Field(ge=low, le=high)]


def _count(low: int, high: int) -> Any:
    return Annotated[int, Field(ge=low, le=high)]


class PPOSection(FileModel):
    """``ppo:``: MaskablePPO's settings (its names, meanings and defaults: a key left out keeps MaskablePPO's
    default), each in a range it trains with, and the project's ``hidden`` (network width, default 64) and
    ``learning_rate_end`` (linear decay to it). Only the keys MaskablePPO defaults to None may be null."""

    learning_rate: _between(0, 1, above=True) = None  # type: ignore[assignment]
    n_steps: _count(1, 2**24) = None  # type: ignore[assignment]
    batch_size: _count(1, 2**24) = None  # type: ignore[assignment]
    n_epochs: _count(1, 10_000) = None  # type: ignore[assignment]
    gamma: _between(0, 1, above=True) = None  # type: ignore[assignment]
    gae_lambda: _between(0, 1) = None  # type: ignore[assignment]
    clip_range: _between(0, 10, above=True) = None  # type: ignore[assignment]
    clip_range_vf: _between(0, 10, above=True) | None = None
    normalize_advantage: bool = None  # type: ignore[assignment]
    ent_coef: _between(0, 1e3) = None  # type: ignore[assignment]
    vf_coef: _between(0, 1e3) = None  # type: ignore[assignment]
    max_grad_norm: _between(0, 1e6, above=True) = None  # type: ignore[assignment]
    rollout_buffer_kwargs: dict[str, Any] | None = None
    target_kl: _between(0, 1e3, above=True) | None = None
    stats_window_size: _count(1, 10**6) = None  # type: ignore[assignment]
    verbose: _count(0, 2) = None  # type: ignore[assignment]
    hidden: _count(1, 4096) = None  # type: ignore[assignment]
    learning_rate_end: _between(0, 1, above=True) = None  # type: ignore[assignment]




class TrainSection(FileModel):
    """``train:``: periodic validation (best_model.zip) and checkpoints."""

    eval_every_steps: _count(0, 2**40) = 0
    eval_seeds: list[Seed] | None = None
    eval_env: dict[str, Any] | None = None
    checkpoint_every_steps: _count(0, 2**40) | None = None


class PretrainSection(FileModel):
    """``pretrain:``: the imitation warm start (and DAgger rounds)."""

    teacher: Text
    episodes: _count(1, 10**6) = 4
    epochs: _count(1, 10**6) = 10
    learning_rate: _between(0, 1, above=True) = 3e-4
    dagger_rounds: _count(0, 1000) = 0


class EvalSection(FileModel):
    """``eval:``: the final evaluation beside the heuristics."""

    workload: Text | None = None
    cluster: Text | None = None
    seeds: list[Seed] | None = None
    heuristics: list[Text] | None = None
    load: _between(*LOAD_FACTORS) | None = None
    starts: list[Seed] | None = None
    length: _count(1, 10**7) | None = None
    decode: list[Text] | None = None


class VecSection(FileModel):
    """``vec:`` (:class:`agents.ppo_torch.VecSettings`): clusters in lockstep and the workload pool."""

    num_envs: _count(1, MAX_NUM_ENVS) | None = None
    workloads: _count(1, 10**6) | None = None


class WorldSection(FileModel):
    """``world:`` of a recipe: a learning-suite case, its candidates (the reference first), commit_s."""

    case: Text
    candidates: Annotated[int, Field(ge=2)] | Annotated[list[Text], Field(min_length=2)] | None = None
    commit_s: _between(0, MAX_TIME_S) = 0.0
    train_seeds: list[Seed] | None = None


class ExperimentFile(FileModel):
    """An experiment file (``configs/experiments/*.yaml``; module docstring)."""

    env_id: Text
    env: dict[str, Any] | None = None  # checked by the env itself when it is built
    total_timesteps: _count(1, 2**50) | None = None
    n_envs: _count(1, 4096) | None = None
    engine: Literal[ENGINES] = "sb3"  # type: ignore[valid-type]
    ppo: PPOSection | None = None
    train: TrainSection | None = None
    pretrain: PretrainSection | None = None
    eval: EvalSection | None = None
    vec: VecSection | None = None
    recipe: Literal[RECIPE_NAMES] | None = None  # type: ignore[valid-type]
    world: WorldSection | None = None
    rollout: dict[str, Any] | None = None  # checked by agents.recipes
    group_ppo: dict[str, Any] | None = None
    seed: Seed | None = None  # a run folder's config.yaml
    device: Text | None = None


def check_experiment(config: Any, where: str) -> None:
    """Raise :class:`ConfigError` ``{where}: KEY: ...`` for an unknown key or a wrong type or range anywhere in
    ``config`` (:class:`ExperimentFile`), or for sections that do not go together (the ``env`` section is checked
    by the env itself, when it is built)."""
    validated(ExperimentFile, config, where)
    for key in ("env_id", "world") if config.get("recipe") else ("env_id", "total_timesteps"):
        if key not in config:
            raise ConfigError(f"{where}: {key}: missing")
    if config.get("recipe"):
        from agents.selection_env import SELECT_ENV_ID

        if config["env_id"] != SELECT_ENV_ID:
            raise ConfigError(f"{where}: env_id: a recipe trains on {SELECT_ENV_ID}, got {config['env_id']!r}")
        others = sorted(set(config) & {"ppo", "pretrain", "vec", "eval", "train", "engine", "n_envs",
                                       "total_timesteps"})
        if others:
            raise ConfigError(f"{where}: {others[0]}: not used by recipe {config['recipe']!r} (its sections: world, "
                              f"{config['recipe']})")
    elif config.get("world") or config.get("rollout") or config.get("group_ppo"):
        raise ConfigError(f"{where}: world, rollout and group_ppo apply only with a recipe")
    if config.get("engine", "sb3") == "vec":
        from envs.registration import PEER_ENV_ID

        if config["env_id"] == PEER_ENV_ID:
            raise ConfigError(f"{where}: engine: vec simulates GPUClusterEnv variants, not {PEER_ENV_ID}")
        if "n_envs" in config:
            raise ConfigError(f"{where}: n_envs: the vec engine's clusters are vec.num_envs")
    elif config.get("vec"):
        raise ConfigError(f"{where}: vec: applies only with engine: vec")


def read_experiment(path: str | Path) -> dict[str, Any]:
    """The experiment at ``path`` (plain YAML data: :func:`envs.core.files.read_yaml`), checked."""
    path = Path(path)
    config = read_yaml(path, "experiment file")
    check_experiment(config, path.name)
    return dict(config)


def apply_sets(config: Mapping[str, Any], items: list[str]) -> dict[str, Any]:
    """``config`` with ``KEY=VALUE`` items applied, each value read as YAML (``true``, ``4``, ``[pack, spread]``):
    a plain KEY is an env setting, a dotted one a path in the config (``ppo.n_steps=512``). ``config`` itself is
    left as it was; check the result with :func:`check_experiment`."""
    config = yaml.safe_load(yaml.safe_dump(dict(config)))  # a deep copy
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise ConfigError(f"--set {item!r}: expected KEY=VALUE")
        path = key.strip().split(".") if "." in key else ["env", key.strip()]
        node = config
        for part in path[:-1]:
            if not isinstance(node.get(part), dict):
                node[part] = {}
            node = node[part]
        node[path[-1]] = parse_yaml(value, f"--set {item!r}", "YAML value")
    return config
