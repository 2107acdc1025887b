"""PPO that can move, on the heuristic-selection env: a group baseline, discounting by simulated time, a critic
burn-in, ``target_kl`` and an entropy bonus where the agent has a choice.

- **Group baseline** (Decima's input-dependent baseline). Each iteration plays ``groups`` training workloads,
  each ``group_size`` times with the same arrivals and runtimes (only the policy's samples differ). A decision's
  baseline is the mean over the *other* episodes of its group of their return-to-go at the same simulated time
  (:func:`group_baselines`), so the advantage holds what the choices changed, not how hard the workload was.
  ``baseline: reference`` takes instead the return-to-go at the same time of the reference replaying the
  workload (a reward relative to the reference), and ``baseline: critic`` GAE over the value head
  (:func:`gae_by_time`).
- **Discounting by simulated time**: a reward ``Δt`` seconds later weighs ``0.5 ** (Δt / half_life_s)``
  (:func:`time_discounted_returns`), so the last waits of a long episode weigh as the first do, whatever the
  number of decisions between.
- **Critic burn-in**: the actor is frozen, and only the value head trains, until the value head's explained
  variance on an iteration's returns exceeds ``burn_in_ev`` (or ``burn_in_max`` iterations have passed); the
  explained variance is logged every iteration.
- **Updates**: clipped PPO with an early stop once the approximate KL exceeds ``target_kl``; the entropy bonus
  applies at every decision of this env, each of which is contested (uncontested ones never reach the agent).
- **Warm start**: imitation of the reference (candidate 0) on its own episodes, ``imitation_epochs`` passes,
  towards 1 − ``imitation_smoothing`` on the reference and the rest spread over the other offered candidates, so
  that the first samples explore around the reference instead of replaying it.

Each iteration's state is saved atomically (``checkpoint.pt``); a killed run resumes where it stopped.
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

from agents.selection_env import HeuristicSelectionEnv
from agents.selection_policy import OBS_KEYS, SelectionNet, batch, save_model
from agents.selection_training import (
    Step,
    World,
    explained_variance,
    load_checkpoint,
    new_net,
    on_device,
    play,
    reference_waits,
    save_checkpoint,
    to_device,
    validate,
)
from envs.core.errors import ConfigError

BASELINES = ("group", "reference", "critic")


@dataclass(frozen=True)
class GroupPPOSettings:
    """The recipe's parameters (the ``group_ppo:`` section of an experiment)."""

    iterations: int = 20
    groups: int = 2  # training workloads per iteration [count]
    group_size: int = 4  # episodes per workload, same arrivals [count]
    half_life_s: float = 4 * 3600.0  # a reward this much later weighs half [s]
    gae_lambda: float = 0.98  # with baseline: critic
    baseline: str = "group"
    clip_range: float = 0.2
    target_kl: float = 0.02
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    epochs: int = 4
    batch_size: int = 256
    learning_rate: float = 3e-4
    burn_in_ev: float = 0.5
    burn_in_max: int = 5  # iterations [count]
    imitation_episodes: int = 2
    imitation_epochs: int = 20
    imitation_smoothing: float = 0.2  # the warm start's target: 1 − this on the reference, the rest spread
    validate_every: int = 2  # iterations [count]
    hidden: int = 64

    def __post_init__(self) -> None:
        for key in ("iterations", "groups", "group_size", "epochs", "batch_size", "hidden", "validate_every",
                    "imitation_episodes"):
            if not isinstance(getattr(self, key), int) or getattr(self, key) < 1:
                raise ConfigError(f"group_ppo.{key}: must be an integer >= 1, got {getattr(self, key)!r}")
        for key in ("burn_in_max", "imitation_epochs"):
            if not isinstance(getattr(self, key), int) or getattr(self, key) < 0:
                raise ConfigError(f"group_ppo.{key}: must be an integer >= 0, got {getattr(self, key)!r}")
        if self.baseline not in BASELINES:
            raise ConfigError(f"group_ppo.baseline: must be {' or '.join(BASELINES)}, got {self.baseline!r}")
        if self.baseline == "group" and self.group_size < 2:
            raise ConfigError("group_ppo.group_size: the group baseline needs at least 2 episodes per workload")
        for key in ("half_life_s", "clip_range", "target_kl", "learning_rate"):
            if not getattr(self, key) > 0 or math.isinf(getattr(self, key)):
                raise ConfigError(f"group_ppo.{key}: must be a finite number > 0, got {getattr(self, key)!r}")
        for key in ("ent_coef", "vf_coef"):
            if not getattr(self, key) >= 0 or math.isinf(getattr(self, key)):
                raise ConfigError(f"group_ppo.{key}: must be a finite number >= 0, got {getattr(self, key)!r}")
        if not math.isfinite(self.burn_in_ev):
            raise ConfigError(f"group_ppo.burn_in_ev: must be a finite number, got {self.burn_in_ev!r}")
        if not 0 <= self.imitation_smoothing < 1:
            raise ConfigError(f"group_ppo.imitation_smoothing: must be in [0, 1), got {self.imitation_smoothing!r}")
        if not 0 <= self.gae_lambda <= 1:
            raise ConfigError(f"group_ppo.gae_lambda: must be in [0, 1], got {self.gae_lambda!r}")


