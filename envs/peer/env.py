"""A Gymnasium env over the peer compatibility engine (:mod:`envs.peer.engine`): RL batch scheduling on equal terms
with the published RLScheduler agent (``gpusched/RLSched-v0``; the reference is :class:`PeerSchedEnv`'s docstring).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, ClassVar, Literal

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from envs.core.errors import ConfigError, action_index, check_keys
from envs.peer.engine import (
    BSLD_THRESHOLD_S,
    PEER_SEED,
    SEQUENCE_COUNT,
    SEQUENCE_LENGTH,
    Decision,
    PeerResult,
    bounded_slowdown,
    decisions,
    peer_start_indices,
)
from envs.peer.swf import PeerJob, peer_trace_once

_BSLD_SCALE = 1000.0  # bounded slowdown at which the log-scaled feature reaches 1
_SOON_S = (3600, 36000)  # horizons of the "nodes freed within" features [s]
JOB_FEATURES = 8
PLACEMENT_FEATURES = 2
CLUSTER_FEATURES = 6
GLOBAL_FEATURES = 2


@dataclass(frozen=True)
class PeerEnvConfig:
    """Settings of :class:`PeerSchedEnv`."""

    trace: str = ""
    """SWF trace path (read by the peer's rules; required)."""
    sequence_jobs: int = 256
    """Jobs per training episode (the peer's trainer uses 256)."""
    backfill: bool = False
    """Use the peer's backfill (``+rlsbackfill``) while a committed job waits."""
    slots: int = 128
    """Visible queued jobs K (the peer's MAX_QUEUE_SIZE)."""
    sampling: Literal["any", "outside_test"] = "any"
    """Which sequences reset draws: anywhere (as the peer's trainer) or only outside the evaluation windows."""
    test_seed: int = PEER_SEED
    """Seed of the evaluation protocol whose windows ``outside_test`` avoids."""
    test_count: int = SEQUENCE_COUNT
    """Evaluation windows to avoid."""
    test_length: int = SEQUENCE_LENGTH
    """Jobs per evaluation window."""
    reward_scale: float = 100.0
    """Rewards are divided by this (returns are about -avg_bsld / reward_scale)."""

    def __post_init__(self) -> None:
        if not self.trace:
            raise ConfigError("trace: give the SWF trace path, e.g. trace='../shared/traces/lublin-synthetic/"
                              "lublin_256.swf'")
        if self.sequence_jobs < 2 or self.slots < 1 or self.reward_scale <= 0:
            raise ConfigError(f"sequence_jobs >= 2, slots >= 1 and reward_scale > 0 needed; got {self}")
        if self.sampling not in ("any", "outside_test"):
            raise ConfigError(f"sampling: 'any' or 'outside_test', got {self.sampling!r}")

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> PeerEnvConfig:
        """A config from keyword values; unknown keys raise :class:`ConfigError` naming them."""
        check_keys(values, (f.name for f in fields(cls)), "peer_env")
        return cls(**values)


def training_starts(trace_jobs: int, config: PeerEnvConfig) -> np.ndarray:
    """Every first-job index ``reset`` may draw under ``config.sampling`` (ascending)."""
    length = config.sequence_jobs
    starts = np.arange(length, trace_jobs - length - 1)
    if config.sampling == "outside_test":
        for t in peer_start_indices(trace_jobs, config.test_seed, config.test_count, config.test_length):
            starts = starts[(starts + length <= t) | (starts >= t + config.test_length)]
    if starts.size == 0:
        raise ConfigError(f"sampling {config.sampling!r}: no sequence of {length} jobs fits in {trace_jobs} jobs")
    return starts


def peer_spaces(slots: int) -> tuple[spaces.Dict, spaces.Discrete]:
    """(observation space, action space) of the env with ``slots`` visible jobs: they depend on nothing else."""
    observation = spaces.Dict({
        "jobs": spaces.Box(0.0, 1.0, (slots, JOB_FEATURES), np.float32),
        "placements": spaces.Box(0.0, 1.0, (slots, 1, PLACEMENT_FEATURES), np.float32),
        "cluster": spaces.Box(0.0, 1.0, (1, CLUSTER_FEATURES), np.float32),
        "global": spaces.Box(0.0, 1.0, (GLOBAL_FEATURES,), np.float32),
    })
    return observation, spaces.Discrete(slots + 1)


class PeerSchedEnv(gym.Env):
    """
    ## Description
    RL batch scheduling in the peer compatibility mode. Each episode is a sequence of consecutive jobs of an SWF
    trace (read by the peer's rules, :mod:`envs.peer.swf`), scheduled from an empty machine by the peer's rules
    (:mod:`envs.peer.engine`); at every decision the agent commits one queued job, which starts when it fits (no
    backfilling, or the peer's backfill when ``backfill=True``). Decisions with a single queued job are taken for
    the agent: there is no choice.

    ## Action Space
    ``Discrete(K + 1)``: action k < K commits the job in slot k (the first K queued jobs in queue order, i.e.
    submit order, as in the peer's agent: K = 128 by default). The last action (Wait, kept so that the action
    layout matches GPUClusterEnv's) is always masked; ``action_masks()`` marks the occupied slots. A masked action,
    or an integer outside the space, changes nothing and returns ``info["refused"]``; an action that is not one
    integer raises ``TypeError``. The env pickles mid-episode (it replays its choices on loading).

    ## Observation Space
    A ``Dict`` of float32 arrays in [0, 1], the shapes :class:`agents.network.SlotPolicy` reads, so that the same
    network learns here and on GPUClusterEnv:

    | key | shape | feature | normalization |
    |---|---|---|---|
    | jobs | (K, 8) | present | 1 if the slot holds a job |
    | | | wait | log(1 + now − submit) / log(1 + 10 × the trace's longest request) |
    | | | request | log(1 + requested time) / the same scale |
    | | | procs | processors / machine processors |
    | | | nodes | nodes needed / free nodes (clipped) |
    | | | fits_now | 1 if it fits now |
    | | | bsld_now | log(bounded slowdown if started now) / log(1000) |
    | | | area | log(1 + request × procs) / (time scale + log(machine processors)) |
    | placements | (K, 1, 2) | fits_now | 1 if it fits now |
    | | | free_left | free nodes left after starting it / machine nodes |
    | cluster | (1, 6) | free_nodes | free nodes / machine nodes |
    | | | running | running jobs / machine nodes |
    | | | queue | queue length / K (clipped) |
    | | | queue_beyond_window | 1 if the queue is longer than K |
    | | | freed_1h | nodes freed within 1 h of now by estimated ends (start + request) / machine nodes |
    | | | freed_10h | the same within 10 h |
    | global | (2,) | started | share of the sequence's jobs started |
    | | | arrived | share of the sequence's jobs arrived |

    ## Rewards
    When jobs start, minus their bounded slowdowns ``max(1, (wait + run) / max(run, 10)) / n`` (n = jobs in the
    sequence), divided by ``reward_scale``: an episode's return is minus the peer's metric (average bounded
    slowdown) / ``reward_scale``.

    ## Starting State
    ``reset(seed=...)`` draws the sequence's first job with ``self.np_random``: ``sampling="any"`` uniformly from
    ``[L, n_jobs - L - 1)`` as the peer's trainer does (L = ``sequence_jobs``); ``sampling="outside_test"`` only
    among sequences that share no job with the peer's evaluation windows (``peer_start_indices`` of
    ``test_length`` jobs). ``reset(options={"start": i, "length": L})`` plays a chosen window (the evaluation
    protocol).

    ## Episode End
    Terminated when every job of the sequence has started; ``info["episode_metrics"]["avg_bsld"]`` is then the
    peer's metric.

    ## Arguments
    ``gym.make("gpusched/RLSched-v0", trace=PATH, **overrides)``: :class:`PeerEnvConfig` fields, as keywords or a
    ``config`` dict or object (unknown keys raise ``ConfigError``).

    ## Version History
    - v0: initial version.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(self, config: PeerEnvConfig | dict[str, Any] | None = None, **kwargs: Any) -> None:
        values = {**(config if isinstance(config, dict) else {}), **kwargs}
        self.config = config if isinstance(config, PeerEnvConfig) and not kwargs else \
            PeerEnvConfig.from_dict(values)
        self.trace = peer_trace_once(str(Path(self.config.trace).resolve()))
        self._starts: np.ndarray | None = None  # training_starts, computed at the first sampled reset
        machine = self.trace.machine
        self._machine_procs = machine.nodes * machine.procs_per_node
        requests = [j.request for j in self.trace.jobs]
        self._time_scale = math.log1p(max(max(requests), 1) * 10)  # log1p of the longest request x 10 [s]
        self.observation_space, self.action_space = peer_spaces(self.config.slots)
        self._steps: Any = None
        self.jobs: tuple[PeerJob, ...] = ()  # the episode's sequence, in trace order
        self._choices: list[int] = []  # every queue index sent to the engine this episode: replayed on unpickling
        self._decision: Decision | None = None
        self.result: PeerResult | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_steps"] = state["_decision"] = None  # a generator cannot be pickled: rebuilt by replaying choices
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        if self.jobs and self.result is None:  # mid-episode
            self._steps = decisions(self.jobs, self.trace.machine, self.config.backfill)
            self._decision = next(self._steps)
            for k in self._choices:  # the engine is deterministic: the same choices lead to the same decision
                self._decision = self._steps.send(k)

    # -- episode ---------------------------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        super().reset(seed=seed)
        options = options or {}
        length = int(options.get("length", self.config.sequence_jobs))
        if "start" in options:
            first = int(options["start"])
        else:
            if self._starts is None:
                self._starts = training_starts(len(self.trace.jobs), self.config)
            first = int(self.np_random.choice(self._starts))
        if first < 0 or length < 1 or first + length > len(self.trace.jobs):
            raise ConfigError(f"window [{first}, {first + length}) is outside the {len(self.trace.jobs)} jobs")
        self.jobs = self.trace.jobs[first : first + length]
        self.window = (first, length)
        machine = self.trace.machine
        self._submit = np.array([j.submit for j in self.jobs], dtype=np.float64)
        self._request = np.array([max(j.request, 0) for j in self.jobs], dtype=np.float64)
        self._procs = np.array([max(j.procs, 0) for j in self.jobs], dtype=np.float64)
        self._nodes = np.array([machine.nodes_for(j.procs) for j in self.jobs], dtype=np.float64)
        self._steps = decisions(self.jobs, machine, self.config.backfill)
        self._choices = []
        self._counted = 0
        self.result = None
        self._decision = next(self._steps)
        reward = self._advance_single()
        return self._observe(), {"window": self.window, "skipped_reward": reward}

    def step(self, action: int) -> tuple[dict, float, bool, bool, dict]:
        if self._decision is None:
            raise RuntimeError("step() after the episode ended: call reset()")
        action = action_index(action, self.action_space)
        if not 0 <= action < self.action_space.n:
            return self._observe(), 0.0, False, False, {
                "refused": f"action {action} is outside 0..{self.action_space.n - 1}"}
        if not self.action_masks()[action]:
            return self._observe(), 0.0, False, False, {"refused": "masked action"}
        reward = self._send(action) + self._advance_single()
        info: dict[str, Any] = {}
        if self._decision is None:
            info["episode_metrics"] = {"avg_bsld": self.result.avg_bsld}
        return self._observe(), reward, self._decision is None, False, info

    def action_masks(self) -> np.ndarray:
        """Legal actions: one per occupied slot; Wait never."""
        mask = np.zeros(self.config.slots + 1, dtype=bool)
        if self._decision is not None:
            mask[: min(len(self._decision.queue), self.config.slots)] = True
        return mask

    @property
    def now(self) -> int:
        """Time of the current decision [s] (the last one once the episode has ended)."""
        return self._decision.now if self._decision is not None else max(self.result.start_times, default=0)

    @property
    def visible_jobs(self) -> list[PeerJob]:
        """The queued jobs in the K slots, in slot (queue) order; empty once the episode has ended."""
        if self._decision is None:
            return []
        return [self.jobs[p] for p in self._decision.queue[: self.config.slots]]

    def _send(self, k: int) -> float:
        """Commit queue index ``k``; the reward of every job started until the next decision."""
        self._choices.append(k)
        try:
            self._decision = self._steps.send(k)
        except StopIteration as done:
            self._decision, self.result = None, done.value
            order, start = done.value.start_order, done.value.start_times
        else:
            order, start = self._decision.order, self._decision.start
        new = order[self._counted :]
        self._counted = len(order)
        bsld = sum(bounded_slowdown(start[p], self.jobs[p].submit, self.jobs[p].run) for p in new)
        return -bsld / len(self.jobs) / self.config.reward_scale

    def _advance_single(self) -> float:
        """Take every decision with a single queued job (no choice); the reward they earn."""
        reward = 0.0
        while self._decision is not None and len(self._decision.queue) == 1:
            reward += self._send(0)
        return reward

    # -- observation -----------------------------------------------------------------------------------------
    def _observe(self) -> dict[str, np.ndarray]:
        k = self.config.slots
        jobs = np.zeros((k, JOB_FEATURES), np.float32)
        placements = np.zeros((k, 1, PLACEMENT_FEATURES), np.float32)
        cluster = np.zeros((1, CLUSTER_FEATURES), np.float32)
        glob = np.zeros(GLOBAL_FEATURES, np.float32)
        d = self._decision
        n = len(self.jobs)
        if d is None:
            glob[:] = 1.0
            return {"jobs": jobs, "placements": placements, "cluster": cluster, "global": glob}
        machine_nodes = self.trace.machine.nodes
        q = np.array(d.queue[:k])
        m = q.size
        wait = np.maximum(d.now - self._submit[q], 0.0)
        request = self._request[q]
        nodes = self._nodes[q]
        free = max(d.free, 0)
        fits = nodes <= free
        bsld_now = np.maximum(1.0, (wait + request) / np.maximum(request, BSLD_THRESHOLD_S))
        jobs[:m, 0] = 1.0
        jobs[:m, 1] = np.log1p(wait) / self._time_scale
        jobs[:m, 2] = np.log1p(request) / self._time_scale
        jobs[:m, 3] = self._procs[q] / self._machine_procs
        jobs[:m, 4] = nodes / max(free, 1)
        jobs[:m, 5] = fits
        jobs[:m, 6] = np.log(bsld_now) / math.log(_BSLD_SCALE)
        jobs[:m, 7] = np.log1p(request * self._procs[q]) / (self._time_scale + math.log(self._machine_procs))
        placements[:m, 0, 0] = fits
        placements[:m, 0, 1] = np.where(fits, (free - nodes) / machine_nodes, 0.0)
        expected_end = np.array([d.start[p] + self._request[p] for _, _, p in d.running])
        held = np.array([self._nodes[p] for _, _, p in d.running])
        cluster[0, 0] = free / machine_nodes
        cluster[0, 1] = len(d.running) / machine_nodes
        cluster[0, 2] = len(d.queue) / k
        cluster[0, 3] = len(d.queue) > k
        for i, horizon in enumerate(_SOON_S):
            cluster[0, 4 + i] = held[expected_end <= d.now + horizon].sum() / machine_nodes if held.size else 0.0
        glob[0] = len(d.order) / n
        glob[1] = (len(d.order) + len(d.queue)) / n
        np.clip(jobs, 0.0, 1.0, out=jobs)
        np.clip(cluster, 0.0, 1.0, out=cluster)
        return {"jobs": jobs, "placements": placements, "cluster": cluster, "global": glob}
