"""A model trained on the peer-mode env (``gpusched/RLSched-v0``) as a peer policy: ``rls:RUN/model.zip``.

The model decides through :class:`envs.peer.env.PeerSchedEnv` itself (same observation, same engine), on any
window of an SWF trace; it uses the backfill mode it was trained with. The evaluation harness runs it beside the
``rls:`` heuristics, and :func:`evaluate_model_peer` runs the peer's protocol (10 sequences of 1024 jobs).

Decoding: by default the model commits its most probable job. ``rls:RUN/model.zip+ORDER@RATIO`` (e.g.
``+sjf@0.5``) decodes with a :class:`Shortlist` instead: among the jobs whose probability is at least ``RATIO``
times the largest, it commits the one the ``rls:`` order ``ORDER`` ranks first. PPO's policies here stay flat
(entropy 2.2-2.6 nats), so which of several near-equal jobs is the most probable one is close to arbitrary;
the shortlist keeps the policy's judgement of which jobs are candidates and lets a heuristic break the near-ties.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from agents.model_file import load_model, run_config
from baselines.rls import first_among, rls_policy
from envs.core.errors import ConfigError
from envs.peer.engine import PEER_SEED, SEQUENCE_COUNT, SEQUENCE_LENGTH, PeerEvaluation, PeerResult, peer_start_indices
from envs.peer.env import PeerEnvConfig, PeerSchedEnv
from envs.registration import PEER_ENV_ID

_DECODING = r"(?P<order>[a-z0-9-]+)@(?P<ratio>[^@+]+)"  # ORDER@RATIO
_MODEL_LIKE = re.compile(r".+?\.zip(?:\+.*)?")  # a model's name, possibly with a malformed decoding suffix
_MODEL_NAME = re.compile(rf"(?P<path>.+?\.zip)(?:\+(?P<decode>{_DECODING}))?")


@dataclass(frozen=True)
class Shortlist:
    """Decoding of a policy's masked probabilities: among the jobs whose probability is at least ``ratio`` times
    the largest, the one the ``rls:`` order ``order`` ranks first (ratio 1: the most probable job, ties broken by
    the order)."""

    order: str = "sjf"
    """An ``rls:`` order without backfill suffix (the backfill mode is the model's own)."""
    ratio: float = 0.5
    """Probability ratio to the most probable job, in (0, 1]."""

    def __post_init__(self) -> None:
        if not 0 < self.ratio <= 1:
            raise ConfigError(f"shortlist ratio: must be in (0, 1], got {self.ratio}")
        if rls_policy(self.order)[1]:
            raise ConfigError(f"shortlist order {self.order!r}: an order only; the model keeps its backfill mode")

    @classmethod
    def parse(cls, text: str) -> Shortlist:
        """The shortlist written ``ORDER@RATIO`` (e.g. ``sjf@0.3``)."""
        match = re.fullmatch(_DECODING, text.strip())
        if match is None:
            raise ConfigError(f"decoding {text!r}: expected ORDER@RATIO (e.g. sjf@0.3)")
        try:
            ratio = float(match["ratio"])
        except ValueError:
            raise ConfigError(f"decoding {text!r}: ratio {match['ratio']!r} is not a number") from None
        return cls(match["order"], ratio)

    @property
    def suffix(self) -> str:
        """The policy-name suffix that selects this decoding: ``+ORDER@RATIO``."""
        return f"+{self.order}@{self.ratio:g}"


def parse_model_name(name: str) -> tuple[str, Shortlist | None]:
    """``(model path, decoding)`` of ``PATH.zip`` or ``PATH.zip+ORDER@RATIO`` (without the ``rls:`` prefix)."""
    match = _MODEL_NAME.fullmatch(name.strip())
    if match is None:
        raise ConfigError(f"model policy {name!r}: expected PATH.zip or PATH.zip+ORDER@RATIO (e.g. +sjf@0.5)")
    return match["path"], Shortlist.parse(match["decode"]) if match["decode"] else None


def is_model_name(name: str) -> bool:
    """Whether a policy name (without the ``rls:`` prefix) names a saved model (``PATH.zip``, maybe with a
    decoding suffix; :func:`parse_model_name` checks the suffix)."""
    return _MODEL_LIKE.fullmatch(name.strip()) is not None


class PeerModelPolicy:
    """Schedules windows of SWF traces with a saved MaskablePPO model (masked; the most probable job, or the
    ``decode`` shortlist's pick)."""

    def __init__(self, model_path: str | Path, device: str = "cpu", decode: Shortlist | None = None) -> None:
        run = run_config(model_path)
        if run.get("env_id") != PEER_ENV_ID:
            raise ConfigError(f"model {model_path}: not trained on {PEER_ENV_ID}; run it as a simulator policy")
        self.name = str(model_path) + (decode.suffix if decode else "")
        self.decode = decode
        self._order = rls_policy(decode.order)[0] if decode else None
        self.env_values = dict(run.get("env") or {})
        self.backfill = bool(self.env_values.get("backfill", False))
        self.model = load_model(model_path, run, device=device)
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
            action = self.act(env, obs)
            latencies.append(time.perf_counter() - t0)
            obs, *_ = env.step(action)
        return env.result, latencies

    def probabilities(self, env: PeerSchedEnv, obs: dict[str, np.ndarray]) -> np.ndarray:
        """The policy's masked probability of each action at ``env``'s current decision (``obs`` its
        observation)."""
        import torch

        tensors = {k: torch.as_tensor(v[None], device=self.model.device) for k, v in obs.items()}
        with torch.no_grad():
            distribution = self.model.policy.get_distribution(tensors, env.action_masks()[None]).distribution
        return distribution.probs[0].cpu().numpy()

    def act(self, env: PeerSchedEnv, obs: dict[str, np.ndarray]) -> int:
        """The action at ``env``'s current decision (``obs`` its observation)."""
        if self.decode is None:
            action, _ = self.model.predict(obs, action_masks=env.action_masks(), deterministic=True)
            return int(action)
        probs = self.probabilities(env, obs)
        near = np.flatnonzero(probs >= self.decode.ratio * probs.max())
        return int(first_among(self._order, env.visible_jobs, near, env.now))


def evaluate_model_peer(policy: PeerModelPolicy, trace: str | Path, seed: int = PEER_SEED,
                        count: int = SEQUENCE_COUNT, length: int = SEQUENCE_LENGTH) -> PeerEvaluation:
    """The peer's evaluation protocol (same windows as :func:`envs.peer.engine.evaluate_peer`) for a model."""
    starts = peer_start_indices(len(policy.env(trace).trace.jobs), seed, count, length)
    return PeerEvaluation(starts, tuple(policy.run_window(trace, s, length)[0] for s in starts))
