"""The heuristic-selection env (``gpusched/HeuristicSelect-v0``): at each contested decision the agent picks which
of H candidate heuristics decides (:mod:`agents.selection`).

It lives beside the agents, not under ``envs/``, because its actions are the heuristics of :mod:`baselines`
(``envs`` imports neither); ``import agents`` registers its id.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from agents.selection import DEFAULT_CANDIDATES, Selection, alias_mask, alias_of
from baselines import make
from envs.core.errors import ConfigError, action_index
from envs.core.metrics import summarize
from envs.gymenv.config import EnvConfig
from envs.gymenv.episodes import EpisodeSource
from envs.gymenv.observation import ObservationEncoder
from envs.placement import PLACEMENT_RULES
from envs.sim import Action, Start, View
from envs.sim.loop import apply_action
from envs.sim.simulator import Simulator

SELECT_ENV_ID = "gpusched/HeuristicSelect-v0"
PROPOSAL_FEATURES = ("present", "starts", "gpus", "gpu_share", "estimate", "wait", "queue_position",
                     "same_as_first")
"""The first columns of a ``candidates`` row (what the candidate proposes); then the env's placement columns of
its start (zeros for a Wait), then a one-hot of the candidate's index."""


def selection_config(config: EnvConfig | Mapping[str, Any] | None, overrides: Mapping[str, Any]) -> EnvConfig:
    """The :class:`EnvConfig` of a selection env: the given settings with ``planner_features`` on (the env reads
    its episodes, its cluster and its observation columns from it; slots and placement rules do not matter)."""
    if isinstance(config, EnvConfig):
        base = config.replace(**overrides)
    else:
        base = EnvConfig.from_dict({**(config or {}), **overrides})
    return base.replace(planner_features=True)


class SelectionEncoder:
    """Observations of a selection env: the candidates' proposals, the cluster's groups, global values."""

    def __init__(self, encoder: ObservationEncoder, n_candidates: int) -> None:
        self.encoder, self.n = encoder, n_candidates
        self.columns = (*PROPOSAL_FEATURES, *encoder.placement_columns, *(f"is_{i}" for i in range(n_candidates)))
        self.space = spaces.Dict({
            "candidates": spaces.Box(0.0, 1.0, (n_candidates, len(self.columns)), np.float32),
            "cluster": encoder.space["cluster"],
            "global": encoder.space["global"],
        })

    def encode(self, view: View, proposals: Sequence[Action]) -> dict[str, np.ndarray]:
        """The observation at a contested decision with ``proposals`` (one per candidate; empty at the end)."""
        enc, config = self.encoder, self.encoder.config
        rows = np.zeros((self.n, len(self.columns)), dtype=np.float32)
        rows[:, len(self.columns) - self.n:] = np.eye(self.n, dtype=np.float32)
        first = len(PROPOSAL_FEATURES)
        queue = {job_id: i for i, job_id in enumerate(view.pending)} if proposals else {}
        aliases = alias_of(proposals)
        shared: dict[int, tuple] = {}
        for i, action in enumerate(proposals):
            rows[i, 0], rows[i, 7] = 1.0, float(aliases[i] == 0)
            if not isinstance(action, Start) or action.job_id not in view.pending:
                continue
            job = view.pending[action.job_id]
            static = enc.static_features(job)
            rows[i, 1:5] = (1.0, static[1], static[2], static[3])
            rows[i, 5] = min(1.0, math.log1p(view.time_s - job.submit_time_s) / math.log1p(config.max_wait_obs_s))
            rows[i, 6] = min(1.0, queue[action.job_id] / config.max_queue_obs)
            gpus = np.asarray(action.gpus)
            rows[i, first:first + len(enc.placement_columns)] = enc.placement_row(view, job, gpus, shared)
        return {"candidates": rows, "cluster": enc.cluster_features(view), "global": enc.global_features(view)}