def discounts(times_s: np.ndarray, half_life_s: float) -> np.ndarray:
    """The factor from each decision to the next, 0.5 ** (Δt / half_life_s); 0 after the last (the end)."""
    out = np.zeros(len(times_s))
    out[:-1] = 0.5 ** (np.diff(times_s) / half_life_s)
    return out


def time_discounted_returns(rewards: np.ndarray, times_s: np.ndarray, half_life_s: float) -> np.ndarray:
    """Return-to-go of each decision: R_i = r_i + 0.5 ** ((t_{i+1} − t_i) / half_life_s) · R_{i+1}."""
    factor = discounts(times_s, half_life_s)
    out = np.zeros(len(rewards))
    running = 0.0
    for i in range(len(rewards) - 1, -1, -1):
        running = rewards[i] + factor[i] * running
        out[i] = running
    return out


def value_at(times_s: np.ndarray, returns: np.ndarray, t: float, half_life_s: float) -> float:
    """An episode's return-to-go from simulated time ``t``: that of its first decision at or after ``t``,
    discounted back to ``t`` (0 when it has none left)."""
    k = int(np.searchsorted(times_s, t, side="left"))
    if k >= len(times_s):
        return 0.0
    return float(returns[k] * 0.5 ** ((times_s[k] - t) / half_life_s))


def group_baselines(times: list[np.ndarray], returns: list[np.ndarray], half_life_s: float) -> list[np.ndarray]:
    """Per episode of a group, the baseline at each of its decisions: the mean over the group's other episodes
    of their return-to-go at the same simulated time (:func:`value_at`)."""
    out = []
    for j, own in enumerate(times):
        others = [m for m in range(len(times)) if m != j]
        out.append(np.array([np.mean([value_at(times[m], returns[m], t, half_life_s) for m in others])
                             for t in own]))
    return out


def gae_by_time(rewards: np.ndarray, values: np.ndarray, times_s: np.ndarray, half_life_s: float,
                lam: float) -> np.ndarray:
    """GAE with per-step discounts by simulated time: δ_i = r_i + g_i V_{i+1} − V_i, A_i = δ_i + g_i λ A_{i+1}
    (g_i = 0.5 ** (Δt / half_life_s); no value after the last decision)."""
    factor = discounts(times_s, half_life_s)
    following = np.append(values[1:], 0.0)
    delta = rewards + factor * following - values
    out = np.zeros(len(rewards))
    running = 0.0
    for i in range(len(rewards) - 1, -1, -1):
        running = delta[i] + factor[i] * lam * running
        out[i] = running
    return out


def _sampler(net: SelectionNet, rng: np.random.Generator, record: list[tuple[float, float]]) -> Any:
    def choose(obs: dict[str, np.ndarray], mask: np.ndarray) -> int:
        with torch.no_grad():
            logits, value = net(*batch([obs], [mask]))
        logp = torch.log_softmax(logits[0], 0)
        probs = logp.exp().numpy().astype(np.float64)
        action = int(rng.choice(len(probs), p=probs / probs.sum()))
        record.append((float(logp[action]), float(value[0])))
        return action
    return choose


def imitate_reference(env: HeuristicSelectionEnv, net: SelectionNet, world: World, settings: GroupPPOSettings,
                      seed: int) -> float:
    """Warm start: cross-entropy towards candidate 0 (smoothed over the other offered candidates) on the
    reference's own episodes; the final agreement (the share of decisions where candidate 0 is the most probable)."""
    steps: list[Step] = []
    for e in range(settings.imitation_episodes):
        steps += play(env, world.episode(world.train[e % len(world.train)]), lambda obs, mask: 0)[0]
    obs, mask = batch([s.obs for s in steps], [s.mask for s in steps])
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
    others = mask.float()
    others[:, 0] = 0.0
    spread = others / others.sum(1, keepdim=True).clamp(min=1.0)
    target = settings.imitation_smoothing * spread
    target[:, 0] = 1.0 - target[:, 1:].sum(1)
    rng = np.random.default_rng((seed, 1))
    for _ in range(settings.imitation_epochs):
        for idx in torch.as_tensor(rng.permutation(len(steps))).split(settings.batch_size):
            logits, _ = net({k: obs[k][idx] for k in OBS_KEYS}, mask[idx])
            loss = -(target[idx] * F.log_softmax(logits, 1).clamp(min=-1e4)).sum(1).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    with torch.no_grad():
        logits, _ = net(obs, mask)
    return float((logits.argmax(1) == 0).float().mean())


