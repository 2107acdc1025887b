"""PPO as an experiment's ``ppo:`` section sets it up: MaskablePPO with the :class:`~agents.network.SlotPolicy`
network, its settings, and the learning-rate schedule. Loading a model file rebuilds the same schedule from the same
section (:mod:`agents.model_file`), so this is the one place that reads it."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

from sb3_contrib import MaskablePPO

from agents.network import SlotPolicy

OWN_KEYS = {"hidden": "width of the SlotPolicy networks (default 64)",
            "learning_rate_end": "the learning rate decays linearly from learning_rate to this over training"}
"""Keys of the ``ppo:`` section that are this project's, not MaskablePPO's."""

_SET_BY_TRAIN = {"self", "policy", "env", "tensorboard_log", "policy_kwargs", "seed", "device", "_init_setup_model",
                 "rollout_buffer_class"}
PPO_DEFAULTS: dict[str, Any] = {name: parameter.default
                                for name, parameter in inspect.signature(MaskablePPO.__init__).parameters.items()
                                if name not in _SET_BY_TRAIN}
"""MaskablePPO's own settings that a ``ppo:`` section may set, with MaskablePPO's defaults."""

DEFAULT_HIDDEN = 64


def learning_rate(ppo: Mapping[str, Any]) -> float | Callable[[float], float]:
    """The learning rate, or with ``learning_rate_end`` its linear decay over training (SB3's progress runs from 1
    at the start to 0 at the end)."""
    start = float(ppo.get("learning_rate", PPO_DEFAULTS["learning_rate"]))
    if "learning_rate_end" not in ppo:
        return start
    end = float(ppo["learning_rate_end"])
    return lambda progress: end + (start - end) * progress


def ppo_settings(ppo: Mapping[str, Any]) -> dict[str, Any]:
    """MaskablePPO's keyword arguments for a ``ppo:`` section (the learning rate as :func:`learning_rate`)."""
    settings = {k: v for k, v in ppo.items() if k not in OWN_KEYS}
    settings["learning_rate"] = learning_rate(ppo)
    return settings


def policy_kwargs(ppo: Mapping[str, Any]) -> dict[str, Any]:
    """The SlotPolicy's keyword arguments for a ``ppo:`` section."""
    return {"hidden": int(ppo.get("hidden", DEFAULT_HIDDEN))}


def new_model(ppo: Mapping[str, Any], env: Any, device: str, seed: int, tensorboard_log: str | None) -> MaskablePPO:
    """A fresh MaskablePPO with the SlotPolicy network, set up by the ``ppo:`` section ``ppo``."""
    return MaskablePPO(SlotPolicy, env, seed=seed, device=device, tensorboard_log=tensorboard_log,
                       policy_kwargs=policy_kwargs(ppo), **ppo_settings(ppo))
