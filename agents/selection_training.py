"""What the selection recipes share (:mod:`agents.rollout_iteration`, :mod:`agents.group_ppo`): the world and its
seed ranges, episodes driven by a chooser, validation paired with the reference, resumable checkpoints.

A :class:`World` fixes the workload, cluster, load, the candidates (the first is the *reference*: the best
heuristic on validation, which a constant choice of 0 replays exactly) and three disjoint seed ranges: training
seeds (the recipes' episodes and the futures their rollouts draw), validation seeds (model selection) and nothing
else; test seeds never reach a recipe. For a trace the seeds are the first jobs of windows of ``window`` jobs.
"""

from __future__ import annotations

import math
import pickle
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from agents.selection_env import HeuristicSelectionEnv
from agents.selection_policy import SelectionModelPolicy, SelectionNet, most_probable
from baselines import make
from envs.core.errors import ConfigError
from envs.core.files import write_atomically
from envs.core.metrics import summarize
from envs.scenario import Scenario, scenario, training_streams
from envs.sim import simulate
from envs.workload.futures import FutureModel
from envs.workload.table import Workload

CHECKPOINT_FILE = "checkpoint.pt"
Chooser = Callable[[dict[str, np.ndarray], np.ndarray], int]
"""Picks a candidate from an observation and its mask."""


@dataclass(frozen=True)
class World:
    """A workload × cluster × load, the candidates (the reference first) and the seed ranges a recipe may use."""

    workload: str
    cluster: str
    load: float
    candidates: tuple[str, ...]
    train: tuple[int, ...]
    validation: tuple[int, ...]
    commit_s: float = 0.0  # how long a choice holds (0: until the next contested decision) [s]
    window: int | None = None  # a trace's jobs per window (seeds are window starts); None: synthetic seeds
    metrics_window: tuple[float, float] = (0.1, 0.1)  # steady state: jobs left out at each end, by submit time
    wait_scale_s: float = 3600.0  # reward -1 per job-hour of waiting [s]
    env_settings: Mapping[str, Any] = field(default_factory=dict)  # other EnvConfig settings of the env

    def __post_init__(self) -> None:
        overlap = set(self.train) & set(self.validation)
        if overlap:
            raise ConfigError(f"training and validation seeds overlap: {sorted(overlap)[:5]}")
        if len(self.validation) < 1 or len(self.train) < 1:
            raise ConfigError("a world needs training and validation seeds")

    def scenario(self, seed: int) -> Scenario:
        """The run's world of seed (window start) ``seed``: cluster, workload, runtime model."""
        window = (seed, self.window) if self.window else None
        return scenario(self.workload, self.cluster, seed, self.load, window)

    def episode(self, seed: int) -> Workload:
        """The workload of seed (window start) ``seed``."""
        return self.scenario(seed).workload

    def env(self) -> HeuristicSelectionEnv:
        """A selection env of this world (episodes are given with :meth:`episode`)."""
        settings = {"workload": self.workload, "cluster": self.cluster, "load_factor": self.load,
                    "wait_scale_s": self.wait_scale_s, **dict(self.env_settings)}
        return HeuristicSelectionEnv(candidates=self.candidates, commit_s=self.commit_s, **settings)

    def futures(self) -> FutureModel:
        """Resampled futures from the training streams (never a validation or test seed)."""
        return FutureModel(training_streams(self.workload, self.cluster, self.load, self.train, self.window))

    def meta(self) -> dict[str, Any]:
        """What a model file keeps of its world (plain values)."""
        return {"candidates": list(self.candidates), "commit_s": self.commit_s, "workload": self.workload,
                "cluster": self.cluster, "load": self.load,
                "env": {"wait_scale_s": self.wait_scale_s, **dict(self.env_settings)}}

    def mean_wait_s(self, policy_factory: Callable[[], Any], seeds: Sequence[int]) -> np.ndarray:
        """Steady-state mean wait [s] of a policy on each of ``seeds``."""
        out = []
        for seed in seeds:
            world = self.scenario(seed)
            log = simulate(world.cluster, world.workload, policy_factory(), world.runtime)
            out.append(summarize(log, self.metrics_window)["mean_wait_s"])
        return np.array(out)


@dataclass
class Step:
    """One contested decision of an episode."""

    obs: dict[str, np.ndarray]
    mask: np.ndarray
    action: int
    reward: float  # the reward after the action (wait accrued until the next decision, scaled)
    time_s: float  # simulated time of the decision [s]