def collect(env: HeuristicSelectionEnv, net: SelectionNet, world: World, settings: GroupPPOSettings, iteration: int,
            seed: int,
            value_scale: float) -> dict[str, Any]:
    """Play the iteration's groups; the batch: observations, masks, actions, old log-probs, values [reward units:
    the critic's output × ``value_scale``], returns, advantages, and the episodes' mean waits."""
    rng = np.random.default_rng((seed, iteration, 7))
    steps: list[Step] = []
    old: list[tuple[float, float]] = []
    returns, advantages, waits, values_all = [], [], [], []
    for g in range(settings.groups):
        workload = world.episode(world.train[(iteration * settings.groups + g) % len(world.train)])
        times, rets, rewards, values = [], [], [], []
        for _ in range(settings.group_size):
            record: list[tuple[float, float]] = []
            episode, metrics = play(env, workload, _sampler(net, rng, record))
            steps += episode
            old += record
            t = np.array([s.time_s for s in episode])
            r = np.array([s.reward for s in episode])
            times.append(t)
            rewards.append(r)
            values.append(np.array([v for _, v in record]) * value_scale)
            rets.append(time_discounted_returns(r, t, settings.half_life_s))
            waits.append(metrics.get("mean_wait_s", math.nan))
        if settings.baseline == "group":
            base = group_baselines(times, rets, settings.half_life_s)
            adv = [ret - b for ret, b in zip(rets, base, strict=True)]
        elif settings.baseline == "reference":
            reference, _ = play(env, workload, lambda obs, mask: 0)
            ref_t = np.array([s.time_s for s in reference])
            ref_r = time_discounted_returns(np.array([s.reward for s in reference]), ref_t, settings.half_life_s)
            adv = [ret - np.array([value_at(ref_t, ref_r, x, settings.half_life_s) for x in t])
                   for ret, t in zip(rets, times, strict=True)]
        else:
            adv = [gae_by_time(r, v, t, settings.half_life_s, settings.gae_lambda)
                   for r, v, t in zip(rewards, values, times, strict=True)]
        returns += rets
        advantages += adv
        values_all += values
    obs, mask = batch([s.obs for s in steps], [s.mask for s in steps])
    return {"obs": obs, "mask": mask, "actions": torch.as_tensor([s.action for s in steps]),
            "old_logp": torch.as_tensor([lp for lp, _ in old]), "values": np.concatenate(values_all),
            "returns": torch.as_tensor(np.concatenate(returns), dtype=torch.float32),
            "advantages": torch.as_tensor(np.concatenate(advantages), dtype=torch.float32),
            "mean_wait_s": float(np.nanmean(waits))}


def update(net: SelectionNet, optimizer: torch.optim.Optimizer, data: dict[str, Any], settings: GroupPPOSettings,
           actor: bool, rng: np.random.Generator, value_scale: float) -> dict[str, float]:
    """PPO epochs over ``data`` (the critic alone when not ``actor``; it learns returns / ``value_scale``);
    losses, approx KL, clip fraction."""
    n = len(data["actions"])
    adv = data["advantages"] / (data["advantages"].std() + 1e-8)  # one scale for the whole iteration
    stats = {"approx_kl": 0.0, "clip_fraction": 0.0, "entropy": 0.0, "value_loss": 0.0, "epochs": 0}
    for epoch in range(settings.epochs):
        kls = []
        for idx in torch.as_tensor(rng.permutation(n), device=adv.device).split(settings.batch_size):
            logits, values = net({k: data["obs"][k][idx] for k in OBS_KEYS}, data["mask"][idx])
            logp_all = F.log_softmax(logits, 1)
            logp = logp_all.gather(1, data["actions"][idx, None]).squeeze(1)
            probs = logp_all.exp()
            entropy = -(probs * logp_all.clamp(min=-1e4)).sum(1).mean()
            value_loss = F.mse_loss(values, data["returns"][idx] / value_scale)
            ratio = (logp - data["old_logp"][idx]).exp()
            clipped = ratio.clamp(1 - settings.clip_range, 1 + settings.clip_range)
            policy_loss = -torch.min(ratio * adv[idx], clipped * adv[idx]).mean()
            loss = settings.vf_coef * value_loss
            if actor:
                loss = loss + policy_loss - settings.ent_coef * entropy
            optimizer.zero_grad()
            loss.backward()
            if not actor:  # burn-in: the actor stays as it is
                for p in net.actor.parameters():
                    p.grad = None
            optimizer.step()
            with torch.no_grad():
                kls.append(float(((ratio - 1) - (logp - data["old_logp"][idx])).mean()))
                stats["clip_fraction"] = float(((ratio - 1).abs() > settings.clip_range).float().mean())
            stats["entropy"], stats["value_loss"] = float(entropy.detach()), float(value_loss.detach())
        stats["approx_kl"], stats["epochs"] = float(np.mean(kls)), epoch + 1
        if actor and stats["approx_kl"] > settings.target_kl:
            break
    return stats


