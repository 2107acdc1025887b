"""Property tests over random configuration data: every loader of a file users write turns any YAML-shaped value
into a valid object or a one-line ConfigError, never another exception (and never hangs)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agents.experiment import check_experiment
from baselines.config import policy_config_from_dict
from envs.core.dynamics import DynamicsConfig
from envs.core.errors import ConfigError
from envs.core.presets import cluster_from_dict
from envs.workload.synthetic_config import SyntheticConfig
from evaluation.slurm_replay import case_from_dict

NUMBERS = st.one_of(st.integers(-10**30, 10**30), st.floats(allow_nan=True, allow_infinity=True),
                    st.sampled_from([0, 1, -1, 1e300, 1e-300, 2**63, 0.5]))
SCALARS = st.one_of(st.none(), st.booleans(), NUMBERS, st.text(max_size=12))

KEYS = {
    "scenario": ["failures", "outages", "restart_overhead_s", "max_failures", "governance", "node_mtbf_s",
                 "gpu_mtbf_s", "repair", "mttr_s", "schedule", "node", "gpu", "fail_s", "repair_s", "windows",
                 "mtbf_s", "partitions", "quotas"],
    "cluster": ["name", "node_groups", "count", "gpu_type", "gpus", "island_size", "cpus", "ram_gib", "rack",
                "cache_gib", "gpu_types", "memory_gib", "speed", "partitions", "quotas"],
    "workload": ["n_jobs", "target_load", "arrivals", "runtime", "users", "n_users", "n_teams", "zipf_exponent",
                 "process", "median_s", "gpus", "shares", "priority", "cpu_milli_per_gpu", "partitions", "names"],
    "policy": ["orders", "k8s", "slurm", "partitions", "quotas", "weights", "QOS", "Preempt", "PriorityWeightAge",
               "fairshare", "half_life_s"],
    "slurm case": ["name", "node", "gpus", "cpus", "ram_mib", "jobs", "id", "submit_s", "time_min", "run_s",
                   "partition", "partitions", "slurm", "recorded", "epoch_s", "QOS", "Accounts", "priority_tier"],
    "experiment": ["env_id", "env", "total_timesteps", "ppo", "n_steps", "batch_size", "gamma", "learning_rate",
                   "train", "eval", "seeds", "pretrain", "teacher", "vec", "num_envs", "recipe", "world", "case"],
}


def data(keys: list[str]) -> st.SearchStrategy[Any]:
    """YAML-shaped values whose mappings mostly use ``keys`` (so that the loaders get past the unknown-key check)."""
    names = st.one_of(st.sampled_from(keys), st.text(max_size=8))
    return st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                         st.dictionaries(names, inner, max_size=5)), max_leaves=24)


LOADERS: dict[str, Callable[[Any], Any]] = {
    "scenario": lambda d: DynamicsConfig.from_dict(d, name="random"),
    "cluster": lambda d: cluster_from_dict(d, where="random.yaml"),
    "workload": SyntheticConfig.from_dict,
    "policy": lambda d: policy_config_from_dict(d, where="random.yaml"),
    "slurm case": lambda d: case_from_dict(d, where="random.yaml"),
    "experiment": lambda d: check_experiment(d, "random.yaml"),
}


@pytest.mark.parametrize("kind", list(LOADERS))
def test_random_config_data_loads_or_is_one_config_error(kind):
    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(data(KEYS[kind]))
    def check(value):
        try:
            LOADERS[kind](value)
        except ConfigError as exc:
            assert str(exc).strip()  # says what was wrong (the CLIs print it on one line)

    check()


def test_the_ppo_schema_names_every_maskable_ppo_setting():
    from agents.experiment import PPOSection
    from agents.ppo import OWN_KEYS, PPO_DEFAULTS

    assert set(PPOSection.model_fields) == set(PPO_DEFAULTS) | set(OWN_KEYS)
