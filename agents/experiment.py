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

import math
import numbers
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml

from envs.core.errors import ConfigError
from envs.core.files import parse_yaml, read_yaml

Check = Callable[[Any], bool]


def _integer(minimum: int) -> tuple[Check, str]:
    return (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= minimum,
            f"an integer >= {minimum}")


def _number(positive: bool = False) -> tuple[Check, str]:
    def ok(v: Any) -> bool:
        return isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v) \
            and (v > 0 if positive else True)
    return ok, "a finite number > 0" if positive else "a finite number"


def _within(low: float, high: float, low_open: bool = False, integer: bool = False) -> tuple[Check, str]:
    """A number in [low, high] (``low_open``: (low, high]); ``integer``: an integer."""
    def ok(v: Any) -> bool:
        kind = isinstance(v, int) if integer else isinstance(v, numbers.Real) and math.isfinite(v)
        return kind and not isinstance(v, bool) and (v > low if low_open else v >= low) and v <= high
    what, text = ("an integer", "{:,}") if integer else ("a number", "{:g}")
    return ok, f"{what} in {'(' if low_open else '['}{text.format(low)}, {text.format(high)}]"




def _optional(check: tuple[Check, str]) -> tuple[Check, str]:
    return (lambda v: v is None or check[0](v)), f"{check[1]} or null"


def _list_of(check: tuple[Check, str]) -> tuple[Check, str]:
    return (lambda v: isinstance(v, list) and all(check[0](x) for x in v)), f"a list of {check[1].removeprefix('a ')}s"


PPO_RANGES: dict[str, tuple[Check, str]] = {
    "learning_rate": _within(0, 1, low_open=True), "n_steps": _within(1, 2**24, integer=True),
    "batch_size": _within(1, 2**24, integer=True), "n_epochs": _within(1, 10_000, integer=True),
    "gamma": _within(0, 1, low_open=True), "gae_lambda": _within(0, 1), "clip_range": _within(0, 10, low_open=True),
    "clip_range_vf": _optional(_within(0, 10, low_open=True)), "ent_coef": _within(0, 1e3),
    "vf_coef": _within(0, 1e3), "max_grad_norm": _within(0, 1e6, low_open=True),
    "target_kl": _optional(_within(0, 1e3, low_open=True)), "stats_window_size": _within(1, 10**6, integer=True),
    "verbose": _within(0, 2, integer=True), "hidden": _within(1, 4096, integer=True),
    "learning_rate_end": _within(0, 1, low_open=True),
}
"""The range of each numeric ``ppo:`` key: values that MaskablePPO would accept and then fail on hours later (a
batch of 0, a NaN discount) are refused before training."""

_TEXT = ((lambda v: isinstance(v, str) and bool(v.strip())), "a non-empty string")
_MAPPING = ((lambda v: isinstance(v, Mapping)), "a mapping")
_BOOL = ((lambda v: isinstance(v, bool)), "true or false")
_SEEDS = _list_of(_integer(0))
RECIPE_NAMES = ("rollout", "group_ppo")
"""The heuristic-selection recipes (:mod:`agents.recipes`): rollout policy iteration, PPO with a group baseline."""
ENGINES = ("sb3", "vec")
"""The training engines: SB3's MaskablePPO on event envs, or the batched engine (envs.vec) with agents.ppo_torch."""

TOP: dict[str, tuple[Check, str]] = {
    "env_id": _TEXT, "env": _optional(_MAPPING), "total_timesteps": _integer(1), "n_envs": _integer(1),
    "ppo": _optional(_MAPPING), "train": _optional(_MAPPING), "pretrain": _optional(_MAPPING),
    "eval": _optional(_MAPPING), "seed": _integer(0), "device": _TEXT,
    "engine": ((lambda v: v in ENGINES), " or ".join(ENGINES)), "vec": _optional(_MAPPING),
    "recipe": ((lambda v: v in RECIPE_NAMES), " or ".join(RECIPE_NAMES)), "world": _MAPPING,
    "rollout": _optional(_MAPPING), "group_ppo": _optional(_MAPPING),
}
TRAIN: dict[str, tuple[Check, str]] = {
    "eval_every_steps": _integer(0), "eval_seeds": _SEEDS, "eval_env": _optional(_MAPPING),
    "checkpoint_every_steps": _integer(0),
}
PRETRAIN: dict[str, tuple[Check, str]] = {
    "teacher": _TEXT, "episodes": _integer(1), "epochs": _integer(1), "learning_rate": _number(positive=True),
    "dagger_rounds": _integer(0),
}
EVAL: dict[str, tuple[Check, str]] = {
    "workload": _TEXT, "cluster": _TEXT, "seeds": _SEEDS, "heuristics": _list_of(_TEXT), "load": _number(True),
    "starts": _SEEDS, "length": _integer(1), "decode": _list_of(_TEXT),
}
VEC: dict[str, tuple[Check, str]] = {"num_envs": _integer(1), "workloads": _integer(1)}
WORLD: dict[str, tuple[Check, str]] = {
    "case": _TEXT, "commit_s": ((lambda v: _number()[0](v) and v >= 0), "a number >= 0"), "train_seeds": _SEEDS,
    "candidates": ((lambda v: (isinstance(v, int) and not isinstance(v, bool) and v >= 2)
                    or (isinstance(v, list) and len(v) >= 2 and all(_TEXT[0](x) for x in v))),
                   "an integer >= 2 (the best on validation) or a list of at least 2 policy names"),
}
"""The ``world:`` section of a recipe: a learning-suite case, its candidates (the reference first), commit_s."""
"""The ``vec:`` section (:class:`agents.ppo_torch.VecSettings`)."""
SECTIONS = {"train": TRAIN, "pretrain": PRETRAIN, "eval": EVAL, "vec": VEC, "world": WORLD}


