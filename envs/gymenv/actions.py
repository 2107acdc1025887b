"""The env's action layout: ``Discrete(K·P + 1)``, a Start per (visible slot, placement rule) and Wait last.

Action ``k·P + p`` starts the job in slot k with rule p; action ``K·P`` is Wait. :func:`action_mask` is the one
definition of which actions are legal, shared by the env and by trained models replayed as policies
(:class:`agents.adapter.ModelPolicy`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from envs.gymenv.config import EnvConfig
from envs.gymenv.observation import Placement


def action_mask(config: EnvConfig, plans: Sequence[Sequence[Placement]], events_left: bool,
                done: bool = False) -> np.ndarray:
    """The legal actions, given each visible job's placement by each rule (``plans[slot][rule]``, None: no room).

    A Start is legal iff its rule finds room for the job now, or, with ``backfill_assist``, iff its slot holds a
    job. Wait is legal when some event is still to come (``events_left``) and, with ``work_conserving``, no Start
    is legal; once the episode is ``done`` only Wait is marked, so that the mask is never empty.
    """
    mask = np.zeros(config.n_actions, dtype=bool)
    for slot, plan in enumerate(plans):
        for rule, gpus in enumerate(plan):
            mask[start_action(config, slot, rule)] = config.backfill_assist or gpus is not None
    mask[wait_action(config)] = done or (events_left and not (config.work_conserving and bool(mask[:-1].any())))
    return mask


def start_action(config: EnvConfig, slot: int, rule: int) -> int:
    """The action that starts the job in visible ``slot`` with placement rule ``config.placement_rules[rule]``."""
    return slot * len(config.placement_rules) + rule


def wait_action(config: EnvConfig) -> int:
    """The Wait action (the last one)."""
    return config.n_actions - 1


def decode_action(config: EnvConfig, action: int) -> tuple[int, int] | None:
    """(slot, rule index) of a Start action, or None for Wait; ``action`` must be in ``0 .. n_actions - 1``."""
    if action == wait_action(config):
        return None
    return divmod(action, len(config.placement_rules))
