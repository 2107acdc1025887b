"""Training callbacks: periodic evaluation episodes logged to TensorBoard beside the best heuristic's figures,
checkpoints and a progress bar. Every file they write is written atomically. They serve both training engines:
SB3's ``learn`` and the batched engine's loop (:mod:`agents.ppo_torch`) call the same hooks."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import gymnasium as gym
import numpy as np
from stable_baselines3.common.callbacks import BaseCallback
from tqdm import tqdm

from agents.model_file import checkpoint_path, save_model
from baselines import make
from envs.core.files import write_text_atomically
from envs.core.metrics import summarize
from envs.peer.engine import run_sequence
from envs.peer.env import PeerSchedEnv
from envs.sim import simulate

EVAL_KEYS = ("mean_wait_s", "mean_bsld", "utilization")
"""Metrics logged under ``eval/`` (the model) and ``eval/heuristic_`` (the best heuristic on the same episodes);
the first one ranks the heuristics."""
PEER_EVAL_KEYS = ("avg_bsld",)
"""The same on the peer-mode env (heuristics are ``rls:`` orders, run with the env's backfill mode)."""


def heuristic_metrics(env: gym.Env, name: str) -> dict[str, float]:
    """The metrics of heuristic ``name`` on the episode ``env`` has just been reset to."""
    if isinstance(env, PeerSchedEnv):
        choose, _ = make(f"rls:{name}")
        return {"avg_bsld": run_sequence(env.jobs, env.trace.machine, choose, env.config.backfill).avg_bsld}
    return summarize(simulate(env.cluster, env.workload, make(name), env.runtime, env.dynamics))


class EvalScalars(BaseCallback):
    """Every ``eval_freq`` steps, play ``seeds`` episodes with the current model (deterministic, masked) and log
    their mean ``EVAL_KEYS``; beside them, once, the best of ``heuristics`` (lowest mean wait) on the same episodes.
    With ``best_path``, the model is saved there whenever its first key is the lowest so far (validation); the
    model as training starts (a warm start, a resumed run) is evaluated too, so fine-tuning that only makes it worse
    leaves it as the best model. The best score is kept beside it (``best_model.json``: metric, value, step), and a
    resumed run (``resume=True``) starts from it, so it replaces the best model only with a better one. With
    ``on_validation``, each validation is also handed to it as ``(steps, metrics)`` (the first metric ranks; a sweep
    reports it to Ray Tune, whose early stopping may end the run there) once the best model is saved."""

    def __init__(self, env_id: str, env_overrides: dict, seeds: Sequence[int], heuristics: Sequence[str],
                 eval_freq: int, best_path: Path | None = None, resume: bool = False,
                 on_validation: Callable[[int, dict[str, float]], None] | None = None) -> None:
        super().__init__()
        self.on_validation = on_validation
        self.env = gym.make(env_id, **env_overrides)
        self.seeds, self.heuristics, self.eval_freq = list(seeds), list(heuristics), eval_freq
        self.best_path, self.best_value = best_path, np.inf
        self.record = best_path.with_suffix(".json") if best_path is not None else None
        if resume and self.record is not None and self.record.exists():
            self.best_value = float(json.loads(self.record.read_text())["value"])
        self.heuristic: dict[str, float] = {}
        self.heuristic_name = ""
        self.latest: dict[str, float] = {}  # the last validation's metrics
        self.keys = PEER_EVAL_KEYS if isinstance(self.env.unwrapped, PeerSchedEnv) else EVAL_KEYS

    def _on_training_start(self) -> None:
        unwrapped = self.env.unwrapped
        best: tuple[float, str, dict[str, float]] | None = None
        for name in self.heuristics:
            runs = []
            for seed in self.seeds:
                self.env.reset(seed=seed)  # draws the same episode the model will see for this seed
                runs.append(heuristic_metrics(unwrapped, name))
            means = {k: float(np.mean([r[k] for r in runs])) for k in self.keys}
            if best is None or means[self.keys[0]] < best[0]:
                best = (means[self.keys[0]], name, means)
        if best is not None:
            _, self.heuristic_name, self.heuristic = best
        if self.eval_freq:
            self._validate()
            self.logger.dump(self.num_timesteps)  # the starting point's own record

    def _on_step(self) -> bool:
        if self.eval_freq and self.n_calls % self.eval_freq == 0:
            self._validate()
        return True

    def _validate(self) -> None:
        """Evaluate the model now, log it beside the best heuristic and keep it if it is the best so far; then hand
        it to ``on_validation``."""
        metrics = self.latest = self.evaluate()
        for key, value in metrics.items():
            self.logger.record(f"eval/{key}", value)
        if self.best_path is not None and metrics[self.keys[0]] < self.best_value:
            self.best_value = metrics[self.keys[0]]
            save_model(self.model, self.best_path)
            write_text_atomically(self.record, json.dumps({"metric": self.keys[0], "value": self.best_value,
                                                           "step": self.num_timesteps}))
        for key, value in self.heuristic.items():
            self.logger.record(f"eval/heuristic_{key}", value)
        if self.on_validation is not None:
            self.on_validation(self.num_timesteps, metrics)

    def evaluate(self) -> dict[str, float]:
        """The model's mean metrics over the evaluation seeds."""
        runs = []
        for seed in self.seeds:
            obs, _ = self.env.reset(seed=seed)
            while True:
                mask = self.env.unwrapped.action_masks()
                action, _ = self.model.predict(obs, action_masks=mask, deterministic=True)
                obs, _, terminated, truncated, info = self.env.step(int(action))
                if terminated or truncated:
                    runs.append(info.get("episode_metrics", {}))
                    break
        return {k: float(np.mean([r.get(k, np.nan) for r in runs])) for k in self.keys}


class Checkpoints(BaseCallback):
    """Save the model as ``RUN/checkpoints/model_N_steps.zip`` (N: its step count) once ``every`` steps have passed
    since the last save, between a rollout's update and the next rollout (so a checkpoint holds a consistent model
    and optimizer), and when training ends. A run continued from a checkpoint (``train.py --resume``) picks up exactly
    there."""

    def __init__(self, run_dir: Path, every: int) -> None:
        super().__init__()
        self.run_dir, self.every = Path(run_dir), every
        self.last = 0

    def _on_training_start(self) -> None:
        checkpoint_path(self.run_dir, 0).parent.mkdir(parents=True, exist_ok=True)
        self.last = self.num_timesteps

    def _on_rollout_start(self) -> None:
        if self.num_timesteps - self.last >= self.every:
            self._save()

    def _on_step(self) -> bool:
        return True

    def _on_training_end(self) -> None:
        if self.num_timesteps > self.last:
            self._save()

    def _save(self) -> None:
        save_model(self.model, checkpoint_path(self.run_dir, self.num_timesteps))
        self.last = self.num_timesteps


def progress_bar(total: int | None, desc: str, unit: str, enabled: bool = True, initial: int = 0) -> tqdm:
    """A progress bar on stderr (``total`` units, or a bare counter for None): redrawn twice a second on a terminal,
    every 30 s into a file or a pipe (a log keeps a few lines, not thousands); counts of 10,000 and more in k / M."""
    tty = sys.stderr.isatty()
    return tqdm(total=total, desc=desc, unit=unit, initial=initial, file=sys.stderr, disable=not enabled,
                mininterval=0.5 if tty else 30.0, dynamic_ncols=tty, unit_scale=(total or 0) >= 10_000)


class ProgressBar(BaseCallback):
    """A bar on stderr over the run's steps (done of the total, steps per second) showing the latest validation
    score of ``validation`` beside its best heuristic's. Place it after ``validation`` in the callback list, so a
    step that validates shows the new score."""

    def __init__(self, validation: EvalScalars | None = None, enabled: bool = True) -> None:
        super().__init__()
        self.validation, self.enabled = validation, enabled
        self.bar: tqdm | None = None
        self._shown: dict[str, float] | None = None

    def _on_training_start(self) -> None:
        total = int(self.locals.get("total_timesteps", self.num_timesteps))  # both engines: the run's total
        self.bar = progress_bar(total, "PPO", "step", self.enabled, initial=self.num_timesteps)
        self._show_score()

    def _on_step(self) -> bool:
        if self.bar is not None:
            self._show_score()  # before the update, which may redraw the bar
            self.bar.update(self.num_timesteps - self.bar.n)
        return True

    def _on_training_end(self) -> None:
        if self.bar is not None:
            self._show_score()
            self.bar.update(self.num_timesteps - self.bar.n)
            self.bar.close()

    def _show_score(self) -> None:
        validation = self.validation
        if validation is None or not validation.latest or validation.latest is self._shown or self.bar is None:
            return
        key = validation.keys[0]
        beside = f" ({validation.heuristic_name} {validation.heuristic[key]:,.4g})" if validation.heuristic else ""
        self.bar.set_postfix_str(f"validation {key} {validation.latest[key]:,.4g}{beside}", refresh=False)
        self._shown = validation.latest