def play(env: HeuristicSelectionEnv, workload: Workload, choose: Chooser,
         at_decision: Callable[[HeuristicSelectionEnv, dict[str, np.ndarray], np.ndarray], None] | None = None
         ) -> tuple[list[Step], dict[str, float]]:
    """Run one episode of ``workload`` with ``choose``; (its contested decisions, the episode's metrics).
    ``at_decision(env, obs, mask)`` is called at each decision before the choice (to label it)."""
    obs, info = env.reset(options={"workload": workload})
    steps: list[Step] = []
    done = env.sim.done
    while not done:
        mask = env.action_masks()
        time_s = env.sim.time_s
        if at_decision is not None:
            at_decision(env, obs, mask)
        action = choose(obs, mask)
        next_obs, reward, done, _, info = env.step(action)
        steps.append(Step(obs, mask, action, reward, time_s))
        obs = next_obs
    return steps, info.get("episode_metrics", {})


def greedy(net: SelectionNet) -> Chooser:
    """The network's most probable candidate."""
    return lambda obs, mask: most_probable(net, obs, mask)


def validate(world: World, net: SelectionNet) -> tuple[float, np.ndarray]:
    """(mean over the validation seeds of model/reference mean wait, the model's per-seed mean waits [s])."""
    model = world.mean_wait_s(lambda: SelectionModelPolicy(net, world.meta(), "model"), world.validation)
    reference = reference_waits(world)
    return float(np.mean(model) / np.mean(reference)), model


_REFERENCE_CACHE: dict[tuple, np.ndarray] = {}


def reference_waits(world: World) -> np.ndarray:
    """The reference's steady-state mean wait on each validation seed [s] (computed once per process)."""
    key = (world.workload, world.cluster, world.load, world.window, world.validation, world.candidates[0],
           world.metrics_window)
    if key not in _REFERENCE_CACHE:
        _REFERENCE_CACHE[key] = world.mean_wait_s(lambda: make(world.candidates[0]), world.validation)
    return _REFERENCE_CACHE[key]


def new_net(env: HeuristicSelectionEnv, hidden: int, seed: int) -> SelectionNet:
    """A fresh network for ``env``'s observations, its weights drawn with ``seed``."""
    torch.manual_seed(seed)
    space = env.observation_space
    return SelectionNet(space["candidates"].shape[1], space["cluster"].shape[1], space["global"].shape[0], hidden)


def save_checkpoint(run_dir: Path, state: Mapping[str, Any]) -> None:
    """Write the recipe's ``state`` (tensors and plain values only) to ``run_dir/checkpoint.pt`` atomically."""
    run_dir.mkdir(parents=True, exist_ok=True)
    write_atomically(run_dir / CHECKPOINT_FILE, lambda partial: torch.save(dict(state), partial))


def load_checkpoint(run_dir: Path) -> dict[str, Any] | None:
    """The state saved by :func:`save_checkpoint` in ``run_dir``, or None when there is none."""
    path = run_dir / CHECKPOINT_FILE
    if not path.exists():
        return None
    try:
        return torch.load(path, map_location="cpu", weights_only=True)  # tensors and plain values: runs no code
    except (OSError, RuntimeError, EOFError, ValueError, pickle.UnpicklingError) as exc:
        raise ConfigError(f"{path}: unreadable checkpoint ({' '.join(str(exc).split())[:200]})") from exc


def explained_variance(predicted: np.ndarray, target: np.ndarray) -> float:
    """1 − Var(target − predicted) / Var(target) (NaN when the target does not vary)."""
    var = float(np.var(target))
    return math.nan if var == 0 else 1.0 - float(np.var(target - predicted)) / var


@contextmanager
def on_device(net: SelectionNet, optimizer: torch.optim.Optimizer, device: str) -> Iterator[None]:
    """Train ``net`` and its optimizer's state on ``device`` inside the block; back on the CPU afterwards (episodes
    run there: one small forward pass per decision is faster on the CPU than a round trip to a GPU)."""
    net.to(device)
    optimizer.load_state_dict(optimizer.state_dict())  # casts the optimizer's state to its parameters' device
    try:
        yield
    finally:
        net.to("cpu")
        optimizer.load_state_dict(optimizer.state_dict())


def to_device(value: Any, device: str) -> Any:
    """``value`` with every tensor in it (in nested dicts too) moved to ``device``."""
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, dict):
        return {key: to_device(item, device) for key, item in value.items()}
    return value
