"""Where the env's episodes come from: a generated workload per episode, or a window of M jobs of a trace."""

from __future__ import annotations

import dataclasses
from functools import lru_cache
from pathlib import Path

import numpy as np

from envs.cluster import ClusterSpec, swf_machine
from envs.env_config import EnvConfig
from envs.errors import ConfigError
from envs.presets import load_cluster
from envs.runtime import RuntimeConfig
from envs.workload import TRACE_FORMATS, Workload, load_trace
from envs.workload.synthetic import generate, load_workload_config

OPENB_NODE_LIST = "openb_node_list_gpu_node.csv"
"""The node list an openb pod trace is replayed on by default (looked up beside the pod file)."""


class EpisodeSource:
    """The cluster, the runtime model and a sampler of episode workloads for one :class:`EnvConfig`."""

    def __init__(self, config: EnvConfig) -> None:
        self.config = config
        fmt, colon, path = config.workload.partition(":")
        self._trace: Workload | None = None
        if colon and fmt in TRACE_FORMATS:
            if not path:
                raise ConfigError(f"env.workload: {fmt}: needs a trace path, e.g. workload='{fmt}:PATH'")
            self._trace = self._load_trace(fmt, path)
            self.cluster = load_cluster(config.cluster) if config.cluster != "auto" else \
                natural_cluster(fmt, path, self._trace)
        else:
            self.cluster = load_cluster("hetero-64" if config.cluster == "auto" else config.cluster)
            synthetic = load_workload_config(config.workload)
            self._synthetic = dataclasses.replace(
                synthetic, n_jobs=config.episode_jobs, target_load=synthetic.target_load * config.load_factor
            )
        self.runtime = RuntimeConfig() if config.runtime_model == "full" else RuntimeConfig.rigid()

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

    def sample(self, rng: np.random.Generator) -> Workload:
        """The workload of one episode, drawn with ``rng``."""
        config = self.config
        if self._trace is None:
            return generate(self._synthetic, seed=int(rng.integers(2**31)), capacity_gpus=self.cluster.n_gpus)
        start = int(rng.integers(0, len(self._trace) - config.episode_jobs + 1))
        window = self._trace.window(start, config.episode_jobs)
        if config.max_overestimate > 1:
            window = window.with_estimate_noise(rng, config.max_overestimate)
        return window


def load_trace_once(path: str, fmt: str) -> Workload:
    """A trace loaded once per process: many envs, resets and evaluation runs share the immutable job table."""
    return _load_trace_cached(str(Path(path).resolve()), fmt)


@lru_cache(maxsize=8)
def _load_trace_cached(path: str, fmt: str) -> Workload:
    return load_trace(path, fmt)


def natural_cluster(fmt: str, path: str, trace: Workload) -> ClusterSpec:
    """The cluster a trace is replayed on by default: an SWF trace's own machine, the openb node list beside the
    pod file, ``philly-like`` for Philly."""
    if fmt == "swf" and trace.machine_gpus:
        return swf_machine(trace.machine_gpus)
    if fmt == "openb" and (nodes := Path(path).with_name(OPENB_NODE_LIST)).exists():
        return load_cluster(f"openb:{nodes}")
    if fmt == "philly":
        return load_cluster("philly-like")
    raise ConfigError(f"cannot tell which cluster {path} ran on; give a cluster")
