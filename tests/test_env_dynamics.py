"""The env with dynamics: the Preemptive variant's actions, running slots and mask worked out by hand on ``tiny``;
failures reproduced by ``reset(seed=...)``; the ``health`` column only with failures; episodes that end under a
random masked policy; scenarios switchable in every variant.

tiny: node 0 = GPUs 0-3 (A100), node 1 = GPUs 4-7 (V100). The hand cases use the rigid runtime model, the pack
rule only, K = 4 visible jobs and R = 3 running slots: actions 0-3 start slots 0-3, 4-6 preempt running slots 0-2,
7 is Wait.
"""

from __future__ import annotations

import math
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from test_env_semantics import masked_random_episode

import envs  # noqa: F401  (registers the ids)
from envs.core import ConfigError, Job
from envs.gymenv.episodes import Episode
from envs.gymenv.observation import GROUP_FEATURES, RUNNING_FEATURES
from envs.workload.table import Workload

PREEMPTIVE = "gpusched/GPUCluster-Preemptive-v0"
HAND = {"cluster": "tiny", "workload": "small", "runtime_model": "rigid", "placement_rules": ("pack",), "slots": 4,
        "running_slots": 3}
PREEMPT_0, PREEMPT_1, PREEMPT_2, WAIT = 4, 5, 6, 7

JOBS = [
    Job(1, 0, 1000, 2000, n_gpus=2, preemptible=True, checkpoint_interval_s=300),
    Job(2, 0, 1000, 2000, n_gpus=4),  # not preemptible
    Job(3, 10, 800, 1000, n_gpus=2, preemptible=True),  # never checkpoints
    Job(4, 20, 100, 100, n_gpus=4),
]
"""J1, J2 at 0 and J3 at 10 fill the cluster; J4 (4 GPUs) arrives at 20, when nothing is free."""


def hand_env(monkeypatch: pytest.MonkeyPatch, jobs: list[Job], **overrides) -> gym.Env:
    """The Preemptive variant on ``tiny`` (settings HAND) whose every episode replays ``jobs``."""
    env = gym.make(PREEMPTIVE, **{**HAND, **overrides}).unwrapped
    workload = Workload.from_jobs("hand", jobs)
    monkeypatch.setattr(env._source, "sample", lambda rng: Episode(workload, env.config.dynamics))
    return env


def start_first_then_wait(env: gym.Env) -> int:
    """The first legal Start, else Wait (never a preemption)."""
    mask = env.action_masks()
    starts = np.flatnonzero(mask[:env.config.n_starts])
    return int(starts[0]) if starts.size else env.config.n_actions - 1


def test_preemptive_layout_is_starts_then_running_slots_then_wait(monkeypatch):
    env = hand_env(monkeypatch, JOBS)
    assert env.action_space.n == 4 * 1 + 3 + 1
    assert env.observation_space["running"].shape == (3, len(RUNNING_FEATURES))
    default = gym.make("gpusched/GPUCluster-v0")
    assert default.action_space.n == 16 * 3 + 1 and "running" not in default.observation_space.spaces


def test_preempting_slot_0_frees_its_gpus_and_requeues_it(monkeypatch):
    env = hand_env(monkeypatch, JOBS)
    env.reset(seed=0)
    # t=0: J1 then J2 start; pack puts J1 on node 0 (both nodes free, lowest index) and J2 on node 1
    assert env.view.time_s == 0 and [j.job_id for j in env.visible_jobs] == [1, 2]
    env.step(0)
    assert [r.job.job_id for r in env.running_jobs] == [1]
    assert env.action_masks().tolist() == [True, False, False, False, True, False, False, True]
    env.step(0)
    # t=10: J3 arrives and fits on GPUs 2, 3. Running slots: J1, J2 (both started at 0: by job id); J2 is not
    # preemptible, so only slot 0 may be preempted
    assert env.view.time_s == 10 and [j.job_id for j in env.visible_jobs] == [3]
    assert [r.job.job_id for r in env.running_jobs] == [1, 2]
    assert env.action_masks().tolist() == [True, False, False, False, True, False, False, True]
    env.step(0)
    # t=20: J4 arrives; nothing is free, yet the agent is asked: J3 (started last) and J1 may be preempted
    assert env.view.time_s == 20 and [j.job_id for j in env.visible_jobs] == [4]
    assert [r.job.job_id for r in env.running_jobs] == [3, 1, 2]
    assert env.action_masks().tolist() == [False, False, False, False, True, True, False, True]
    assert tuple(env.view.running[3].gpus) == (2, 3) and env.view.free_gpus == 0
    obs, reward, terminated, _, info = env.step(PREEMPT_0)
    # still t=20: J3 is back in the queue at its place (submit 10, before J4), GPUs 2, 3 are free again and it fits
    assert "refused" not in info and not terminated and info["time_s"] == 20
    assert reward == 0.0  # no time passed
    assert [j.job_id for j in env.visible_jobs] == [3, 4] and 3 not in env.view.running
    assert env.view.gpu_whole_free.tolist() == [False, False, True, True, False, False, False, False]
    assert env.view.history[3].preemptions == 1
    assert [r.job.job_id for r in env.running_jobs] == [1, 2]
    assert env.action_masks().tolist() == [True, False, False, False, True, False, False, True]
    np.testing.assert_array_equal(obs["jobs"][:2, 0], [1, 1])
    np.testing.assert_array_equal(obs["jobs"][:2, 11], [1, 0])  # fits_now: J3 yes, J4 no
    # the running rows, worked out: J1 (2 GPUs, 20 s in, checkpoint every 300 s), J2 (4 GPUs, no checkpoint)
    log8, log_wait, log_service = math.log1p(8), math.log1p(86400.0), math.log1p(64 * 7 * 86400.0)
    expected = [
        [1, math.log1p(2) / log8, math.log1p(20) / log_wait, math.log1p(2 * 20) / log_service, 20 / 300, 0, 1],
        [1, math.log1p(4) / log8, math.log1p(20) / log_wait, math.log1p(4 * 20) / log_service, 1, 0, 0],
        [0] * len(RUNNING_FEATURES),
    ]
    np.testing.assert_allclose(obs["running"], np.array(expected, dtype=np.float32), rtol=1e-6)
    # the rest of the episode: J3 restarts at 20 on GPUs 2, 3 (60 s overhead + all 800 s again: ends 880)
    terminated = False
    while not terminated:
        _, _, terminated, _, info = env.step(start_first_then_wait(env))
    records = {r.job.job_id: r for r in env._sim.log().records}
    assert (records[3].start_time_s, records[3].finish_time_s, records[3].gpus) == (10, 880, (2, 3))
    assert info["episode_metrics"]["preemptions"] == 1


