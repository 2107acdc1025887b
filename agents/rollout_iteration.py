"""Rollout policy iteration on the heuristic-selection env (AggreVaTe; Bertsekas' rollout).

Each iteration:

1. **Visit.** Play ``episodes`` training workloads with the current policy (iteration 0: the reference, choice 0),
   greedily, as it would be deployed.
2. **Label.** At a random ``state_fraction`` of the contested decisions, estimate each offered candidate's cost
   with the lookahead machinery of :mod:`baselines.lookahead`: draw ``futures`` resampled futures from the
   training streams (the same for every candidate: common random numbers), fork the simulator into each, carry
   out the candidate's proposal (held for ``commit_s`` when the world commits), then let the reference decide up
   to ``horizon_s`` [s]. The cost is the job-seconds of wait accrued (∫ pending jobs dt), averaged over the
   futures: the reference's cost-to-go after the action, as AggreVaTe uses the expert's. A candidate other than
   the reference is *eligible* only if its mean gain over the reference, future by future, exceeds ``z``
   standard errors (``z`` = 0: any gain), so that noise alone does not pull the policy away from the reference.
3. **Aggregate and train.** Add the labelled states to the data of every earlier iteration; train by
   cost-sensitive cross-entropy towards softmax(−(cost − least cost) / (τ · s)) over the eligible candidates,
   where s is the mean over the data of each state's standard deviation of costs across them (one scale for all
   states, so that close costs give a nearly flat target), plus ``kl_coef`` × KL(previous policy ‖ new)
   on the data (an anchor against forgetting; before iteration 0 the previous policy is the reference, so the
   first policy leaves it only where the costs say so).
4. **Validate** on the world's validation seeds, paired with the reference; ``best_model.zip`` keeps the best.

The state after each iteration is saved atomically (``checkpoint.pt``), so a killed run resumes where it stopped.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.nn import functional as F

from agents.selection import Selection, same_action
from agents.selection_env import HeuristicSelectionEnv
from agents.selection_policy import OBS_KEYS, SelectionNet, batch, save_model
from agents.selection_training import (
    World,
    greedy,
    load_checkpoint,
    new_net,
    on_device,
    play,
    reference_waits,
    save_checkpoint,
    to_device,
    validate,
)
from baselines import make
from baselines.lookahead import MAX_FUTURES, Committed, draw_future, rollout_cost
from envs.core.errors import ConfigError
from envs.sim.loop import apply_action
from envs.workload.futures import FutureModel


@dataclass(frozen=True)
class RolloutSettings:
    """The recipe's parameters (the ``rollout:`` section of an experiment)."""

    iterations: int = 4
    episodes: int = 4  # training workloads visited per iteration [count]
    state_fraction: float = 0.05  # share of the contested decisions labelled
    futures: int = 4  # resampled futures per labelled state [count]
    horizon_s: float = 7200.0  # rollout length after the decision [s]
    tau: float = 0.5  # temperature of the target, in units of the data's mean cost spread
    kl_coef: float = 0.1  # weight of KL(previous policy ‖ new)
    z: float = 1.0  # a candidate enters the target only if its paired gain over the reference exceeds z SE
    epochs: int = 40  # passes over the aggregated data per iteration
    batch_size: int = 256
    learning_rate: float = 1e-3
    hidden: int = 64

    def __post_init__(self) -> None:
        for key in ("iterations", "episodes", "futures", "epochs", "batch_size", "hidden"):
            if not isinstance(getattr(self, key), int) or getattr(self, key) < 1:
                raise ConfigError(f"rollout.{key}: must be an integer >= 1, got {getattr(self, key)!r}")
        if self.futures > MAX_FUTURES:
            raise ConfigError(f"rollout.futures: at most {MAX_FUTURES}, got {self.futures}")
        if not 0 < self.state_fraction <= 1:
            raise ConfigError(f"rollout.state_fraction: must be in (0, 1], got {self.state_fraction!r}")
        for key in ("horizon_s", "tau", "learning_rate"):
            if not getattr(self, key) > 0 or math.isinf(getattr(self, key)):
                raise ConfigError(f"rollout.{key}: must be a finite number > 0, got {getattr(self, key)!r}")
        for key in ("kl_coef", "z"):
            if not getattr(self, key) >= 0 or math.isinf(getattr(self, key)):
                raise ConfigError(f"rollout.{key}: must be a finite number >= 0, got {getattr(self, key)!r}")


