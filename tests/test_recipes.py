"""The heuristic-selection recipes (agents/rollout_iteration.py, agents/group_ppo.py): time discounting and the
group baseline by hand, the cost-sensitive targets, groups replaying one workload, resuming after a kill, and
trained models run as policies exactly as in the env."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from paths import ROOT

import agents
from agents import group_ppo
from agents.experiment import check_experiment
from agents.group_ppo import GroupPPOSettings, gae_by_time, group_baselines, time_discounted_returns, value_at
from agents.recipes import recipe_settings
from agents.rollout_iteration import RolloutSettings, targets
from agents.rollout_iteration import run as run_rollout
from agents.selection_policy import SelectionModelPolicy, load_model
from agents.selection_training import World, greedy, play
from envs.core import ConfigError
from envs.scenario import scenario
from envs.sim import simulate

TINY = World("small", "tiny", 2.0, ("sjf+greedy", "saf+easy", "fcfs+greedy"), (100000, 100001, 100002), (1000,))
"""200 jobs on two 4-GPU nodes at twice the load: about 140 contested decisions an episode, a quarter second."""
HOUR = 3600.0


def test_time_discounted_returns_by_hand():
    # rewards -1, -2, -3 at 0 h, 1 h, 3 h; half-life 1 h: R2 = -3, R1 = -2 + 0.25 * -3, R0 = -1 + 0.5 * R1
    returns = time_discounted_returns(np.array([-1.0, -2.0, -3.0]), np.array([0.0, HOUR, 3 * HOUR]), HOUR)
    assert returns.tolist() == pytest.approx([-2.375, -2.75, -3.0])
    # the weight depends on the time between decisions, not on their number
    spread = time_discounted_returns(np.array([-1.0, 0.0, 0.0, -1.0]), np.array([0.0, 1.0, 2.0, HOUR]), HOUR)
    assert spread[0] == pytest.approx(-1.5)


def test_group_baseline_by_hand():
    times = [np.array([0.0, HOUR, 3 * HOUR]), np.array([0.0, 2 * HOUR]), np.array([HOUR])]
    returns = [np.array([-2.375, -2.75, -3.0]), np.array([-4.25, -1.0]), np.array([-6.0])]
    # an episode's value at t: its first decision at or after t, discounted back to t; 0 with none left
    assert value_at(times[1], returns[1], HOUR, HOUR) == pytest.approx(-0.5)
    assert value_at(times[0], returns[0], 2 * HOUR, HOUR) == pytest.approx(-1.5)
    assert value_at(times[2], returns[2], 2 * HOUR, HOUR) == 0.0
    base = group_baselines(times, returns, HOUR)
    # episode 0 at 0 h: mean of episode 1's -4.25 and episode 2's -6 * 0.5 (its decision is at 1 h)
    assert base[0].tolist() == pytest.approx([(-4.25 - 3.0) / 2, (-0.5 - 6.0) / 2, (0.0 + 0.0) / 2])
    assert base[1].tolist() == pytest.approx([(-2.375 - 3.0) / 2, (-1.5 + 0.0) / 2])
    assert base[2].tolist() == pytest.approx([(-2.75 - 0.5) / 2])


def test_gae_by_time_by_hand():
    rewards, times, values = np.array([-1.0, -2.0, -3.0]), np.array([0.0, HOUR, 3 * HOUR]), np.array([1.0, 2.0, 3.0])
    # lambda 0: one-step TD errors with the time discounts 0.5 and 0.25 (no value after the last decision)
    assert gae_by_time(rewards, values, times, HOUR, 0.0).tolist() == pytest.approx(
        [-1.0 + 0.5 * 2.0 - 1.0, -2.0 + 0.25 * 3.0 - 2.0, -3.0 - 3.0])
    # lambda 1: the discounted return minus the value
    assert gae_by_time(rewards, values, times, HOUR, 1.0).tolist() == pytest.approx(
        (time_discounted_returns(rewards, times, HOUR) - values).tolist())


def test_cost_sensitive_targets_by_hand():
    costs = torch.tensor([[10.0, 12.0, 10.0], [5.0, 5.0, 9.0]])
    mask = torch.tensor([[True, True, False], [True, True, True]])
    got = targets(costs, mask, tau=1.0)
    # spreads: state 0 std(10, 12) = 1; state 1 std(5, 5, 9) = 1.886; scale = their mean (both have two or more)
    scale = (1.0 + float(torch.tensor([5.0, 5.0, 9.0]).std(unbiased=False))) / 2
    first = torch.softmax(torch.tensor([0.0, -2.0 / scale]), 0)
    assert got[0].tolist() == pytest.approx([*first.tolist(), 0.0])
    second = torch.softmax(torch.tensor([0.0, 0.0, -4.0 / scale]), 0)
    assert got[1].tolist() == pytest.approx(second.tolist())
    # only the reference eligible (no candidate significantly better): all the mass on it, whatever the costs
    alone = targets(torch.tensor([[10.0, 1.0, 1.0]]), torch.tensor([[True, False, False]]), tau=1.0)
    assert alone.tolist() == [[1.0, 0.0, 0.0]]


def test_every_episode_of_a_group_replays_the_same_workload(monkeypatch):
    seen = []
    real_play = group_ppo.play

    def spy(env, workload, choose, at_decision=None):
        seen.append(workload)
        return real_play(env, workload, choose, at_decision)

    monkeypatch.setattr(group_ppo, "play", spy)
    settings = GroupPPOSettings(groups=2, group_size=3)
    env = TINY.env()
    group_ppo.collect(env, group_ppo.new_net(env, 16, 0), TINY, settings, iteration=0, seed=0, value_scale=1.0)
    assert len(seen) == 6
    for g in range(2):
        members = seen[3 * g: 3 * g + 3]
        assert all(m is members[0] for m in members)  # one job table: the same arrivals and runtimes
    assert [j.submit_time_s for j in seen[0].jobs] != [j.submit_time_s for j in seen[3].jobs]


def _state(run_dir: Path) -> dict[str, torch.Tensor]:
    return load_model(run_dir / "model.zip")[0].state_dict()


def _same_model(a: Path, b: Path) -> None:
    sa, sb = _state(a), _state(b)
    assert sa.keys() == sb.keys()
    for key in sa:
        torch.testing.assert_close(sa[key], sb[key], rtol=0, atol=0)


ROLLOUT = RolloutSettings(iterations=2, episodes=1, state_fraction=0.1, futures=2, horizon_s=1800.0, epochs=3,
                          hidden=16)
GROUP = GroupPPOSettings(iterations=3, groups=1, group_size=2, epochs=2, hidden=16, imitation_episodes=1,
                         imitation_epochs=2, validate_every=1, burn_in_max=1)


@pytest.mark.parametrize("recipe", ["rollout", "group_ppo"])
def test_a_stopped_recipe_resumes_to_the_same_model(tmp_path, recipe):
    torch.set_num_threads(1)
    settings, run = (ROLLOUT, run_rollout) if recipe == "rollout" else (GROUP, group_ppo.run)
    quiet = lambda *_: None  # noqa: E731
    run(TINY, settings, tmp_path / "whole", seed=3, log=quiet)
    stopped = type(settings)(**{**settings.__dict__, "iterations": 1})
    run(TINY, stopped, tmp_path / "split", seed=3, log=quiet)
    history = run(TINY, settings, tmp_path / "split", seed=3, log=quiet)["history"]
    assert [row["iteration"] for row in history] == list(range(settings.iterations))
    _same_model(tmp_path / "whole", tmp_path / "split")


KILLED = """
import sys, torch
from pathlib import Path
sys.path.insert(0, {root!r})
sys.path.insert(0, {tests!r})
torch.set_num_threads(1)
from test_recipes import TINY, ROLLOUT
from agents.rollout_iteration import run
import dataclasses
run(TINY, dataclasses.replace(ROLLOUT, iterations=3), Path({out!r}), seed=5, log=lambda *_: None)
"""


def test_a_killed_rollout_run_resumes_to_the_same_model(tmp_path):
    torch.set_num_threads(1)
    settings = RolloutSettings(**{**ROLLOUT.__dict__, "iterations": 3})
    run_rollout(TINY, settings, tmp_path / "whole", seed=5, log=lambda *_: None)
    killed = tmp_path / "killed"
    script = KILLED.format(root=str(ROOT), tests=str(ROOT / "tests"), out=str(killed))
    child = subprocess.Popen([sys.executable, "-c", script], env={**os.environ, "OMP_NUM_THREADS": "1"})
    deadline = time.monotonic() + 120
    while not (killed / "checkpoint.pt").exists() and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert (killed / "checkpoint.pt").exists()
    run_rollout(TINY, settings, killed, seed=5, log=lambda *_: None)
    _same_model(tmp_path / "whole", killed)


def test_a_trained_model_acts_as_in_the_env_and_loads_as_a_policy(tmp_path):
    torch.set_num_threads(1)
    run_rollout(TINY, RolloutSettings(**{**ROLLOUT.__dict__, "iterations": 1}), tmp_path, seed=1, log=lambda *_: None)
    net, meta = load_model(tmp_path / "model.zip")
    assert meta["candidates"] == list(TINY.candidates)
    env = TINY.env()
    world = scenario("small", "tiny", 1000, 2.0)
    steps, _ = play(env, world.workload, greedy(net))
    in_env = env.sim.log()
    run_config = {"env_id": "gpusched/HeuristicSelect-v0", "recipe": "rollout"}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(run_config))
    policy = agents.load(tmp_path / "model.zip")
    assert isinstance(policy, SelectionModelPolicy)
    replayed = simulate(world.cluster, world.workload, policy, world.runtime)
    assert replayed.records == in_env.records
    assert policy.selection.contested == len(steps)
    with pytest.raises(ConfigError, match="not a selection model"):
        (tmp_path / "bad.zip").write_bytes(b"not a model")
        load_model(tmp_path / "bad.zip")


def test_recipe_configs_are_checked():
    for name in ("select_rollout.yaml", "select_group_ppo.yaml"):
        config = yaml.safe_load((ROOT / "configs" / "experiments" / name).read_text())
        check_experiment(config, name)
        recipe_settings(config["recipe"], config[config["recipe"]])
    base = {"env_id": "gpusched/HeuristicSelect-v0", "recipe": "rollout", "world": {"case": "whole-gpu@1.5"}}
    check_experiment(base, "x.yaml")
    with pytest.raises(ConfigError, match=r"x\.yaml: ppo: not used by recipe"):
        check_experiment({**base, "ppo": {}}, "x.yaml")
    with pytest.raises(ConfigError, match=r"world\.candidates"):
        check_experiment({**base, "world": {"case": "whole-gpu@1.5", "candidates": 1}}, "x.yaml")
    with pytest.raises(ConfigError, match="env_id"):
        check_experiment({**base, "env_id": "gpusched/GPUCluster-v0"}, "x.yaml")
    with pytest.raises(ConfigError, match=r"rollout\.futurez: unknown key"):
        recipe_settings("rollout", {"futurez": 3})
    with pytest.raises(ConfigError, match=r"rollout\.futures: must be int"):
        recipe_settings("rollout", {"futures": 2.5})
    assert recipe_settings("group_ppo", {"baseline": "reference", "group_size": 1}).baseline == "reference"
    with pytest.raises(ConfigError, match=r"group_ppo\.baseline"):
        recipe_settings("group_ppo", {"baseline": "mean"})
    with pytest.raises(ConfigError, match="overlap"):
        World("small", "tiny", 1.0, ("sjf", "saf"), (1, 2), (2, 3))


def test_the_reference_baseline_gives_the_reference_no_advantage(monkeypatch):
    def always_reference(net, rng, record):
        def choose(obs, mask):
            record.append((0.0, 0.0))
            return 0
        return choose

    monkeypatch.setattr(group_ppo, "_sampler", always_reference)
    settings = GroupPPOSettings(groups=1, group_size=1, baseline="reference")
    env = TINY.env()
    data = group_ppo.collect(env, group_ppo.new_net(env, 16, 0), TINY, settings, iteration=0, seed=0,
                             value_scale=1.0)
    assert len(data["advantages"]) > 50
    assert data["advantages"].abs().max() == 0.0  # the same decisions at the same times: nothing gained or lost
    assert data["returns"].abs().max() > 0


def test_a_world_keeps_training_away_from_held_out_seeds_and_windows():
    from evaluation.learning import selection_world

    world = selection_world({"case": "whole-gpu@1.5", "candidates": ["sjf", "saf"]})
    assert world.train == tuple(range(100000, 100008)) and world.validation == tuple(range(1000, 1010))
    with pytest.raises(ConfigError, match=r"world\.train_seeds: \[2003\]"):
        selection_world({"case": "whole-gpu@1.5", "candidates": ["sjf", "saf"], "train_seeds": [5, 2003]})
    # a Philly training window may not overlap a validation or test window (2,000 jobs each)
    with pytest.raises(ConfigError, match="overlap"):
        selection_world({"case": "philly", "candidates": ["sjf", "saf"], "train_seeds": [10000, 100001]})
    with pytest.raises(ConfigError, match="unknown 'nope'"):
        selection_world({"case": "nope"})
    with pytest.raises(ConfigError, match=r"world\.candidates: policy 'nope'"):
        selection_world({"case": "whole-gpu@1.5", "candidates": ["sjf", "nope"]})
    with pytest.raises(ConfigError, match=r"rollout\.futures: at most 64"):
        recipe_settings("rollout", {"futures": 10**9})


def test_train_py_runs_a_recipe_and_resumes_it(tmp_path, capsys):
    from train import main

    run = tmp_path / "run"
    sets = ["rollout.iterations=1", "rollout.episodes=1", "rollout.futures=1", "rollout.epochs=1",
            "rollout.state_fraction=0.02", "rollout.horizon_s=900", "world.commit_s=3600"]
    argv = ["--config", str(ROOT / "configs" / "experiments" / "select_rollout.yaml"), "--run-dir", str(run)]
    assert main([*argv, *(x for s in sets for x in ("--set", s))]) == 0
    resolved = yaml.safe_load((run / "config.yaml").read_text())
    assert resolved["world"]["candidates"][0] == "sjf+greedy/topology" and resolved["seed"] == 0
    assert (run / "model.zip").is_file() and (run / "best_model.zip").is_file()
    first = capsys.readouterr().out
    assert "iteration 0:" in first and "x reference" in first
    assert main(["--resume", "--run-dir", str(run)]) == 0  # already at its last iteration: nothing more to train
    assert "iteration 0:" not in capsys.readouterr().out
