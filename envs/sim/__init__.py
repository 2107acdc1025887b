"""The event engine: the simulator, its observable state and the read-only view of it, the policy protocol, the
availability profile that backfilling plans with, and :func:`simulate`, the policy loop.

The simulator imports no policy: policies (heuristics in ``baselines/``, agents in ``agents/``) meet it through
:class:`View` and the :class:`Start`, :class:`Preempt` and :class:`Wait` actions.
"""

from envs.sim.loop import simulate
from envs.sim.policy import WAIT, Action, Policy, Preempt, Start, Wait
from envs.sim.simulator import Simulator
from envs.sim.state import RunningJob, SimState
from envs.sim.view import PlacementRule, View

__all__ = ["WAIT", "Action", "PlacementRule", "Policy", "Preempt", "RunningJob", "SimState", "Simulator", "Start",
           "View", "Wait", "simulate"]
