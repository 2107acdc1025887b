"""Warm start by imitation: fit the policy to a teacher's actions (behaviour cloning) before PPO fine-tunes it.

A teacher is a function of the unwrapped env at a decision point that returns a legal action. Demonstrations are
collected on the env's own episodes (reset seeds given, never the evaluation ones), then the policy's masked
action distribution is fitted by maximum likelihood (cross-entropy on the teacher's actions). DAgger rounds (Ross
et al., 2011) then let the fitted policy drive new episodes, label the states it reaches with the teacher's
actions and refit on everything gathered, so the clone also learns to recover from its own mistakes (small
deviations otherwise compound over a congested 2,000-job episode).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from agents.callbacks import progress_bar
from baselines.registry import make, parse
from baselines.rls import rls_policy
from envs.gymenv.actions import start_action, wait_action
from envs.gymenv.env import GPUClusterEnv
from envs.peer.env import PeerSchedEnv
from envs.sim.policy import Start

Teacher = Callable[[Any], int]
"""``teacher(env) -> action``: a legal action of the unwrapped env at its current decision point; a teacher with
a ``reset()`` method is reset at the start of every episode."""


class HeuristicTeacher:
    """A registered heuristic (``ORDER+BACKFILL/PLACEMENT``) acting through the env's actions: its next start, if
    the job is in a visible slot and the heuristic's placement rule is one of the env's rules and legal; otherwise
    the first legal start of that job, else Wait when legal, else the first legal action."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.scheduler = make(name)
        self.rule = parse(name)[2]

    def reset(self) -> None:
        """Forget the heuristic's state (a new episode)."""
        self.scheduler.reset()

    def __call__(self, env: GPUClusterEnv) -> int:
        mask = env.action_masks()
        config = env.config
        rules = list(config.placement_rules)
        action = self.scheduler.act(env.view)
        slot = next((i for i, job in enumerate(env.visible_jobs)
                     if isinstance(action, Start) and job.job_id == action.job_id), None)
        if slot is not None:
            preferred = [rules.index(self.rule)] if self.rule in rules else []
            for rule in preferred + list(range(len(rules))):
                if mask[start_action(config, slot, rule)]:
                    return start_action(config, slot, rule)
        wait = wait_action(config)
        return wait if mask[wait] else int(np.flatnonzero(mask[:config.n_starts])[0])  # Wait masked: a start is legal