def test_the_mask_forbids_preempting_a_job_that_is_not_preemptible(monkeypatch):
    env = hand_env(monkeypatch, JOBS)
    env.reset(seed=0)
    for _ in range(3):  # to t=20, as above: running slots J3, J1, J2
        env.step(0)
    assert env.running_jobs[2].job.job_id == 2 and not env.running_jobs[2].job.preemptible
    assert not env.action_masks()[PREEMPT_2]
    before = {k: v.copy() for k, v in env._get_obs().items()}
    obs, reward, terminated, _, info = env.step(PREEMPT_2)
    assert "not preemptible" in info["refused"] and reward == 0.0 and not terminated
    assert 2 in env.view.running and env.view.time_s == 20
    for key in obs:
        np.testing.assert_array_equal(obs[key], before[key])


def test_a_point_where_only_preemptions_are_legal_is_skipped_without_preemption(monkeypatch):
    env = hand_env(monkeypatch, JOBS, preemption=False)
    env.reset(seed=0)
    for _ in range(3):
        env.step(0)
    # without preemption t=20 is no choice (J4 fits nowhere): the next decision point is J1's end at 1000
    assert env.view.time_s == 1000 and env.action_space.n == 4 + 1 and env.running_jobs == ()


def test_an_empty_running_slot_is_refused(monkeypatch):
    env = hand_env(monkeypatch, JOBS)
    env.reset(seed=0)  # t=0, nothing runs
    _, _, _, _, info = env.step(PREEMPT_1)
    assert "running slot 1 holds no job" in info["refused"]


def test_health_is_the_share_of_failed_gpus_per_group(monkeypatch, tmp_path: Path):
    scenario = tmp_path / "node1.yaml"
    scenario.write_text("failures:\n  schedule:\n    - {node: 1, fail_s: 5, repair_s: 1000}\n"
                        "    - {node: 0, gpu: 3, fail_s: 5, repair_s: 2000}\n")
    env = hand_env(monkeypatch, JOBS, scenario=str(scenario))
    assert env.observation_space["cluster"].shape == (2, len(GROUP_FEATURES) + 1)
    obs, _ = env.reset(seed=0)
    np.testing.assert_array_equal(obs["cluster"][:, -1], [0, 0])
    env.step(0)
    obs, *_ = env.step(0)  # J1 on node 0, J2 on node 1; at 5 node 1 and GPU 3 fail: J2 is requeued
    # t=5: J2 fits nowhere, but J1 may be preempted, so the agent is asked
    assert env.view.time_s == 5 and env.view.down_gpus == 5
    assert [j.job_id for j in env.visible_jobs] == [2] and env.view.history[2].failures == 1
    np.testing.assert_array_equal(obs["cluster"][:, -1], [0.25, 1.0])  # groups: a100 (node 0), v100 (node 1)
    np.testing.assert_array_equal(obs["cluster"][:, 0], [0.25, 0.0])  # GPU 2 is all that is free
    assert env.action_masks().tolist() == [False, False, False, False, True, False, False, True]


@pytest.mark.parametrize(("scenario", "has_health"), [("none", False), ("outages", False), ("low", True),
                                                      ("high", True), ("flaky", True)])
