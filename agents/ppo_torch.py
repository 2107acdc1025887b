"""PPO on a batched engine (:class:`envs.vec.VecClusterEnv`): rollouts, advantages and minibatch updates stay on
the engine's device, in the manner of CleanRL's ``ppo.py``.

What is trained is the ``policy`` of an ordinary MaskablePPO (the :class:`~agents.network.SlotPolicy` network,
built from the experiment's ``ppo:`` section as on the SB3 path), so every setting is read from that object and a
``ppo:`` key means what it means there: ``n_steps`` (steps per cluster per rollout), ``batch_size``, ``n_epochs``,
``gamma``, ``gae_lambda``, ``clip_range``, ``clip_range_vf``, ``normalize_advantage``, ``ent_coef``, ``vf_coef``,
``max_grad_norm``, ``target_kl`` and the learning-rate schedule. The model file it leaves
(:func:`agents.model_file.save_model`) is a MaskablePPO model like any other and runs on the event simulator.
stable-baselines3 callbacks (validation, checkpoints, the progress bar) are driven through their usual hooks, and
TensorBoard gets SB3's tags.

Illegal actions get sb3-contrib's masked logit (-1e8): probability exactly 0, never sampled, no gradient, no share
of the entropy. Every random draw (actions, minibatch order) comes from one ``torch.Generator`` seeded from the
run's seed and its step count, so a run and a resumed run are reproducible.
"""

from __future__ import annotations

import dataclasses
import math
import time
import warnings
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import torch
from gymnasium import spaces
from sb3_contrib import MaskablePPO
from stable_baselines3.common.callbacks import BaseCallback, CallbackList
from stable_baselines3.common.utils import configure_logger

from envs.core.errors import ConfigError

MASKED_LOGIT = -1e8
"""The logit of an illegal action (sb3-contrib's, so that the trained model predicts as it was trained)."""
EPISODE_KEYS = ("episode_return", "mean_wait_s", "utilization", "jobs")
"""The batched engine's per-episode ``info`` entries (NaN where no episode ended); logged under ``rollout/``."""


class BatchedEnv(Protocol):
    """N clusters simulated in lockstep as tensors (:class:`envs.vec.VecClusterEnv`): an ended episode is reset at
    once, so every step returns every cluster's next decision point."""

    num_envs: int
    device: torch.device
    observation_space: spaces.Dict
    n_actions: int

    def reset(self) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        """(observations by key (N, *shape) float32, legal actions (N, n_actions) bool)."""
        ...

    def step(self, actions: torch.Tensor) -> tuple[dict[str, torch.Tensor], torch.Tensor, torch.Tensor,
                                                   torch.Tensor, dict[str, torch.Tensor]]:
        """(observations, masks, rewards (N,) float32, done (N,) bool, info: float64 (N,) tensors, NaN where not
        done) after the int64 ``actions`` (N,)."""
        ...


@dataclass(frozen=True)
class VecSettings:
    """An experiment's ``vec:`` section: how the batched engine is set up."""

    num_envs: int = 64
    """clusters simulated in lockstep; a rollout is ppo.n_steps × num_envs decisions"""
    workloads: int = 64
    """generated workloads in the pool that the clusters draw their episodes from"""

    @classmethod
    def from_section(cls, section: Mapping[str, Any] | None) -> VecSettings:
        """The settings of a ``vec:`` section (checked by :func:`agents.experiment.check_experiment`)."""
        return cls(**dict(section or {}))


VEC_KEYS = tuple(f.name for f in dataclasses.fields(VecSettings))
"""The keys of a ``vec:`` section."""


def derived_seed(seed: int, steps: int, stream: int) -> int:
    """A 32-bit seed for one random stream of a run (0: the engine's episodes, 1: actions and minibatches) with
    seed ``seed`` that continues from ``steps`` steps: a resumed run draws fresh but reproducible numbers."""
    return int(np.random.SeedSequence([seed, steps, stream]).generate_state(1)[0])


def batched_model(ppo: Mapping[str, Any], env: Any, device: str, seed: int,
                  tensorboard_log: str | None) -> MaskablePPO:
    """:func:`agents.ppo.new_model` for the batched engine: ``env`` (one event env) gives only the spaces. Its SB3
    rollout buffer (n_steps × 1) is never filled, so SB3's warning about batch_size against it does not apply."""
    from agents.ppo import new_model

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="You have specified a mini-batch size")
        return new_model(ppo, env, device, seed, tensorboard_log)