class PeerTeacher:
    """An ``rls:`` order acting in the peer-mode env: it commits the job the order picks among the visible slots
    (the first K queued jobs; the whole queue when it fits, as in the heuristic itself)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.choose, _ = rls_policy(name)

    def __call__(self, env: PeerSchedEnv) -> int:
        return self.choose(env.visible_jobs, env.now)


def make_teacher(env: gym.Env, name: str) -> Teacher:
    """The teacher called ``name`` for ``env``: an ``rls:`` order on the peer-mode env, a heuristic otherwise."""
    return PeerTeacher(name) if isinstance(env.unwrapped, PeerSchedEnv) else HeuristicTeacher(name)


def demonstrations(env: gym.Env, teacher: Teacher, seeds: list[int], gamma: float,
                   actor: Callable[[dict[str, np.ndarray], np.ndarray], int] | None = None, progress: bool = False
                   ) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray, np.ndarray]:
    """(observations by key, action masks, teacher actions, discounted returns from each decision) over one
    episode per reset seed. The episodes follow the teacher, or ``actor(obs, mask) -> action`` when given (the
    teacher still labels every state; the returns are then the actor's). ``progress``: a bar on stderr over the
    episodes."""
    observations: dict[str, list[np.ndarray]] = {}
    masks, actions, returns = [], [], []
    bar = progress_bar(len(seeds), "imitation: episodes" + (" (DAgger)" if actor else ""), "episode", progress)
    for seed in seeds:
        obs, _ = env.reset(seed=seed)
        if hasattr(teacher, "reset"):
            teacher.reset()
        terminated = truncated = False
        rewards = []
        while not (terminated or truncated):
            action = teacher(env.unwrapped)
            mask = env.unwrapped.action_masks()
            for key, value in obs.items():
                observations.setdefault(key, []).append(value)
            masks.append(mask)
            actions.append(action)
            obs, reward, terminated, truncated, _ = env.step(action if actor is None else actor(obs, mask))
            rewards.append(reward)
        ahead, backwards = 0.0, []
        for reward in reversed(rewards):
            ahead = reward + gamma * ahead
            backwards.append(ahead)
        returns.extend(reversed(backwards))
        bar.update()
        bar.set_postfix_str(f"{len(actions):,} decisions", refresh=False)
    bar.close()
    return ({k: np.stack(v) for k, v in observations.items()}, np.stack(masks), np.array(actions),
            np.array(returns, dtype=np.float32))


def pretrain(model: Any, env: gym.Env, teacher: Teacher, seeds: list[int], epochs: int = 10,
             batch_size: int = 256, seed: int = 0, learning_rate: float = 3e-4,
             dagger_seeds: list[list[int]] | None = None, progress: bool = False) -> dict[str, float]:
    """Fit ``model``'s policy to ``teacher`` on the episodes of ``seeds`` (and its value head to the discounted
    returns, so that PPO's first advantages are not noise) with Adam at ``learning_rate`` (not PPO's: fine-tuning
    rates are far too small to clone a teacher; PPO sets its own rate again at every update). Each list of
    ``dagger_seeds`` is one DAgger round: episodes driven by the policy (deterministic, masked), labelled by the
    teacher, added to the data, which is refitted for ``epochs`` passes. Returns the final loss and the share of
    the last round's decisions where the policy's most likely action starts the teacher's job (rules that find the
    same GPUs look alike to the network, so agreement is counted per job, not per rule), overall and
    separately over the contested decisions (a choice between jobs, :func:`contested_decisions`) and the
    others. ``progress``: bars on
    stderr over the episodes and the fitting passes."""
    policy, device = model.policy, model.device
    rules = policy.mlp_extractor.rules  # placement rules per slot (P)
    rng = np.random.default_rng(seed)
    data = demonstrations(env, teacher, seeds, model.gamma, progress=progress)
    newest = len(data[2])  # decisions of the latest collection (agreement is measured on them)

    def actor(obs: dict[str, np.ndarray], mask: np.ndarray) -> int:
        action, _ = model.predict(obs, action_masks=mask, deterministic=True)
        return int(action)

    for group in policy.optimizer.param_groups:
        group["lr"] = learning_rate
    loss = 0.0
    for round_seeds in [None, *(dagger_seeds or [])]:
        if round_seeds is not None:
            more = demonstrations(env, teacher, round_seeds, model.gamma, actor, progress)
            newest = len(more[2])
            data = ({k: np.concatenate([data[0][k], more[0][k]]) for k in data[0]},
                    *(np.concatenate([a, b]) for a, b in zip(data[1:], more[1:], strict=True)))
        loss = _fit(model, data, epochs, batch_size, rng, progress)
    obs, masks, actions, _ = data
    agree = np.zeros(newest, dtype=bool)
    first = len(actions) - newest
    with torch.no_grad():
        for start in range(first, len(actions), batch_size):
            idx = np.arange(start, min(start + batch_size, len(actions)))
            chosen = policy.get_distribution(_rows(obs, idx, device), masks[idx]).distribution.probs.argmax(1)
            chosen = chosen.cpu().numpy()
            agree[idx - first] = chosen // rules == actions[idx] // rules
    contested = contested_decisions(masks[first:], env.unwrapped.config.slots * rules, rules)
    return {"loss": loss, "agreement": float(agree.mean()), "decisions": len(actions),
            "contested_share": float(contested.mean()),
            "agreement_contested": float(agree[contested].mean()) if contested.any() else float("nan"),
            "agreement_uncontested": float(agree[~contested].mean()) if (~contested).any() else float("nan")}


def contested_decisions(masks: np.ndarray, n_starts: int, rules: int) -> np.ndarray:
    """Per decision (rows of action ``masks`` whose first ``n_starts`` are Starts, ``rules`` placement rules per
    slot), whether it is a choice between jobs: two or more slots with a legal start, or one and another legal
    action (Wait, a Preempt). Decisions with one legal job differ at most in placement."""
    slots = masks[:, :n_starts].reshape(len(masks), -1, rules).any(2).sum(1)
    return slots + masks[:, n_starts:].any(1) >= 2


def _fit(model: Any, data: tuple[dict[str, np.ndarray], np.ndarray, np.ndarray, np.ndarray], epochs: int,
         batch_size: int, rng: np.random.Generator, progress: bool = False) -> float:
    """``epochs`` passes of minibatch maximum likelihood of the teacher's actions plus value regression on the
    returns; the last minibatch's loss. ``progress``: a bar on stderr over the passes."""
    obs, masks, actions, returns = data
    policy, device = model.policy, model.device
    policy.set_training_mode(True)
    loss = torch.tensor(0.0)
    bar = progress_bar(epochs, f"imitation: fit {len(actions):,} decisions", "epoch", progress)
    for _ in range(epochs):
        order = rng.permutation(len(actions))
        for start in range(0, len(actions), batch_size):
            idx = order[start : start + batch_size]
            a = torch.as_tensor(actions[idx], device=device)
            values, log_prob, _ = policy.evaluate_actions(_rows(obs, idx, device), a, action_masks=masks[idx])
            g = torch.as_tensor(returns[idx], device=device)
            loss = -log_prob.mean() + model.vf_coef * torch.nn.functional.mse_loss(values.flatten(), g)
            policy.optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), model.max_grad_norm)
            policy.optimizer.step()
        bar.update()
        bar.set_postfix_str(f"loss {float(loss.detach()):.3f}", refresh=False)
    bar.close()
    policy.set_training_mode(False)
    return float(loss.detach())


def _rows(obs: dict[str, np.ndarray], idx: np.ndarray, device: Any) -> dict[str, torch.Tensor]:
    """The observations at ``idx``, as tensors on ``device``."""
    return {k: torch.as_tensor(v[idx], device=device) for k, v in obs.items()}
