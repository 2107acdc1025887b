"""A model trained on the peer-mode env (``gpusched/RLSched-v0``) as a peer policy: ``rls:RUN/model.zip``.

The model decides through :class:`envs.peer_env.PeerSchedEnv` itself (same observation, same engine), on any
window of an SWF trace; it uses the backfill mode it was trained with. The evaluation harness runs it beside the
``rls:`` heuristics, and :func:`evaluate_model_peer` runs the peer's protocol (10 sequences of 1024 jobs).
"""

from __future__ import annotations

import time
from pathlib import Path

from agents.adapter import run_config
from envs.errors import ConfigError
from envs.peer_env import PeerEnvConfig, PeerSchedEnv
from envs.peer_rls import PEER_SEED, SEQUENCE_COUNT, SEQUENCE_LENGTH, PeerEvaluation, PeerResult, peer_start_indices
from envs.registration import PEER_ENV_ID


class PeerModelPolicy:
    """Schedules windows of SWF traces with a saved MaskablePPO model (deterministic, masked)."""

    def __init__(self, model_path: str | Path, device: str = "cpu") -> None:
        from sb3_contrib import MaskablePPO

        run = run_config(model_path)
        if run.get("env_id") != PEER_ENV_ID:
            raise ConfigError(f"model {model_path}: not trained on {PEER_ENV_ID}; run it as a simulator policy")
        self.name = str(model_path)
        self.env_values = dict(run.get("env") or {})
        self.backfill = bool(self.env_values.get("backfill", False))
        self.model = MaskablePPO.load(str(model_path), device=device)
        self._envs: dict[str, PeerSchedEnv] = {}

    def env(self, trace: str | Path) -> PeerSchedEnv:
        """The trained env's settings on ``trace`` (one env per trace, reused)."""
        key = str(Path(trace).resolve())
        if key not in self._envs:
            self._envs[key] = PeerSchedEnv(PeerEnvConfig.from_dict({**self.env_values, "trace": key}))
        return self._envs[key]

    def run_window(self, trace: str | Path, start: int, length: int) -> tuple[PeerResult, list[float]]:
        """The schedule of jobs ``[start, start + length)`` of ``trace``, and each decision's latency [s]."""
        env = self.env(trace)
        obs, _ = env.reset(options={"start": start, "length": length})
        latencies: list[float] = []
        while env.result is None:
            t0 = time.perf_counter()
            action, _ = self.model.predict(obs, action_masks=env.action_masks(), deterministic=True)
            latencies.append(time.perf_counter() - t0)
            obs, *_ = env.step(int(action))
        return env.result, latencies


def evaluate_model_peer(policy: PeerModelPolicy, trace: str | Path, seed: int = PEER_SEED,
                        count: int = SEQUENCE_COUNT, length: int = SEQUENCE_LENGTH) -> PeerEvaluation:
    """The peer's evaluation protocol (same windows as :func:`envs.peer_rls.evaluate_peer`) for a model."""
    starts = peer_start_indices(len(policy.env(trace).trace.jobs), seed, count, length)
    return PeerEvaluation(starts, tuple(policy.run_window(trace, s, length)[0] for s in starts))
