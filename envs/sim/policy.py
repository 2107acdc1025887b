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
class Preempt:
    """Preempt running job ``job_id`` (it must be preemptible): it returns to the queue, keeping the work of its
    last checkpoint. The policy is asked again at the same instant, so it may preempt and then start."""

    job_id: int


@dataclass(frozen=True, slots=True)
class Wait:
    """Do nothing more now; advance to the next event, or to ``until_s`` [s] if that comes first and a job is
    pending then (a wake-up call, for policies whose decisions change with time alone)."""

    until_s: float | None = None


WAIT = Wait()
"""Wait for the next event."""

Action = Start | Preempt | Wait


@runtime_checkable
class Policy(Protocol):
    """Anything that picks actions from the simulator's read-only view."""

    name: str

    def reset(self) -> None:
        """Forget any state from a previous run."""

    def act(self, view: View) -> Action:
        """The next action at the current decision point; called until it returns :data:`WAIT`."""
