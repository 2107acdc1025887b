"""Where the env's episodes come from: a generated workload per episode, or a window of M jobs of a trace, and
the scenario's failures and outages with a seed of the episode's own."""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import numpy as np

from envs.core.dynamics import DynamicsConfig, scheduled_gpus
from envs.core.errors import ConfigError
from envs.core.runtime import RuntimeConfig
from envs.gymenv.config import EnvConfig
from envs.scenario import governed, load_trace_once, scenario_cluster, synthetic_config, trace_spec
from envs.workload.synthetic import generate
from envs.workload.table import Workload


class Episode(NamedTuple):
    """What one episode replays: its jobs, and the failures and outages the cluster goes through."""

    workload: Workload
    dynamics: DynamicsConfig


class EpisodeSource:
    """The cluster, the runtime model and a sampler of episode workloads for one :class:`EnvConfig`."""

    def __init__(self, config: EnvConfig) -> None:
        self.config = config
        try:
            trace = trace_spec(config.workload)
        except ConfigError as exc:
            raise ConfigError(f"env.workload: {exc}") from exc
        self._trace: Workload | None = None
        if trace is not None:
            self._trace = self._load_trace(trace.fmt, trace.path)
        else:
            self._synthetic = dataclasses.replace(synthetic_config(config.workload, config.load_factor),
                                                  n_jobs=config.episode_jobs)
        try:
            self.cluster = governed(scenario_cluster(config.cluster, trace, self._trace), config.dynamics)
        except ConfigError as exc:
            raise ConfigError(f"env.scenario: {exc}") from exc
        self.runtime = RuntimeConfig.named(config.runtime_model)
        if config.dynamics.active:  # explicit failures must name nodes and GPUs of this cluster
            try:
                scheduled_gpus(config.dynamics, self.cluster)
            except ConfigError as exc:
                raise ConfigError(f"env.scenario: {exc}") from exc

    def _load_trace(self, fmt: str, path: str) -> Workload:
        config = self.config
        workload = load_trace_once(path, fmt)
        if config.trace_split != "all":
            train, test = workload.split_by_time(config.train_fraction)
            workload = train if config.trace_split == "train" else test
        if config.load_factor != 1.0:
            workload = workload.scale_load(config.load_factor)
        if len(workload) < config.episode_jobs:
            raise ConfigError(
                f"env.episode_jobs: the {config.trace_split} part of {path} has {len(workload)} jobs, "
                f"fewer than {config.episode_jobs}"
            )
        return workload

    def sample(self, rng: np.random.Generator) -> Episode:
        """One episode, drawn with ``rng``: the workload first, then (only when the scenario has failures or
        outages, so that a static env's episodes are those it always had) the seed of the dynamics."""
        dynamics = self.config.dynamics
        workload = self._sample_workload(rng)
        if dynamics.active:
            dynamics = dataclasses.replace(dynamics, seed=int(rng.integers(2**31)))
        return Episode(workload, dynamics)

    def _sample_workload(self, rng: np.random.Generator) -> Workload:
        config = self.config
        if self._trace is None:
            return generate(self._synthetic, seed=int(rng.integers(2**31)), capacity_gpus=self.cluster.n_gpus)
        start = int(rng.integers(0, len(self._trace) - config.episode_jobs + 1))
        window = self._trace.window(start, config.episode_jobs)
        if config.max_overestimate > 1:
            window = window.with_estimate_noise(rng, config.max_overestimate)
        return window
