"""The heuristic-selection env (agents/selection_env.py), the planner features (envs/gymenv/planner_features.py)
and aliased placements masked in the fine env (EnvConfig.mask_aliases)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import agents  # noqa: F401  (registers gpusched/HeuristicSelect-v0)
from agents.selection import Selection, alias_of
from agents.selection_env import SELECT_ENV_ID, HeuristicSelectionEnv
from baselines import make
from envs.core import ConfigError, Job, RuntimeConfig
from envs.core.presets import cluster_from_dict
from envs.gymenv.actions import action_mask
from envs.gymenv.config import EnvConfig
from envs.gymenv.planner_features import breaks_nodes, gang_values, horizon_columns
from envs.sim import Simulator, Start, Wait, simulate

CANDIDATES = ("sjf+greedy/topology", "saf+easy/pack", "fcfs+greedy/pack")
WORLD = {"workload": "whole-gpu", "cluster": "hetero-64", "episode_jobs": 400, "load_factor": 1.5}


@pytest.mark.parametrize("commit_s", [0.0, 1800.0])
@pytest.mark.parametrize("k", range(len(CANDIDATES)))
def test_a_constant_choice_replays_that_heuristic_exactly(k, commit_s):
    env = HeuristicSelectionEnv(candidates=CANDIDATES, commit_s=commit_s, **WORLD)
    env.reset(seed=11)
    total, terminated, steps = 0.0, False, 0
    while not terminated:
        assert env.observation_space.contains(env.observe())
        _, reward, terminated, _, info = env.step(k)
        total += reward
        steps += 1
    log = env.sim.log()
    expected = simulate(env.cluster, env.workload, make(CANDIDATES[k]), RuntimeConfig())
    assert log.records == expected.records  # the same job log, job by job (starts, ends, GPUs)
    assert steps == info["contested"] > 0
    waited = sum(r.wait_s for r in expected.records)
    assert total == pytest.approx(-waited / env.config.wait_scale_s, rel=1e-9)


def test_contested_decisions_only_and_commitment_asks_less():
    asked = {}
    for commit_s in (0.0, 3600.0):
        env = HeuristicSelectionEnv(candidates=CANDIDATES, commit_s=commit_s, **WORLD)
        env.reset(seed=3)
        terminated = False
        while not terminated:
            proposals = env.proposals
            assert len({(type(p), getattr(p, "job_id", None)) for p in proposals}) >= 1
            assert not all(alias == 0 for alias in alias_of(proposals))  # candidates disagree where asked
            _, _, terminated, _, info = env.step(1)
        asked[commit_s] = info["contested"]
    assert 0 < asked[3600.0] < asked[0.0]


def test_masks_offer_the_first_of_each_alias_and_an_alias_does_the_same():
    start_a = Start(5, np.array([0, 1]))
    proposals = [start_a, Start(5, (0, 1)), Start(6, (0, 1)), Wait(), Wait()]
    assert alias_of(proposals) == [0, 0, 2, 3, 3]
    env = HeuristicSelectionEnv(candidates=CANDIDATES, **WORLD)
    env.reset(seed=5)
    for _ in range(30):
        mask = env.action_masks()
        aliases = alias_of(env.proposals)
        assert mask.tolist() == [a == i for i, a in enumerate(aliases)]
        masked = [i for i in range(len(mask)) if not mask[i]]
        if masked:  # an alias is accepted and does what its unmasked twin does
            twin = aliases[masked[0]]
            fork_a, fork_b = env.sim.fork(None), env.sim.fork(None)
            from envs.sim.loop import apply_action
            apply_action(fork_a, env.proposals[masked[0]])
            apply_action(fork_b, env.proposals[twin])
            assert fork_a.view.time_s == fork_b.view.time_s and dict(fork_a.view.running).keys() == \
                dict(fork_b.view.running).keys()
        env.step(0)


def test_registered_id_and_bad_arguments():
    env = gym.make(SELECT_ENV_ID, candidates=list(CANDIDATES), **WORLD)
    obs, _ = env.reset(seed=0)
    assert obs["candidates"].shape == (3, env.unwrapped._encoder.space["candidates"].shape[1])
    with pytest.raises(ConfigError, match="at least 2"):
        Selection(["sjf"], make)
    with pytest.raises(ConfigError, match="each heuristic once"):
        Selection(["sjf", "sjf"], make)
    with pytest.raises(ConfigError, match="commit_s"):
        Selection(["sjf", "saf"], make, commit_s=-1)
    with pytest.raises(ConfigError, match="the string"):
        HeuristicSelectionEnv(candidates="sjf", **WORLD)


# ---- planner features on a hand-computed world -----------------------------------------------------------------
@pytest.fixture(scope="module")
def two_nodes():
    """Two 4-GPU nodes in one group (same type, size, rack)."""
    return cluster_from_dict({"name": "two", "node_groups": [
        {"name": "a", "count": 2, "gpu_type": "A100-40GB", "gpus": 4, "island_size": 4, "cpus": 32,
         "ram_gib": 256, "rack": 0, "cache_gib": 0}]})


def _job(job_id: int, n_gpus: int, submit_s: float, request_s: float) -> Job:
    return Job(job_id=job_id, submit_time_s=submit_s, runtime_s=request_s, runtime_estimate_s=request_s,
               n_gpus=n_gpus)


def test_planner_features_by_hand(two_nodes):
    # t=0: job 0 (2 GPUs, request 600 s) on node 0 and job 1 (4 GPUs, request 7,200 s) on node 1;
    # job 2 (8 GPUs) and job 3 (1 GPU) wait from t=0 and t=100; we look at t=100.
    jobs = [_job(0, 2, 0.0, 600.0), _job(1, 4, 0.0, 7200.0), _job(2, 8, 0.0, 100.0), _job(3, 1, 100.0, 50.0)]
    sim = Simulator(two_nodes, jobs, RuntimeConfig.rigid())
    sim.start(0, [0, 1])
    sim.start(1, [4, 5, 6, 7])
    sim.wait(100.0)
    view = sim.view
    assert view.time_s == 100.0 and set(view.pending) == {2, 3}
    cols = horizon_columns(view, np.zeros(2, dtype=int), 1)[0]
    # free now: 2 of 8 GPUs; job 0 ends at 600 (within 15 min): +2; job 1 at 7,200 (within 4 h): +4
    assert cols.tolist() == pytest.approx([4 / 8, 4 / 8, 8 / 8, 1 / 2])  # node 0 is partly free
    gangs = gang_values(view, max_queue_obs=10, max_wait_obs_s=86400.0)
    expected = np.zeros(10)
    expected[0], expected[1] = 0.1, 0.0  # one 1-GPU job, just arrived (age 0)
    expected[6], expected[7] = 0.1, np.log1p(100.0) / np.log1p(86400.0)  # one 5-8 GPU job, 100 s old
    assert gangs == pytest.approx(expected.astype(np.float32))
    # starting job 3 on GPU 2 (node 0, already partly used) breaks no whole node
    assert breaks_nodes(view, two_nodes, np.array([2]), False) == 0.0


def test_breaks_nodes_counts_whole_free_nodes_left_partly_free(two_nodes):
    sim = Simulator(two_nodes, [_job(0, 1, 0.0, 10.0)], RuntimeConfig.rigid())
    view = sim.view
    assert breaks_nodes(view, two_nodes, np.array([0]), False) == 1.0
    assert breaks_nodes(view, two_nodes, np.array([0, 1, 2, 3]), False) == 0.0  # fills node 0
    assert breaks_nodes(view, two_nodes, np.array([0, 1, 2, 3, 4]), False) == 0.5  # fills one, breaks one
    assert breaks_nodes(view, two_nodes, np.array([0, 1, 2, 3]), True) == 1.0  # a fractional job never fills


def test_planner_features_extend_the_fine_env_in_bounds():
    env = gym.make("gpusched/GPUCluster-v0", planner_features=True, episode_jobs=200, work_conserving=True)
    plain = gym.make("gpusched/GPUCluster-v0", episode_jobs=200, work_conserving=True)
    obs, _ = env.reset(seed=1)
    base, _ = plain.reset(seed=1)
    assert obs["cluster"].shape[1] == base["cluster"].shape[1] + 4
    assert obs["global"].shape[0] == base["global"].shape[0] + 10
    assert obs["placements"].shape[2] == base["placements"].shape[2] + 1
    for _ in range(150):
        assert env.observation_space.contains(obs)
        np.testing.assert_array_equal(obs["jobs"], base["jobs"])  # the old columns are unchanged
        np.testing.assert_array_equal(obs["cluster"][:, :base["cluster"].shape[1]], base["cluster"])
        action = int(np.flatnonzero(env.unwrapped.action_masks())[0])
        obs, _, done, _, _ = env.step(action)
        base, *_ = plain.step(action)
        if done:
            break


def test_aliased_placements_are_masked():
    config = EnvConfig(slots=2, mask_aliases=True)
    same, other = np.array([0, 1]), np.array([4, 5])
    plans = [[same, np.array([0, 1]), other], [None, None, None]]
    mask = action_mask(config, plans, events_left=True)
    assert mask[:6].tolist() == [True, False, True, False, False, False]  # rule 1 gives rule 0's GPUs
    assert action_mask(config.replace(mask_aliases=False), plans, True)[:6].tolist() == \
        [True, True, True, False, False, False]
    env = gym.make("gpusched/GPUCluster-v0", mask_aliases=True, episode_jobs=200, work_conserving=True)
    env.reset(seed=2)
    seen = 0
    for _ in range(100):
        u = env.unwrapped
        mask = u.action_masks()
        for slot, plan in enumerate(u._plans):
            for rule in range(1, len(plan)):
                if plan[rule] is not None and any(o is not None and np.array_equal(o, plan[rule])
                                                  for o in plan[:rule]):
                    assert not mask[slot * len(plan) + rule]
                    seen += 1
        _, _, done, _, _ = env.step(int(np.flatnonzero(mask)[0]))
        if done:
            break
    assert seen > 0


def test_the_batched_engine_refuses_the_new_settings():
    from envs.vec.pool import check_config

    for key in ("planner_features", "mask_aliases"):
        with pytest.raises(ConfigError, match=f"env.{key}"):
            check_config(EnvConfig(workload="whole-gpu", **{key: True}))
