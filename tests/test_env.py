"""The Gymnasium env, over every registered id: API checks, determinism, pickling, vector envs and masks."""

from __future__ import annotations

import pickle
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env as gym_check_env
from sb3_contrib.common.maskable.utils import get_action_masks
from stable_baselines3.common.env_checker import check_env as sb3_check_env
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

from envs.core import ConfigError
from envs.registration import VARIANTS

TRACES = Path(__file__).resolve().parents[2] / "shared" / "traces"

TRACE_PATHS = {
    "gpusched/SWF-v0": "swf:" + str(TRACES / "lublin-synthetic" / "lublin_256.swf"),
    "gpusched/Philly-v0": "philly:" + str(TRACES / "philly-rfold" / "philly_trace.csv.gz"),
    "gpusched/Openb-v0": "openb:" + str(TRACES / "alibaba-openb-gpu-v2023" / "openb_pod_list_default.csv"),
}
SMALL = {"episode_jobs": 24}  # keeps every variant's episodes short in tests


def make_kwargs(env_id: str) -> dict:
    kwargs = dict(SMALL)
    if env_id in TRACE_PATHS:
        path = TRACE_PATHS[env_id].split(":", 1)[1]
        if not TRACES.is_dir():
            pytest.skip(f"shared traces not found at {TRACES}")
        kwargs["workload"] = TRACE_PATHS[env_id]
        assert path
    return kwargs


def make(env_id: str, **extra) -> gym.Env:
    return gym.make(env_id, **make_kwargs(env_id), **extra)


def rollout(env: gym.Env, seed: int, max_steps: int = 400) -> list:
    """A seeded random masked policy; returns everything the env emitted."""
    rng = np.random.default_rng(seed)
    obs, info = env.reset(seed=seed)
    trace = [(obs, info)]
    for _ in range(max_steps):
        mask = env.unwrapped.action_masks()
        action = int(rng.choice(np.flatnonzero(mask)))
        obs, reward, terminated, truncated, info = env.step(action)
        trace.append((action, obs, reward, terminated, truncated, info))
        if terminated or truncated:
            break
    return trace


def assert_same(a, b) -> None:
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for key in a:
            assert_same(a[key], b[key])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            assert_same(x, y)
    elif isinstance(a, np.ndarray):
        np.testing.assert_array_equal(a, b)
    else:
        assert a == b or (a != a and b != b)  # NaN equals NaN here


ALL_IDS = sorted(VARIANTS)


@pytest.mark.parametrize("env_id", ALL_IDS)
def test_gymnasium_check_env(env_id):
    env = make(env_id)
    gym_check_env(env.unwrapped, skip_render_check=True)


@pytest.mark.parametrize("env_id", ALL_IDS)
def test_sb3_check_env(env_id):
    env = make(env_id)
    sb3_check_env(env.unwrapped, warn=False)


@pytest.mark.parametrize("env_id", ALL_IDS)
def test_same_seed_gives_identical_rollouts(env_id):
    assert_same(rollout(make(env_id), seed=7), rollout(make(env_id), seed=7))


@pytest.mark.parametrize("env_id", ALL_IDS)
def test_pickling_round_trip_continues_identically(env_id):
    env = make(env_id)
    env.reset(seed=3)
    env.step(int(np.flatnonzero(env.unwrapped.action_masks())[0]))
    clone = pickle.loads(pickle.dumps(env))
    for _ in range(5):
        action = int(np.flatnonzero(env.unwrapped.action_masks())[-1])
        assert_same(env.step(action), clone.step(action))


@pytest.mark.parametrize("vec_cls", [DummyVecEnv, SubprocVecEnv])
def test_vector_envs_expose_action_masks(vec_cls):
    # "envs:" makes Gymnasium import the package (and so register the ids) inside each subprocess
    vec = vec_cls([lambda: gym.make("envs:gpusched/GPUCluster-Tiny-v0") for _ in range(2)])
    try:
        vec.seed(0)
        vec.reset()
        for _ in range(30):
            masks = get_action_masks(vec)
            assert masks.shape == (2, vec.action_space.n) and masks.any(axis=1).all()
            vec.step(np.array([np.flatnonzero(m)[0] for m in masks]))
    finally:
        vec.close()


def test_render_ansi_draws_queue_and_nodes():
    env = gym.make("gpusched/GPUCluster-Tiny-v0", render_mode="ansi")
    env.reset(seed=0)
    text = env.render()
    assert "pending=" in text and "a100-0" in text and "slot  0" in text


def test_unknown_config_key_is_an_error_naming_it():
    with pytest.raises(ConfigError, match=r"env\.slotz"):
        gym.make("gpusched/GPUCluster-Tiny-v0", slotz=3)


def test_trace_variant_without_a_path_says_what_to_give():
    with pytest.raises(ConfigError, match="swf: needs a trace path"):
        gym.make("gpusched/SWF-v0")


def test_config_object_dict_and_kwargs_all_configure_the_env():
    from envs.gymenv import EnvConfig

    by_object = gym.make("gpusched/GPUCluster-Tiny-v0", config=EnvConfig(cluster="tiny", workload="small", slots=3))
    by_dict = gym.make("gpusched/GPUCluster-Tiny-v0", config={"slots": 3})
    by_kwargs = gym.make("gpusched/GPUCluster-Tiny-v0", slots=3, placement_rules=("pack",))
    assert by_object.action_space.n == by_dict.action_space.n == 3 * 3 + 1
    assert by_kwargs.action_space.n == 3 * 1 + 1
    assert by_kwargs.observation_space["jobs"].shape == (3, 12)
    with pytest.raises(ConfigError, match="placement_rules"):
        gym.make("gpusched/GPUCluster-Tiny-v0", placement_rules=("bestest",))
