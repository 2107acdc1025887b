"""The training recipes of the heuristic-selection env, as an experiment config names them (``recipe:``).

- ``rollout``: rollout policy iteration (:mod:`agents.rollout_iteration`), its settings in ``rollout:``;
- ``group_ppo``: PPO with a group baseline and time discounting (:mod:`agents.group_ppo`), settings in
  ``group_ppo:``.

``train.py`` resolves the ``world:`` section (a learning-suite case, the candidates ranked on its validation seeds)
into a :class:`~agents.selection_training.World` (:func:`evaluation.learning.selection_world`) and calls
:func:`train_recipe`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agents.group_ppo import GroupPPOSettings
from agents.group_ppo import run as run_group_ppo
from agents.rollout_iteration import RolloutSettings
from agents.rollout_iteration import run as run_rollout
from agents.selection_training import World
from envs.core.errors import ConfigError

RECIPES = {"rollout": (RolloutSettings, run_rollout), "group_ppo": (GroupPPOSettings, run_group_ppo)}
"""Recipe name -> (its settings class, its training function)."""


def recipe_settings(recipe: str, section: Mapping[str, Any] | None) -> Any:
    """The settings of ``recipe`` from its config section; :class:`ConfigError` naming an unknown key or value."""
    if recipe not in RECIPES:
        raise ConfigError(f"recipe: must be {' or '.join(RECIPES)}, got {recipe!r}")
    kind = RECIPES[recipe][0]
    section = dict(section or {})
    known = {f.name for f in dataclasses.fields(kind)}
    unknown = sorted(set(section) - known)
    if unknown:
        raise ConfigError(f"{recipe}.{unknown[0]}: unknown key (allowed: {', '.join(sorted(known))})")
    defaults = kind()
    for key, value in section.items():
        expected = type(getattr(defaults, key))
        if expected is float and isinstance(value, int) and not isinstance(value, bool):
            section[key] = float(value)
        elif not isinstance(value, expected) or isinstance(value, bool) != (expected is bool):
            raise ConfigError(f"{recipe}.{key}: must be {expected.__name__}, got {value!r}")
    return kind(**section)


def train_recipe(recipe: str, settings: Any, world: World, run_dir: Path, seed: int, writer: Any = None,
                 log: Any = print, device: str = "cpu") -> dict[str, Any]:
    """Train ``recipe`` in ``run_dir`` (resuming from its checkpoint when there is one), the network's updates on
    ``device``; its history."""
    return RECIPES[recipe][1](world, settings, run_dir, seed=seed, log=log, writer=writer, device=device)