@pytest.mark.parametrize("env_id", ["gpusched/GPUCluster-v0", PREEMPTIVE])
def test_health_appears_only_when_the_scenario_has_failures(env_id, scenario, has_health):
    env = gym.make(env_id, scenario=scenario, episode_jobs=24)
    groups = env.unwrapped._encoder.n_groups
    assert env.observation_space["cluster"].shape == (groups, len(GROUP_FEATURES) + has_health)
    obs, _ = env.reset(seed=0)
    assert obs["cluster"].shape == (groups, len(GROUP_FEATURES) + has_health)


def test_the_default_variants_observation_is_unchanged():
    env = gym.make("gpusched/GPUCluster-v0")
    shapes = {key: box.shape for key, box in env.observation_space.spaces.items()}
    assert shapes == {"jobs": (16, 12), "placements": (16, 3, 6), "cluster": (env.unwrapped._encoder.n_groups, 6),
                      "global": (6,)}


def rollout(env: gym.Env, seed: int) -> tuple[list, tuple]:
    """Observations and rewards of a seeded random masked episode, and its failure totals."""
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    steps, terminated = [obs], False
    while not terminated:
        obs, reward, terminated, truncated, _ = env.step(int(rng.choice(np.flatnonzero(env.unwrapped.action_masks()))))
        assert not truncated
        steps.append((obs, reward))
    log = env.unwrapped._sim.log()
    return steps, (log.down_gpu_s, sum(r.interruptions.failures for r in log.records if r.interruptions))


def test_reset_with_a_seed_replays_the_same_failures():
    env = gym.make(PREEMPTIVE, cluster="tiny", workload="small", episode_jobs=32, slots=4, scenario="high")
    first, failures = rollout(env, seed=0)
    again, failures_again = rollout(env, seed=0)
    assert failures == failures_again and failures[0] > 0  # GPUs did fail in this episode
    assert len(first) == len(again)
    for a, b in zip(first[1:], again[1:], strict=True):
        assert a[1] == b[1]
        for key in a[0]:
            np.testing.assert_array_equal(a[0][key], b[0][key])
    seed_0 = env.unwrapped.dynamics.seed
    env.reset(seed=1)
    assert env.unwrapped.dynamics.seed != seed_0  # each episode draws its own failures


def test_random_masked_episodes_end_with_preemption_and_frequent_failures():
    env = gym.make(PREEMPTIVE, cluster="tiny", workload="small", episode_jobs=32, slots=4, scenario="high")
    rng = np.random.default_rng(2)
    preemptions = failures = 0
    for _ in range(8):
        masked_random_episode(env, rng)  # asserts a non-empty mask, no refusal and no truncation at every step
        sim = env.unwrapped._sim
        log = sim.log()
        assert sim.done and len(log.records) == 32
        preemptions += sum(r.interruptions.preemptions for r in log.records if r.interruptions)
        failures += sum(r.interruptions.failures for r in log.records if r.interruptions)
    assert preemptions > 0 and failures > 0


def test_reward_terms_telescope_with_requeued_jobs():
    env = gym.make(PREEMPTIVE, cluster="tiny", workload="small", episode_jobs=32, slots=4, scenario="high")
    totals, _ = masked_random_episode(env, np.random.default_rng(9))
    log = env.unwrapped._sim.log()
    assert any(r.interruptions for r in log.records)
    ran = log.ran()
    scale = env.unwrapped.config.wait_scale_s
    pending_s = sum(r.finish_time_s - r.job.submit_time_s - r.run_s for r in ran)  # waits after requeues too
    assert totals["wait"] == pytest.approx(-pending_s / scale, rel=1e-6)
    held_gpu_s = sum(r.job.gpu_share * r.run_s for r in ran)
    assert totals["utilization"] == pytest.approx(held_gpu_s / (log.total_gpus * scale), rel=1e-6)


@pytest.mark.parametrize("cluster", ["tiny", "hetero-64"])
def test_gymnasium_check_env_on_the_preemptive_variant_with_flaky_dynamics(cluster):
    env = gym.make(PREEMPTIVE, cluster=cluster, workload="small", episode_jobs=24, scenario="flaky")
    check_env(env.unwrapped, skip_render_check=True)


def test_a_bad_scenario_is_an_error_naming_env_scenario(tmp_path: Path):
    with pytest.raises(ConfigError, match=r"env\.scenario: scenario 'nope': no such scenario"):
        gym.make("gpusched/GPUCluster-Tiny-v0", scenario="nope")
    bad = tmp_path / "bad.yaml"
    bad.write_text("failures:\n  mttr_s: -1\n")
    with pytest.raises(ConfigError, match=r"env\.scenario: .*mttr_s"):
        gym.make("gpusched/GPUCluster-Tiny-v0", scenario=str(bad))
    off_cluster = tmp_path / "node9.yaml"
    off_cluster.write_text("failures:\n  schedule:\n    - {node: 9, fail_s: 5, repair_s: 10}\n")
    with pytest.raises(ConfigError, match=r"env\.scenario: .*node: 9 is not a node of tiny"):
        gym.make("gpusched/GPUCluster-Tiny-v0", scenario=str(off_cluster))
    for key, value in (("running_slots", 0), ("preemption", "yes")):
        with pytest.raises(ConfigError, match=rf"env\.{key}"):
            gym.make(PREEMPTIVE, **{key: value})
