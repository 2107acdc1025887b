"""The env's semantics: masks agree with the simulator, rewards telescope, slot features carry no hidden order."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import envs  # noqa: F401  (registers the ids)
from envs.core import ActionRefused
from envs.placement.feasibility import usable_gpu_mask, usable_gpus_per_node


def masked_random_episode(env: gym.Env, rng: np.random.Generator, check_masks: bool = False) -> tuple[dict, int]:
    """Run one episode of a random masked policy; returns the summed reward terms and the step count."""
    env.reset(seed=int(rng.integers(2**31)))
    totals = {"wait": 0.0, "utilization": 0.0}
    steps = 0
    while True:
        mask = env.unwrapped.action_masks()
        assert mask.any(), "no legal action: the episode would stall"
        if check_masks:
            check_mask_against_simulator(env.unwrapped, mask)
        _, _, terminated, truncated, info = env.step(int(rng.choice(np.flatnonzero(mask))))
        assert "refused" not in info
        for name, value in info["reward_terms"].items():
            totals[name] += value
        steps += 1
        assert not truncated
        if terminated:
            return totals, steps


def check_mask_against_simulator(env, mask: np.ndarray) -> None:
    """Every unmasked Start is accepted by the simulator; every masked one could not start at all. Every unmasked
    Preempt is accepted by the simulator, every masked one refused (or its running slot is empty)."""
    sim, p, config = env._sim, len(env.config.placement_rules), env.config
    for r in range(config.n_preempts):
        running = env._running[r] if r < len(env._running) else None
        if mask[config.n_starts + r]:
            sim.check_preempt(running.job.job_id)  # raises if refused
        elif running is not None:
            with pytest.raises(ActionRefused):
                sim.check_preempt(running.job.job_id)
    for action in range(config.n_starts):
        slot, rule = divmod(action, p)
        if mask[action] and env._plans[slot][rule] is not None:
            job = env._slot_jobs[slot]
            sim.check_start(job.job_id, env._plans[slot][rule])  # raises if refused
        elif mask[action]:  # backfill-assisted: a job that does not fit now may be reserved
            assert env.config.backfill_assist and slot < len(env._slot_jobs)
        elif slot < len(env._slot_jobs):
            job = env._slot_jobs[slot]
            if not sim.view.admits(job):  # a quota refuses it now
                continue
            if job.is_fractional:
                assert not usable_gpu_mask(sim.view, job).any()
            else:
                assert usable_gpus_per_node(sim.view, job).sum() < job.n_gpus
    assert mask[-1] == (sim.events_left and not (config.work_conserving and mask[:config.n_starts].any()))


@pytest.mark.parametrize(("env_id", "kwargs"), [
    ("gpusched/GPUCluster-Tiny-v0", {}), ("gpusched/GPUCluster-v0", {}),
    ("gpusched/GPUCluster-BackfillAssisted-v0", {}), ("gpusched/GPUCluster-v0", {"work_conserving": True}),
    ("gpusched/GPUCluster-Preemptive-v0", {"scenario": "high", "work_conserving": True}),
    ("gpusched/GPUCluster-Preemptive-v0", {"cluster": "tiny", "workload": "small", "scenario": "flaky"}),
    ("gpusched/GPUCluster-v0", {"cluster": "tiny-governed", "workload": "small"}),
    ("gpusched/GPUCluster-v0", {"cluster": "mig-a100", "workload": "mig"})])
def test_masks_agree_with_the_simulator_on_random_states(env_id, kwargs):
    env = gym.make(env_id, episode_jobs=40, **kwargs)
    rng = np.random.default_rng(0)
    for _ in range(3):
        masked_random_episode(env, rng, check_masks=True)


def test_masked_actions_change_nothing_and_say_why():
    env = gym.make("gpusched/GPUCluster-Tiny-v0")
    obs, _ = env.reset(seed=1)
    masked = np.flatnonzero(~env.unwrapped.action_masks())
    assert masked.size
    before = env.unwrapped._sim.time_s
    obs2, reward, terminated, _, info = env.step(int(masked[0]))
    assert "refused" in info and reward == 0.0 and not terminated
    assert env.unwrapped._sim.time_s == before
    for key in obs:
        np.testing.assert_array_equal(obs[key], obs2[key])


def test_random_masked_policy_runs_200_tiny_episodes_without_error_or_stall():
    env = gym.make("gpusched/GPUCluster-Tiny-v0")
    rng = np.random.default_rng(123)
    ended = 0
    for _ in range(200):
        masked_random_episode(env, rng)
        ended += env.unwrapped._sim.done
    assert ended == 200


@pytest.mark.parametrize("env_id", ["gpusched/GPUCluster-Tiny-v0", "gpusched/GPUCluster-v0"])
def test_dense_reward_terms_telescope_to_the_episode_totals(env_id):
    env = gym.make(env_id, episode_jobs=64)
    totals, _ = masked_random_episode(env, np.random.default_rng(5))
    log = env.unwrapped._sim.log()
    scale = env.unwrapped.config.wait_scale_s
    total_wait_s = sum(r.wait_s for r in log.completed())
    assert total_wait_s > 0
    assert totals["wait"] == pytest.approx(-total_wait_s / scale, rel=1e-6)
    held_gpu_s = sum(r.job.gpu_share * r.run_s for r in log.completed())
    assert totals["utilization"] == pytest.approx(held_gpu_s / (log.total_gpus * scale), rel=1e-6)


def test_permuting_visible_jobs_permutes_their_rows():
    env = gym.make("gpusched/GPUCluster-v0", episode_jobs=200).unwrapped
    env.reset(seed=2)
    rng = np.random.default_rng(0)
    while len(env._slot_jobs) < 6:  # wait until several jobs are visible
        env.step(env.config.n_actions - 1 if env.action_masks()[-1] else int(np.flatnonzero(env.action_masks())[0]))
    sim, encoder = env._sim, env._encoder
    jobs, plans = env._slot_jobs, env._plans
    perm = rng.permutation(len(jobs))
    base = encoder.encode(sim.view, jobs, plans)
    permuted = encoder.encode(sim.view, [jobs[i] for i in perm], [plans[i] for i in perm])
    n = len(jobs)
    np.testing.assert_array_equal(permuted["jobs"][:n], base["jobs"][:n][perm])
    np.testing.assert_array_equal(permuted["placements"][:n], base["placements"][:n][perm])
    np.testing.assert_array_equal(permuted["cluster"], base["cluster"])
    np.testing.assert_array_equal(permuted["global"], base["global"])


def test_observations_stay_in_bounds_over_an_episode():
    env = gym.make("gpusched/GPUCluster-v0", episode_jobs=64)
    obs, _ = env.reset(seed=4)
    rng = np.random.default_rng(4)
    for _ in range(300):
        assert env.observation_space.contains(obs)
        obs, _, terminated, _, _ = env.step(int(rng.choice(np.flatnonzero(env.unwrapped.action_masks()))))
        if terminated:
            break


def test_refused_start_through_the_simulator_is_typed():
    env = gym.make("gpusched/GPUCluster-Tiny-v0").unwrapped
    env.reset(seed=0)
    with pytest.raises(ActionRefused):
        env._sim.check_start(-5, [0])


SWF_LINES = [  # job, submit, wait, run, procs, ..., requested time -1 (= run): exact estimates
    "1 0 -1 100 6 -1 -1 -1 -1 -1 1 1 1 -1 1 -1 -1 -1",
    "2 1 -1 100 8 -1 -1 -1 -1 -1 1 1 1 -1 1 -1 -1 -1",
    "3 2 -1 90 2 -1 -1 -1 -1 -1 1 1 1 -1 1 -1 -1 -1",
    "4 3 -1 200 2 -1 -1 -1 -1 -1 1 1 1 -1 1 -1 -1 -1",
]


@pytest.mark.parametrize(("slot_choice", "expected"), [
    # Always slot 0: at t=2 the agent picks J2 (8 procs, does not fit): J2 is reserved at 100 and EASY backfills
    # J3 (ends 92 <= 100). At 92 it picks J2 again: J4 would hold 2 procs past 100, when J2 needs all 8: refused.
    # J2 runs 100-200, J4 200-400.
    ("first", {1: 0, 2: 100, 3: 2, 4: 200}),
    # Always the last visible slot: J3 at 2, then J4 at 92 (started directly), so J2 waits until J4 ends at 292.
    ("last", {1: 0, 2: 292, 3: 2, 4: 92}),
])
def test_backfill_assisted_variant_reserves_the_chosen_job(tmp_path, slot_choice, expected):
    trace = tmp_path / "four.swf"
    trace.write_text("; MaxProcs: 8\n" + "\n".join(SWF_LINES) + "\n")
    env = gym.make("gpusched/SWF-v0", workload=f"swf:{trace}", episode_jobs=4, slots=4, backfill_assist=True)
    env.reset(seed=0)
    terminated = False
    while not terminated:
        mask = env.unwrapped.action_masks()
        starts = np.flatnonzero(mask[:-1])
        action = int(starts[0] if slot_choice == "first" else starts[-1]) if starts.size else len(mask) - 1
        _, _, terminated, _, _ = env.step(action)
    log = env.unwrapped._sim.log()
    assert {r.job.job_id: r.start_time_s for r in log.completed()} == expected