def _ppo_checks() -> dict[str, tuple[Check, str]]:
    """Each ``ppo:`` key's check, by the type of MaskablePPO's default (a default of None: a number or null)."""
    from agents.ppo import OWN_KEYS, PPO_DEFAULTS

    checks: dict[str, tuple[Check, str]] = {"hidden": _integer(1), "learning_rate_end": _number(positive=True)}
    assert set(checks) == set(OWN_KEYS)
    for key, default in PPO_DEFAULTS.items():
        if key in PPO_RANGES:
            continue
        if isinstance(default, bool):
            checks[key] = _BOOL
        elif isinstance(default, int):
            checks[key] = _integer(0)
        elif isinstance(default, float):
            checks[key] = _number()
        elif key.endswith("_kwargs"):
            checks[key] = _optional(_MAPPING)
        else:
            checks[key] = _optional(_number())
    return {**checks, **PPO_RANGES}


def _check_keys(data: Any, checks: Mapping[str, tuple[Check, str]], prefix: str) -> None:
    """Every key of ``data`` known to ``checks`` and its value of the right kind; errors read ``{prefix}KEY: ...``."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{prefix.rstrip(': .')}: must be a mapping, got {data!r}")
    for key, value in data.items():
        if key not in checks:
            raise ConfigError(f"{prefix}{key}: unknown key (allowed: {', '.join(sorted(checks))})")
        ok, what = checks[key]
        if not ok(value):
            raise ConfigError(f"{prefix}{key}: must be {what}, got {value!r}")


def check_experiment(config: Any, where: str) -> None:
    """Raise :class:`ConfigError` ``{where}: KEY: ...`` for an unknown key or a wrong type anywhere in ``config``
    (the ``env`` section is checked by the env itself, when it is built)."""
    _check_keys(config, TOP, f"{where}: ")
    for key in ("env_id", "world") if config.get("recipe") else ("env_id", "total_timesteps"):
        if key not in config:
            raise ConfigError(f"{where}: {key}: missing")
    if config.get("recipe"):
        from agents.selection_env import SELECT_ENV_ID

        if config["env_id"] != SELECT_ENV_ID:
            raise ConfigError(f"{where}: env_id: a recipe trains on {SELECT_ENV_ID}, got {config['env_id']!r}")
        if "case" not in config["world"]:
            raise ConfigError(f"{where}: world.case: missing (a learning-suite case, e.g. whole-gpu@1.5)")
        others = sorted(set(config) & {"ppo", "pretrain", "vec", "eval", "train", "engine", "n_envs",
                                       "total_timesteps"})
        if others:
            raise ConfigError(f"{where}: {others[0]}: not used by recipe {config['recipe']!r} (its sections: world, "
                              f"{config['recipe']})")
    elif config.get("world") or config.get("rollout") or config.get("group_ppo"):
        raise ConfigError(f"{where}: world, rollout and group_ppo apply only with a recipe")
    if config.get("ppo"):
        _check_keys(config["ppo"], _ppo_checks(), f"{where}: ppo.")
    for name, checks in SECTIONS.items():
        if config.get(name):
            _check_keys(config[name], checks, f"{where}: {name}.")
    if config.get("pretrain") and "teacher" not in config["pretrain"]:
        raise ConfigError(f"{where}: pretrain.teacher: missing (the heuristic to imitate)")
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
