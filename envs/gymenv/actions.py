"""The env's action layout: ``Discrete(K·P + R + 1)``, a Start per (visible slot, placement rule), a Preempt per
visible running slot (R = ``running_slots`` with ``preemption``, else 0) and Wait last.

Action ``k·P + p`` starts the job in slot k with rule p; action ``K·P + r`` preempts the running job in running
slot r; action ``K·P + R`` is Wait. :func:`action_mask` is the one definition of which actions are legal, shared by
the env and by trained models replayed as policies (:class:`agents.adapter.ModelPolicy`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from envs.gymenv.config import EnvConfig
from envs.gymenv.observation import Placement
from envs.sim.state import RunningJob
from envs.sim.view import View


class StartSlot(NamedTuple):
    """A Start action: the job in visible ``slot`` with placement rule ``config.placement_rules[rule]``."""

    slot: int
    rule: int


class PreemptSlot(NamedTuple):
    """A Preempt action: the running job in visible running ``slot``."""

    slot: int


def action_mask(config: EnvConfig, plans: Sequence[Sequence[Placement]], events_left: bool, done: bool = False,
                running: Sequence[RunningJob] = (), view: View | None = None) -> np.ndarray:
    """The legal actions, given each visible job's placement by each rule (``plans[slot][rule]``, None: no room)
    and, with ``preemption``, the jobs in the running slots (``running``, in slot order).

    A Start is legal iff its rule finds room for the job now, or, with ``backfill_assist``, iff its slot holds a
    job; with ``mask_aliases``, not when an earlier rule gives that job the same GPUs (the two actions would do the
    same thing). A Preempt is legal iff its running slot holds a job that the ``view`` says may be preempted now
    (:meth:`~envs.sim.view.View.preempt_refusal`, the simulator's own rule: preemptible, scheduler up). Wait is
    legal when some event is still to come (``events_left``) and, with ``work_conserving``, no Start is legal; once
    the episode is ``done`` only Wait is marked, so that the mask is never empty.
    """
    mask = np.zeros(config.n_actions, dtype=bool)
    for slot, plan in enumerate(plans):
        for rule, gpus in enumerate(plan):
            legal = config.backfill_assist or gpus is not None
            if legal and config.mask_aliases and gpus is not None:
                legal = not any(other is not None and np.array_equal(other, gpus) for other in plan[:rule])
            mask[start_action(config, slot, rule)] = legal
    if config.preemption and running:
        assert view is not None, "running slots need the view"
        for slot, run in enumerate(running):
            mask[preempt_action(config, slot)] = view.preempt_refusal(run.job.job_id) is None
    some_start = bool(mask[:config.n_starts].any())
    mask[wait_action(config)] = done or (events_left and not (config.work_conserving and some_start))
    return mask


def start_action(config: EnvConfig, slot: int, rule: int) -> int:
    """The action that starts the job in visible ``slot`` with placement rule ``config.placement_rules[rule]``."""
    return slot * len(config.placement_rules) + rule


def preempt_action(config: EnvConfig, slot: int) -> int:
    """The action that preempts the running job in visible running ``slot`` (needs ``preemption``)."""
    return config.n_starts + slot


def wait_action(config: EnvConfig) -> int:
    """The Wait action (the last one)."""
    return config.n_actions - 1


def decode_action(config: EnvConfig, action: int) -> StartSlot | PreemptSlot | None:
    """What ``action`` (in ``0 .. n_actions - 1``) does: a Start, a Preempt, or None for Wait."""
    if action == wait_action(config):
        return None
    if action >= config.n_starts:
        return PreemptSlot(action - config.n_starts)
    return StartSlot(*divmod(action, len(config.placement_rules)))