def run(world: World, settings: GroupPPOSettings, run_dir: Path, seed: int = 0, log: Any = print,
        writer: Any = None, device: str = "cpu") -> dict[str, Any]:
    """Train (or resume training) in ``run_dir``, the network's updates on ``device``; the history and the best
    validation score."""
    state = load_checkpoint(run_dir)
    env = world.env()
    net = new_net(env, settings.hidden, seed)
    optimizer = torch.optim.Adam(net.parameters(), lr=settings.learning_rate)
    history: list[dict[str, float]] = []
    best, first, burned_in = math.inf, 0, settings.burn_in_max == 0
    value_scale = 0.0  # the critic learns returns over this: the first iteration's return SD
    ref = reference_waits(world)
    log(f"reference {world.candidates[0]}: validation mean wait {ref.mean():.1f} s over {len(ref)} seeds")
    if state is not None:
        net.load_state_dict(state["net"])
        optimizer.load_state_dict(state["optimizer"])
        history, best, first = list(state["history"]), float(state["best"]), int(state["iteration"]) + 1
        burned_in, value_scale = bool(state["burned_in"]), float(state["value_scale"])
        log(f"resumed after iteration {first - 1}")
    else:
        agreement = imitate_reference(env, net, world, settings, seed)
        log(f"warm start: imitation of the reference, agreement {agreement:.1%} on its contested decisions")
        best, _ = validate(world, net)
        save_model(run_dir / "best_model.zip", net, world.meta())
    for iteration in range(first, settings.iterations):
        began = time.perf_counter()
        data = collect(env, net, world, settings, iteration, seed, value_scale or 1.0)
        if not value_scale:
            value_scale = float(data["returns"].std()) or 1.0
            data["values"] = data["values"] * 0.0  # an untrained critic: its outputs were not in these units
        ev = explained_variance(data["values"], data["returns"].numpy())
        with on_device(net, optimizer, device):
            stats = update(net, optimizer, to_device(data, device), settings, burned_in,
                           np.random.default_rng((seed, iteration, 3)), value_scale)
        actor = burned_in
        if not burned_in and (ev > settings.burn_in_ev or iteration + 1 >= settings.burn_in_max):
            burned_in = True
        row = {"iteration": iteration, "explained_variance": ev, "actor_trained": float(actor),
               "train_mean_wait_s": data["mean_wait_s"], "decisions": len(data["actions"]), **stats}
        if (iteration + 1) % settings.validate_every == 0 or iteration + 1 == settings.iterations:
            ratio, waits = validate(world, net)
            row.update(validation_ratio=ratio, validation_mean_wait_s=float(waits.mean()))
            if ratio < best:
                best = ratio
                save_model(run_dir / "best_model.zip", net, world.meta())
        save_model(run_dir / "model.zip", net, world.meta())
        row["wall_s"] = time.perf_counter() - began
        history.append(row)
        if writer is not None:
            for key, value in row.items():
                writer.add_scalar(f"group_ppo/{key}", value, iteration)
        shown = f", validation {row['validation_ratio']:.3f} x reference" if "validation_ratio" in row else ""
        log(f"iteration {iteration}: explained variance {ev:.2f}{'' if actor else ' (critic burn-in)'}, "
            f"approx_kl {stats['approx_kl']:.4f}, entropy {stats['entropy']:.3f}, training mean wait "
            f"{data['mean_wait_s']:.1f} s{shown}, {row['wall_s']:.0f} s")
        save_checkpoint(run_dir, {"net": net.state_dict(), "optimizer": optimizer.state_dict(), "history": history,
                                  "best": best, "iteration": iteration, "burned_in": burned_in,
                                  "value_scale": value_scale})
    return {"history": history, "best_validation_ratio": best}
