"""The policy protocol: how heuristics and learned agents meet the simulator (SPEC §4)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from envs.sim.view import View


@dataclass(frozen=True, slots=True)
class Start:
    """Start pending job ``job_id`` on the GPUs ``gpus`` (global indices; one GPU for a fractional job)."""

    job_id: int
    gpus: Sequence[int]


@dataclass(frozen=True, slots=True)
class Wait:
    """Do nothing more now; advance to the next event."""


WAIT = Wait()
"""The one Wait action."""

Action = Start | Wait


@runtime_checkable
class Policy(Protocol):
    """Anything that picks actions from the simulator's read-only view."""

    name: str

    def reset(self) -> None:
        """Forget any state from a previous run."""

    def act(self, view: View) -> Action:
        """The next action at the current decision point; called until it returns :data:`WAIT`."""