def label(env: HeuristicSelectionEnv, futures: FutureModel, settings: RolloutSettings, reference: str,
          rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(mean rollout cost [job-s] of each candidate at the env's contested decision over ``settings.futures``
    futures common to all candidates, whether it may enter the target): the reference always may; another
    candidate if its mean gain over the reference, future by future, exceeds ``settings.z`` standard errors. A
    masked candidate gets its unmasked alias's cost and is never eligible (its alias is)."""
    sim, proposals, mask = env.sim, env.proposals, env.action_masks()
    selection: Selection = env.selection
    now = sim.time_s
    drawn = [draw_future(sim.view, futures, settings.horizon_s, rng) for _ in range(settings.futures)]
    costs = np.zeros((len(proposals), len(drawn)))
    for i in np.flatnonzero(mask):
        for f, future in enumerate(drawn):
            fork = sim.fork(future)
            start = fork.pending_job_s
            if selection.commit_s > 0:  # the candidate holds for commit_s, then the reference
                policy: Any = Committed(make(selection.names[i]), now + selection.commit_s, lambda: make(reference))
            else:  # its proposal now; the reference from the next decision on (agreed decisions are everyone's)
                apply_action(fork, proposals[i])
                policy = make(reference)
            policy.reset()
            costs[i, f] = fork.pending_job_s - start + rollout_cost(fork, policy,
                                                                     settings.horizon_s - (fork.time_s - now))
    for i in np.flatnonzero(~mask):  # an alias costs what its twin costs
        twin = next(j for j in np.flatnonzero(mask) if same_action(proposals[i], proposals[j]))
        costs[i] = costs[twin]
    gain = costs[0] - costs  # > 0: cheaper than the reference, future by future
    se = gain.std(axis=1, ddof=1) / math.sqrt(len(drawn)) if len(drawn) > 1 else np.zeros(len(proposals))
    eligible = mask & (gain.mean(axis=1) > settings.z * se)
    eligible[0] = True
    return costs.mean(axis=1), eligible


def targets(costs: torch.Tensor, mask: torch.Tensor, tau: float) -> torch.Tensor:
    """softmax(−(cost − least) / (τ · s)) over the candidates ``mask`` lets in, s the mean per-state spread (std of
    those candidates' costs) over the states with two or more; a state whose candidates all cost the same gets a
    flat target over them, one with a single candidate all of it there."""
    big = torch.finfo(costs.dtype).max
    masked = torch.where(mask, costs, torch.full_like(costs, big))
    least = masked.min(1, keepdim=True).values
    offered = mask.sum(1).clamp(min=1)
    mean = torch.where(mask, costs, 0).sum(1, keepdim=True) / offered[:, None]
    spread = torch.sqrt((torch.where(mask, (costs - mean) ** 2, 0)).sum(1) / offered)
    several = offered >= 2
    scale = max(float(spread[several].mean()) if several.any() else 0.0, 1e-9) * tau
    logits = torch.where(mask, -(costs - least) / scale, torch.full_like(costs, -math.inf))
    return torch.softmax(logits, dim=1)


def train_epochs(net: SelectionNet, optimizer: torch.optim.Optimizer, data: dict[str, torch.Tensor],
                 settings: RolloutSettings, rng: np.random.Generator) -> dict[str, float]:
    """Cost-sensitive cross-entropy with the KL anchor over the aggregated ``data``; the last epoch's losses."""
    n = len(data["costs"])
    target = targets(data["costs"], data["eligible"], settings.tau)
    stats: dict[str, float] = {}
    for _ in range(settings.epochs):
        order = torch.as_tensor(rng.permutation(n), device=target.device)
        ce_sum = kl_sum = 0.0
        for start in range(0, n, settings.batch_size):
            idx = order[start:start + settings.batch_size]
            logits, _ = net({k: data[k][idx] for k in OBS_KEYS}, data["mask"][idx])
            logp = F.log_softmax(logits, dim=1)
            ce = -(target[idx] * logp.clamp(min=-1e4)).sum(1).mean()
            prev = data["prev_logp"][idx]
            prev_p = prev.exp()
            kl = (prev_p * (prev - logp).where(prev_p > 0, torch.zeros_like(prev))).sum(1).mean()
            loss = ce + settings.kl_coef * kl
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            ce_sum += float(ce.detach()) * len(idx)
            kl_sum += float(kl.detach()) * len(idx)
        stats = {"cross_entropy": ce_sum / n, "kl_to_previous": kl_sum / n}
    return stats


def reference_log_probs(costs: torch.Tensor) -> torch.Tensor:
    """Log-probabilities of the policy before iteration 0, the reference: all mass on candidate 0."""
    out = torch.full_like(costs, -math.inf)
    out[:, 0] = 0.0
    return out


def _log_probs(net: SelectionNet, data: dict[str, torch.Tensor]) -> torch.Tensor:
    with torch.no_grad():
        logits, _ = net({k: data[k] for k in OBS_KEYS}, data["mask"])
    return F.log_softmax(logits, dim=1)


def collect(env: HeuristicSelectionEnv, world: World, net: SelectionNet | None, iteration: int,
            settings: RolloutSettings, futures: FutureModel, rng: np.random.Generator) -> tuple[list, ...]:
    """Visit ``settings.episodes`` training workloads with ``net`` (None: the reference) and label a random
    ``state_fraction`` of their contested decisions; (observations, masks, costs, eligible)."""
    observations: list[dict[str, np.ndarray]] = []
    masks: list[np.ndarray] = []
    costs: list[np.ndarray] = []
    eligible: list[np.ndarray] = []

    def at_decision(e: HeuristicSelectionEnv, obs: dict[str, np.ndarray], mask: np.ndarray) -> None:
        if rng.random() < settings.state_fraction:
            observations.append(obs)
            masks.append(mask)
            cost, ok = label(e, futures, settings, world.candidates[0], rng)
            costs.append(cost)
            eligible.append(ok)

    choose = greedy(net) if net is not None else (lambda obs, mask: 0)
    for e in range(settings.episodes):
        train_seed = world.train[(iteration * settings.episodes + e) % len(world.train)]
        play(env, world.episode(train_seed), choose, at_decision)
    return observations, masks, costs, eligible


def run(world: World, settings: RolloutSettings, run_dir: Path, seed: int = 0,
        log: Any = print, writer: Any = None, device: str = "cpu") -> dict[str, Any]:
    """Train (or resume training) in ``run_dir``, the network's updates on ``device``; the history of the
    iterations and the best validation score."""
    env = world.env()
    futures = world.futures()
    reference = world.candidates[0]
    state = load_checkpoint(run_dir)
    net = new_net(env, settings.hidden, seed)
    optimizer = torch.optim.Adam(net.parameters(), lr=settings.learning_rate)
    data: dict[str, torch.Tensor] = {}
    history: list[dict[str, float]] = []
    best = math.inf
    first = 0
    if state is not None:
        net.load_state_dict(state["net"])
        optimizer.load_state_dict(state["optimizer"])
        data, history, best, first = dict(state["data"]), list(state["history"]), float(state["best"]), \
            int(state["iteration"]) + 1
        log(f"resumed after iteration {first - 1} ({len(data.get('costs', []))} labelled states)")
    ref = reference_waits(world)
    log(f"reference {reference}: validation mean wait {ref.mean():.1f} s over {len(ref)} seeds")
    for iteration in range(first, settings.iterations):
        began = time.perf_counter()
        rng = np.random.default_rng((seed, iteration))
        observations, masks, costs, eligible = collect(env, world, None if iteration == 0 else net, iteration, settings,
                                             futures, rng)
        if observations:
            new_obs, new_mask = batch(observations, masks)
            fresh = {**new_obs, "mask": new_mask, "costs": torch.as_tensor(np.stack(costs)),
                     "eligible": torch.as_tensor(np.stack(eligible))}
            data = fresh if not data else {k: torch.cat([data[k], fresh[k]]) for k in fresh}
        if not data:
            raise ConfigError("rollout: no contested decision was labelled; raise state_fraction or episodes")
        data["prev_logp"] = _log_probs(net, data) if iteration > 0 else reference_log_probs(data["costs"])
        with on_device(net, optimizer, device):
            stats = train_epochs(net, optimizer, to_device(data, device), settings, rng)
        ratio, waits = validate(world, net)
        improved = ratio < best
        if improved:
            best = ratio
            save_model(run_dir / "best_model.zip", net, world.meta())
        save_model(run_dir / "model.zip", net, world.meta())
        wins = float(data["eligible"][:, 1:].any(1).float().mean())
        row = {"iteration": iteration, "states": len(data["costs"]), "new_states": len(costs),
               "validation_ratio": ratio, "validation_mean_wait_s": float(waits.mean()),
               "label_not_reference": wins, "wall_s": time.perf_counter() - began, **stats}
        history.append(row)
        if writer is not None:
            for key, value in row.items():
                writer.add_scalar(f"rollout/{key}", value, iteration)
        log(f"iteration {iteration}: {len(costs)} new states ({len(data['costs'])} in all; {wins:.0%} with a "
            f"candidate significantly better than the reference), cross-entropy {stats['cross_entropy']:.3f}, "
            f"validation {waits.mean():.1f} s = {ratio:.3f} x reference{' (best)' if improved else ''}, "
            f"{row['wall_s']:.0f} s")
        save_checkpoint(run_dir, {"net": net.state_dict(), "optimizer": optimizer.state_dict(),
                                  "data": {k: v for k, v in data.items() if k != "prev_logp"},
                                  "history": history, "best": best, "iteration": iteration})
    return {"history": history, "best_validation_ratio": best}