class HeuristicSelectionEnv(gym.Env):
    """
    ## Description
    The simulator of :class:`envs.gymenv.env.GPUClusterEnv`, scheduled by H candidate heuristics
    (``candidates``, policy names of :mod:`baselines`). At every decision point each candidate proposes an action;
    where all agree it is carried out, and where they disagree (a contested decision) the agent picks the
    candidate whose proposal is carried out. The choice holds until the next contested decision, or with
    ``commit_s`` > 0 for that many simulated seconds, during which the chosen candidate decides alone. The agent is
    asked only at contested decisions; choosing candidate k at every one replays heuristic k exactly.

    ## Action Space
    ``Discrete(H)``: the candidate whose proposal is carried out. ``action_masks()`` marks the first candidate of
    each group proposing the same action; a masked candidate is accepted and does what its unmasked alias does.

    ## Observation Space
    A ``Dict``: ``candidates`` (H, F) one row per candidate: present, starts (1 for a Start, 0 for a Wait), the
    started job's gpus, gpu_share, estimate and wait as the env's job columns, its queue position over
    ``max_queue_obs``, same_as_first (it proposes what candidate 0 proposes), then the env's placement columns of
    the proposed allocation (``breaks_nodes`` last), then a one-hot of the candidate's index; ``cluster`` and
    ``global`` as the env's with ``planner_features`` (docs/env.md).

    ## Rewards
    As the env's: ``wait`` = −(Δ ∫ pending jobs dt) / ``wait_scale_s`` between decisions (its episode sum is the
    episode's total wait over ``wait_scale_s``); ``info["time_s"]`` is the simulated time of the decision, for
    discounting by time.

    ## Episode End
    Terminated when every job has ended; ``info["episode_metrics"]`` then holds the metrics and
    ``info["contested"]`` the contested decisions of the episode. An episode where the candidates never disagree
    has one step: ``reset`` has already run it to its end, and any action terminates it.

    ## Arguments
    ``gym.make("gpusched/HeuristicSelect-v0", candidates=[...], commit_s=0.0, **env_settings)``: the env settings
    are :class:`~envs.gymenv.config.EnvConfig` fields (workload, cluster, episode_jobs, load_factor, ...).
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(self, config: EnvConfig | Mapping[str, Any] | None = None,
                 candidates: Sequence[str] = DEFAULT_CANDIDATES, commit_s: float = 0.0, **overrides: Any) -> None:
        self.config = selection_config(config, overrides)
        if isinstance(candidates, str):
            raise ConfigError(f"candidates: a list of policy names, got the string {candidates!r}")
        self.selection = Selection(list(candidates), make, commit_s)
        self._source = EpisodeSource(self.config)
        self.cluster = self._source.cluster
        rules = [PLACEMENT_RULES[name] for name in self.config.placement_rules]
        encoder = ObservationEncoder(self.cluster, self.config, self._source.runtime, rules)
        self._encoder = SelectionEncoder(encoder, len(self.selection.names))
        self.observation_space = self._encoder.space
        self.action_space = spaces.Discrete(len(self.selection.names))
        self.workload = None  # the episode's job table
        self.dynamics = None  # the episode's failures and outages
        self._sim: Simulator | None = None
        self._proposals: list[Action] = []

    @property
    def candidates(self) -> tuple[str, ...]:
        """The candidate heuristics, in action order."""
        return self.selection.names

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        episode = self._source.sample(self.np_random)
        if options and "workload" in options:
            episode = episode._replace(workload=options["workload"])
        self.workload, self.dynamics = episode.workload, episode.dynamics
        self._encoder.encoder.start_episode()
        self._sim = Simulator(self.cluster, episode.workload, self._source.runtime, episode.dynamics)
        self.selection.reset()
        self._pending_s = self._sim.pending_job_s  # the wait before the first choice counts in the first reward
        self._advance()
        return self.observe(), {"time_s": self._sim.time_s}

    def step(self, action: int):
        sim = self._require_sim()
        index = action_index(action, self.action_space)
        if not 0 <= index < len(self.selection.names):
            raise ConfigError(f"action {index} is outside 0..{len(self.selection.names) - 1}")
        if not sim.done:  # an episode without a contested decision ends at its first step, whatever the action
            apply_action(sim, self.selection.choose(index, sim.view, self._proposals))
            self._advance()
        reward = -(sim.pending_job_s - self._pending_s) / self.config.wait_scale_s
        self._pending_s = sim.pending_job_s
        info: dict[str, Any] = {"time_s": sim.time_s}
        if sim.done:
            info["episode_metrics"] = summarize(sim.log())
            info["contested"] = self.selection.contested
        return self.observe(), float(reward), sim.done, False, info

    def action_masks(self) -> np.ndarray:
        """The first candidate of each group proposing the same action (all of them at the end)."""
        if not self._proposals:
            return np.ones(len(self.selection.names), dtype=bool)
        return alias_mask(self._proposals)

    @property
    def view(self) -> View:
        """The simulator's read-only view."""
        return self._require_sim().view

    @property
    def proposals(self) -> tuple[Action, ...]:
        """The candidates' proposals at the current contested decision (empty at the end)."""
        return tuple(self._proposals)

    @property
    def sim(self) -> Simulator:
        """The running simulator (to fork it for rollouts)."""
        return self._require_sim()

    def _advance(self) -> None:
        """Carry out agreed (or committed) actions until a contested decision or the end."""
        sim = self._require_sim()
        self._proposals = []
        while not sim.done:
            action, proposals = self.selection.decide(sim.view)
            if action is None:
                self._proposals = proposals
                return
            apply_action(sim, action)

    def observe(self) -> dict[str, np.ndarray]:
        """The observation at the current decision."""
        return self._encoder.encode(self._require_sim().view, self._proposals)

    def _require_sim(self) -> Simulator:
        if self._sim is None:
            raise RuntimeError("call reset() before step()")
        return self._sim


def register_selection_env() -> None:
    """Register ``gpusched/HeuristicSelect-v0`` with Gymnasium (idempotent)."""
    if SELECT_ENV_ID not in gym.registry:
        gym.register(id=SELECT_ENV_ID, entry_point="agents.selection_env:HeuristicSelectionEnv")