def policy_outputs(policy: Any, obs: Mapping[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """(action logits (B, A), values (B,)) of an SB3 actor-critic ``policy`` for a batch of observations, in one pass
    through the network: what ``evaluate_actions`` computes, without building its distribution objects."""
    features = policy.extract_features(obs)
    if policy.share_features_extractor:
        latent_pi, latent_vf = policy.mlp_extractor(features)
    else:
        latent_pi = policy.mlp_extractor.forward_actor(features[0])
        latent_vf = policy.mlp_extractor.forward_critic(features[1])
    return policy.action_net(latent_pi), policy.value_net(latent_vf).flatten()


def masked_log_probs(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Log-probabilities (B, A) of the categorical over the legal actions of ``mask`` (B, A)."""
    return torch.log_softmax(torch.where(mask, logits, MASKED_LOGIT), dim=-1)


def masked_entropy(log_probs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Entropy (B,) [nats] of the masked categorical with ``log_probs``: illegal actions add nothing."""
    return -torch.where(mask, log_probs.exp() * log_probs, 0.0).sum(-1)


def gae(rewards: torch.Tensor, values: torch.Tensor, dones: torch.Tensor, last_values: torch.Tensor,
        gamma: float, gae_lambda: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(advantages, returns), both (T, N): generalized advantage estimation over a rollout of ``rewards`` (T, N),
    ``values`` (T, N) of the observations acted on and ``dones`` (T, N) (an episode ended with that step: nothing
    after it is bootstrapped); ``last_values`` (N,) are those of the observations after the last step."""
    advantages = torch.zeros_like(rewards)
    ahead = torch.zeros_like(last_values)
    next_values = last_values
    for t in reversed(range(rewards.shape[0])):
        live = 1.0 - dones[t].to(rewards.dtype)
        delta = rewards[t] + gamma * next_values * live - values[t]
        ahead = delta + gamma * gae_lambda * live * ahead
        advantages[t] = ahead
        next_values = values[t]
    return advantages, advantages + values


class Rollout:
    """One rollout of ``n_steps`` × ``num_envs`` decisions, held on ``device``."""

    def __init__(self, space: spaces.Dict, n_steps: int, num_envs: int, n_actions: int,
                 device: torch.device) -> None:
        shape = (n_steps, num_envs)
        self.obs = {key: torch.zeros((*shape, *box.shape), dtype=torch.float32, device=device)
                    for key, box in space.spaces.items()}
        self.masks = torch.zeros((*shape, n_actions), dtype=torch.bool, device=device)
        self.actions = torch.zeros(shape, dtype=torch.int64, device=device)
        self.log_probs, self.values, self.rewards = (torch.zeros(shape, device=device) for _ in range(3))
        self.dones = torch.zeros(shape, dtype=torch.bool, device=device)
        self.advantages, self.returns = torch.zeros(shape, device=device), torch.zeros(shape, device=device)
        self.steps = 0  # steps filled (the last rollout of a run may be shorter)

    def flat(self) -> dict[str, Any]:
        """The filled steps, flattened to (steps · N, ...)."""
        t = self.steps
        return {"obs": {k: v[:t].flatten(0, 1) for k, v in self.obs.items()},
                **{name: getattr(self, name)[:t].flatten(0, 1)
                   for name in ("masks", "actions", "log_probs", "values", "advantages", "returns")}}


class BatchedPPO:
    """Trains ``model.policy`` (a MaskablePPO's, on ``model.device``) with PPO on the batched engine ``env``; the
    step counter is ``model.num_timesteps``, so a loaded checkpoint continues where it was saved."""

    def __init__(self, model: MaskablePPO, env: BatchedEnv, seed: int = 0) -> None:
        trained = {k: tuple(b.shape) for k, b in model.observation_space.spaces.items()}
        here = {k: tuple(b.shape) for k, b in env.observation_space.spaces.items()}
        if trained != here or int(model.action_space.n) != int(env.n_actions):
            raise ConfigError(f"the batched engine gives observations {here} and {env.n_actions} actions; the model "
                              f"takes {trained} and {model.action_space.n}")
        self.model, self.env = model, env
        self.device = model.device
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(derived_seed(seed, model.num_timesteps, 1))
        self.rollout = Rollout(model.observation_space, model.n_steps, env.num_envs, env.n_actions, self.device)
        self.episodes: dict[str, deque[float]] = {key: deque(maxlen=100) for key in (*EPISODE_KEYS, "length")}
        self._obs: dict[str, torch.Tensor] | None = None
        self._mask = torch.zeros(0, dtype=torch.bool)
        self._lengths = torch.zeros(env.num_envs, dtype=torch.int64, device=self.device)

    def learn(self, total_timesteps: int, callback: BaseCallback | list[BaseCallback] | None = None,
              tb_log_name: str = "ppo") -> MaskablePPO:
        """Train until ``model.num_timesteps`` reaches ``total_timesteps`` (the last rollout is shortened to end
        there, to a whole step of all N clusters), logging to ``model.tensorboard_log`` as SB3's ``learn`` with
        ``reset_num_timesteps=False`` does; ``callback`` gets SB3's hooks (``on_step`` once per step of all N
        clusters, so an ``eval_freq`` counts steps of N decisions, as with an SB3 VecEnv of N envs)."""
        model = self.model
        model.set_logger(configure_logger(0, model.tensorboard_log, tb_log_name, reset_num_timesteps=False))
        model._total_timesteps = total_timesteps
        callback = CallbackList(callback if isinstance(callback, list) else [callback] if callback else [])
        callback.init_callback(model)
        start, t0, iteration = model.num_timesteps, time.perf_counter(), 0
        callback.on_training_start(locals(), globals())
        if self._obs is None:
            self._obs, self._mask = self._to_device(*self.env.reset())
        n = self.env.num_envs
        while model.num_timesteps < total_timesteps:
            steps = min(model.n_steps, math.ceil((total_timesteps - model.num_timesteps) / n))
            if not self._collect(steps, callback):
                break
            iteration += 1
            model._update_current_progress_remaining(model.num_timesteps, total_timesteps)
            self._update()
            elapsed = max(time.perf_counter() - t0, 1e-9)
            self._record_episodes()
            model.logger.record("time/iterations", iteration, exclude="tensorboard")
            model.logger.record("time/fps", int((model.num_timesteps - start) / elapsed))
            model.logger.record("time/time_elapsed", int(elapsed), exclude="tensorboard")
            model.logger.record("time/total_timesteps", model.num_timesteps, exclude="tensorboard")
            model.logger.dump(step=model.num_timesteps)
        callback.on_training_end()
        return model

    def _to_device(self, obs: Mapping[str, torch.Tensor], mask: torch.Tensor
                   ) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        return {k: v.to(self.device) for k, v in obs.items()}, mask.to(self.device)

    def _collect(self, steps: int, callback: BaseCallback) -> bool:
        """Fill the rollout with ``steps`` steps of all clusters, sampled from the policy; False when a callback
        stops training."""
        model, policy, store = self.model, self.model.policy, self.rollout
        policy.set_training_mode(False)
        callback.on_rollout_start()
        ended: list[tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]] = []
        for t in range(steps):
            with torch.no_grad():
                logits, values = policy_outputs(policy, self._obs)
                log_probs = masked_log_probs(logits, self._mask)
                actions = torch.multinomial(log_probs.exp(), 1, generator=self.generator).squeeze(1)
            for key, value in self._obs.items():  # copied: the engine may reuse its buffers
                store.obs[key][t].copy_(value)
            store.masks[t].copy_(self._mask)
            store.actions[t], store.values[t] = actions, values
            store.log_probs[t] = log_probs.gather(1, actions[:, None]).squeeze(1)
            obs, mask, reward, done, info = self.env.step(actions.to(self.env.device))
            self._obs, self._mask = self._to_device(obs, mask)
            done = done.to(self.device)
            store.rewards[t], store.dones[t] = reward.to(self.device), done
            self._lengths += 1
            ended.append((done, self._lengths.clone(), {k: v for k, v in info.items() if k in EPISODE_KEYS}))
            self._lengths = torch.where(done, 0, self._lengths)
            model.num_timesteps += self.env.num_envs
            if not callback.on_step():
                return False
        store.steps = steps
        with torch.no_grad():
            last_values = policy_outputs(policy, self._obs)[1]
        store.advantages[:steps], store.returns[:steps] = gae(store.rewards[:steps], store.values[:steps],
                                                              store.dones[:steps], last_values, model.gamma,
                                                              model.gae_lambda)
        self._keep_episodes(ended)
        callback.on_rollout_end()
        return True

    def _keep_episodes(self, ended: list[tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]]) -> None:
        """Add the rollout's ended episodes to the last-100 statistics (one transfer from the device)."""
        done = torch.stack([d for d, _, _ in ended])
        if not bool(done.any()):
            return
        self.episodes["length"].extend(torch.stack([n for _, n, _ in ended])[done].tolist())
        for key in EPISODE_KEYS:
            if all(key in info for _, _, info in ended):
                self.episodes[key].extend(torch.stack([info[key] for _, _, info in ended])
                                          .to(self.device)[done].tolist())

    def _record_episodes(self) -> None:
        """Log the last 100 episodes' means under SB3's rollout/ tags (and the engine's metrics beside them)."""
        if not self.episodes["length"]:
            return
        logger = self.model.logger
        if self.episodes["episode_return"]:
            logger.record("rollout/ep_rew_mean", float(np.mean(self.episodes["episode_return"])))
        logger.record("rollout/ep_len_mean", float(np.mean(self.episodes["length"])))
        for key in EPISODE_KEYS[1:]:
            if self.episodes[key]:
                logger.record(f"rollout/{key}", float(np.mean(self.episodes[key])))

    def _update(self) -> None:
        """n_epochs passes of minibatch PPO over the rollout, as SB3's ``PPO.train`` does (the same losses, early
        stop on target_kl and logged scalars), with every statistic kept on the device until the end."""
        model, policy = self.model, self.model.policy
        policy.set_training_mode(True)
        model._update_learning_rate(policy.optimizer)  # logs train/learning_rate
        progress = model._current_progress_remaining
        clip = float(model.clip_range(progress))
        clip_vf = None if model.clip_range_vf is None else float(model.clip_range_vf(progress))
        data = self.rollout.flat()
        size = len(data["actions"])
        stats: dict[str, list[torch.Tensor]] = {k: [] for k in ("pg", "value", "entropy", "kl", "clipped")}
        loss = torch.zeros((), device=self.device)
        stop = False
        for _ in range(model.n_epochs):
            order = torch.randperm(size, generator=self.generator, device=self.device)
            stats["kl"].clear()  # SB3 logs the last epoch's mean
            for begin in range(0, size, model.batch_size):
                idx = order[begin : begin + model.batch_size]
                logits, values = policy_outputs(policy, {k: v[idx] for k, v in data["obs"].items()})
                log_probs = masked_log_probs(logits, data["masks"][idx])
                log_prob = log_probs.gather(1, data["actions"][idx, None]).squeeze(1)
                advantages = data["advantages"][idx]
                if model.normalize_advantage and len(idx) > 1:
                    advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
                log_ratio = log_prob - data["log_probs"][idx]
                ratio = log_ratio.exp()
                pg_loss = -torch.min(advantages * ratio, advantages * ratio.clamp(1 - clip, 1 + clip)).mean()
                old_values = data["values"][idx]
                predicted = values if clip_vf is None else old_values + (values - old_values).clamp(-clip_vf, clip_vf)
                value_loss = torch.nn.functional.mse_loss(data["returns"][idx], predicted)
                entropy_loss = -masked_entropy(log_probs, data["masks"][idx]).mean()
                loss = pg_loss + model.ent_coef * entropy_loss + model.vf_coef * value_loss
                with torch.no_grad():
                    approx_kl = ((ratio - 1) - log_ratio).mean()
                    for key, value in (("pg", pg_loss), ("value", value_loss), ("entropy", entropy_loss),
                                       ("kl", approx_kl), ("clipped", ((ratio - 1).abs() > clip).float().mean())):
                        stats[key].append(value.detach())
                if model.target_kl is not None and float(approx_kl) > 1.5 * model.target_kl:
                    stop = True
                    break
                policy.optimizer.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(policy.parameters(), model.max_grad_norm)
                policy.optimizer.step()
            model._n_updates += 1
            if stop:
                break
        returns = data["returns"]
        spread = float(returns.var()) if size > 1 else 0.0
        explained = 1.0 - float((returns - data["values"]).var()) / spread if spread > 0 else float("nan")
        record = model.logger.record
        for key, tag in (("entropy", "entropy_loss"), ("pg", "policy_gradient_loss"), ("value", "value_loss"),
                         ("kl", "approx_kl"), ("clipped", "clip_fraction")):
            record(f"train/{tag}", float(torch.stack(stats[key]).mean()))
        record("train/loss", float(loss.detach()))
        record("train/explained_variance", explained)
        record("train/n_updates", model._n_updates, exclude="tensorboard")
        record("train/clip_range", clip)
        if clip_vf is not None:
            record("train/clip_range_vf", clip_vf)
        policy.set_training_mode(False)
