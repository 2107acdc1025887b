"""Every registered env id, Minigrid style: the Gymnasium and SB3 checkers, determinism, pickling and a masked
rollout to the episode's end, parametrized over one table of ids (the peer env included); then vector envs, masks,
rendering and configuration."""

from __future__ import annotations

import pickle
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env as gym_check_env
from paths import TRACES, require
from sb3_contrib.common.maskable.utils import get_action_masks
from stable_baselines3.common.env_checker import check_env as sb3_check_env
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

import agents  # noqa: F401  (registers gpusched/HeuristicSelect-v0)
from agents.selection_env import SELECT_ENV_ID
from envs.core import ConfigError
from envs.registration import ENV_IDS, PEER_ENV_ID

SMALL = {"episode_jobs": 24}  # keeps every GPUClusterEnv variant's episodes short in tests
TRACE_WORKLOADS = {
    "gpusched/SWF-v0": "swf:" + str(TRACES / "lublin-synthetic" / "lublin_256.swf"),
    "gpusched/Philly-v0": "philly:" + str(TRACES / "philly-rfold" / "philly_trace.csv.gz"),
    "gpusched/Openb-v0": "openb:" + str(TRACES / "alibaba-openb-gpu-v2023" / "openb_pod_list_default.csv"),
}
"""The trace each trace variant replays in these tests (from the shared folder: skipped when it is absent)."""

ENV_CASES = sorted(env_id for env_id in gym.registry if env_id.startswith("gpusched/"))
"""Every registered id, read from Gymnasium's registry: a new id is tested the moment it is registered."""

PEER_SWF = "\n".join(
    ["; MaxNodes: 2", "; MaxProcs: 2"]
    + [f"{i} {20 * i} -1 {10 + 37 * i % 90} {1 + i % 2} -1 -1 -1 -1 -1 1 -1 -1 -1 0 -1 -1 -1" for i in range(1, 61)]
) + "\n"
"""60 jobs of 1 or 2 processors on a two-node machine, every 20 s: the peer env's trace in these tests."""


@pytest.fixture
def make(tmp_path: Path):
    """``make(env_id, **extra)``: the env with the small test settings of its id."""

    def build(env_id: str, **extra) -> gym.Env:
        if env_id == PEER_ENV_ID:
            trace = tmp_path / "peer.swf"
            trace.write_text(PEER_SWF)
            kwargs = {"trace": str(trace), "sequence_jobs": 24, "slots": 4}
        elif env_id == SELECT_ENV_ID:  # small enough to end quickly, loaded enough for contested decisions
            kwargs = {"workload": "small", "cluster": "tiny", "episode_jobs": 48, "load_factor": 2.0}
        else:
            kwargs = dict(SMALL)
            if env_id in TRACE_WORKLOADS:
                require(TRACES)
                kwargs["workload"] = TRACE_WORKLOADS[env_id]
        return gym.make(env_id, **kwargs, **extra)

    return build


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


def test_the_registry_holds_every_id_of_the_package_and_no_other():
    assert sorted([*ENV_IDS, SELECT_ENV_ID]) == ENV_CASES and PEER_ENV_ID in ENV_CASES


@pytest.mark.parametrize("env_id", ENV_CASES)
def test_gymnasium_check_env(env_id, make):
    env = make(env_id)
    gym_check_env(env.unwrapped, skip_render_check=True)


@pytest.mark.parametrize("env_id", ENV_CASES)
def test_sb3_check_env(env_id, make):
    env = make(env_id)
    sb3_check_env(env.unwrapped, warn=False)


@pytest.mark.parametrize("env_id", ENV_CASES)
def test_same_seed_gives_identical_rollouts(env_id, make):
    assert_same(rollout(make(env_id), seed=7), rollout(make(env_id), seed=7))


@pytest.mark.parametrize("env_id", ENV_CASES)
def test_pickling_round_trip_continues_identically(env_id, make):
    env = make(env_id)
    env.reset(seed=3)
    env.step(int(np.flatnonzero(env.unwrapped.action_masks())[0]))
    clone = pickle.loads(pickle.dumps(env))
    for _ in range(5):
        action = int(np.flatnonzero(env.unwrapped.action_masks())[-1])
        assert_same(env.step(action), clone.step(action))


@pytest.mark.parametrize("env_id", ENV_CASES)
def test_masked_random_rollout_ends_the_episode_with_its_metrics(env_id, make):
    env = make(env_id)
    *_, (_, obs, _, terminated, truncated, info) = rollout(env, seed=11, max_steps=5000)
    assert terminated and not truncated
    assert "episode_metrics" in info and all(np.isfinite(v) for v in info["episode_metrics"].values())
    assert env.observation_space.contains(obs)


@pytest.mark.parametrize("env_id", [env_id for env_id in ENV_CASES if env_id != PEER_ENV_ID])
def test_every_variant_takes_a_scenario_of_failures_and_outages(env_id, make):
    env = make(env_id, scenario="flaky")
    planner = 4 if env_id == SELECT_ENV_ID else 0  # the selection env's cluster rows have the planner columns
    assert env.unwrapped.dynamics is None and env.observation_space["cluster"].shape[1] == 7 + planner  # + health
    *_, (_, obs, _, terminated, truncated, info) = rollout(env, seed=5, max_steps=5000)
    assert terminated and not truncated and env.observation_space.contains(obs)
    assert env.unwrapped.dynamics.name == "flaky" and "episode_metrics" in info


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


@pytest.mark.parametrize("action", [2.0, 1.5, True, np.bool_(False), "3", None, float("nan"), np.array([1, 2]),
                                    np.array([0]), np.array(1.0)],
                         ids=["float", "fraction", "bool", "numpy-bool", "string", "none", "nan", "pair", "shape-1",
                              "float-array"])
@pytest.mark.parametrize("env_id", ["gpusched/GPUCluster-Tiny-v0", PEER_ENV_ID])
def test_an_action_that_is_not_one_integer_is_a_type_error_naming_the_space(env_id, action, make):
    env = make(env_id)
    env.reset(seed=0)
    with pytest.raises(TypeError, match=r"action: Discrete\(\d+\) takes one integer"):
        env.step(action)


@pytest.mark.parametrize("env_id", ["gpusched/GPUCluster-Tiny-v0", PEER_ENV_ID])
def test_integer_actions_outside_the_space_are_refused_and_change_nothing(env_id, make):
    env = make(env_id)
    obs, _ = env.reset(seed=0)
    n = env.action_space.n
    for action in (-1, n, n + 5, np.int64(-3), np.array(n)):
        after, reward, terminated, truncated, info = env.step(action)
        assert "refused" in info and reward == 0.0 and not terminated and not truncated
        assert_same(after, obs)
    legal = int(np.flatnonzero(env.unwrapped.action_masks())[0])
    assert "refused" not in env.step(np.int64(legal))[-1]  # numpy integers are actions too
