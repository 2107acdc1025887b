"""The learned-policy path: the equivariant network, save/load, train.py smoke runs, and models in the harness."""

from __future__ import annotations

import json
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
import torch
from paths import ROOT
from sb3_contrib import MaskablePPO

import envs  # noqa: F401  (registers the ids)
from agents.network import SlotPolicy, SlotScorer
from envs.core import ConfigError
from evaluation.runner import RunSpec, run


def test_logits_permute_with_the_slots():
    env = gym.make("gpusched/GPUCluster-Tiny-v0")
    space = env.observation_space
    scorer = SlotScorer(space, hidden=16)
    torch.manual_seed(0)
    obs = {k: torch.rand(3, *box.shape) for k, box in space.spaces.items()}
    flat = torch.cat([obs[k].flatten(1) for k in space.spaces], dim=1)  # the CombinedExtractor layout
    perm = torch.tensor([2, 0, 3, 1])
    permuted = dict(obs, jobs=obs["jobs"][:, perm], placements=obs["placements"][:, perm])
    flat_p = torch.cat([permuted[k].flatten(1) for k in space.spaces], dim=1)
    k, p = space["placements"].shape[:2]
    logits, logits_p = scorer.forward_actor(flat), scorer.forward_actor(flat_p)
    torch.testing.assert_close(logits_p[:, : k * p].reshape(3, k, p), logits[:, : k * p].reshape(3, k, p)[:, perm])
    torch.testing.assert_close(logits_p[:, -1], logits[:, -1])
    torch.testing.assert_close(scorer.forward_critic(flat_p), scorer.forward_critic(flat))


def test_tiny_training_run_then_save_and_load_give_identical_actions(tmp_path):
    env = gym.make("gpusched/GPUCluster-Tiny-v0")
    model = MaskablePPO(SlotPolicy, env, n_steps=64, batch_size=32, seed=0, device="cpu",
                        policy_kwargs={"hidden": 16})
    model.learn(256)
    model.save(tmp_path / "model.zip")
    loaded = MaskablePPO.load(tmp_path / "model.zip", device="cpu")
    obs, _ = env.reset(seed=5)
    for _ in range(20):
        mask = env.unwrapped.action_masks()
        a, _ = model.predict(obs, action_masks=mask, deterministic=True)
        b, _ = loaded.predict(obs, action_masks=mask, deterministic=True)
        assert int(a) == int(b) and mask[int(a)]
        obs, _, terminated, _, _ = env.step(int(a))
        if terminated:
            obs, _ = env.reset(seed=6)


def test_train_py_smoke_resume_and_model_row_in_the_harness(tmp_path):
    run_dir = tmp_path / "run"
    common = [sys.executable, str(ROOT / "train.py"), "--run-dir", str(run_dir), "--device", "cpu", "--no-eval"]
    subprocess.run([*common, "--total-timesteps", "256"], cwd=ROOT, check=True, capture_output=True)
    assert (run_dir / "model.zip").exists() and (run_dir / "config.yaml").exists()
    assert any((run_dir / "tb").rglob("events.out.tfevents*"))
    subprocess.run([*common, "--total-timesteps", "256", "--resume"], cwd=ROOT, check=True, capture_output=True)
    resumed = MaskablePPO.load(run_dir / "model.zip", device="cpu")
    assert resumed.num_timesteps >= 512  # the step count continued
    row, trace, _ = run(RunSpec(str(run_dir / "model.zip"), "small", "hetero-64", seed=3))  # its training cluster
    assert row["policy"].endswith("model.zip") and row["n_completed"] == row["n_jobs"] == len(trace["wait_s"])


def test_cuda_is_used_when_present_and_never_required():
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = MaskablePPO(SlotPolicy, gym.make("gpusched/GPUCluster-Tiny-v0"), n_steps=32, batch_size=32,
                        device="auto", policy_kwargs={"hidden": 8})
    assert model.device.type == device
    if device == "cpu":
        pytest.skip("no CUDA device here: the CPU path is what ran")
    assert np.isfinite(next(model.policy.parameters()).detach().cpu().numpy()).all()


def test_training_logs_eval_scalars_beside_the_heuristic_and_checkpoints(tmp_path):
    config = tmp_path / "exp.yaml"
    config.write_text(
        "env_id: gpusched/GPUCluster-Tiny-v0\nenv: {}\ntotal_timesteps: 256\nn_envs: 1\n"
        "ppo: {n_steps: 128, batch_size: 64, hidden: 16}\n"
        "train: {eval_every_steps: 128, eval_seeds: [5], checkpoint_every_steps: 128}\n"
    )
    run_dir = tmp_path / "run"
    subprocess.run([sys.executable, str(ROOT / "train.py"), "--config", str(config), "--run-dir", str(run_dir),
                    "--device", "cpu", "--no-eval"], cwd=ROOT, check=True, capture_output=True)
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(next((run_dir / "tb").rglob("events.out.tfevents*")).parent))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    assert {"eval/mean_wait_s", "eval/heuristic_mean_wait_s", "eval/utilization"} <= tags
    # the starting model is validated too, so best_model.zip can be the warm start itself
    assert [e.step for e in events.Scalars("eval/mean_wait_s")] == [0, 128, 256]
    assert (run_dir / "best_model.zip").exists()
    assert sorted(p.name for p in (run_dir / "checkpoints").glob("*.zip")) == ["model_128_steps.zip",
                                                                               "model_256_steps.zip"]
    # the best score is stored; a resumed run replaces best_model.zip only with a better model: here none can be
    record = json.loads((run_dir / "best_model.json").read_text())
    assert record["metric"] == "mean_wait_s" and record["step"] in (0, 128, 256)
    assert record["value"] == pytest.approx(min(e.value for e in events.Scalars("eval/mean_wait_s")))
    (run_dir / "best_model.json").write_text(json.dumps({**record, "value": -1.0}))  # waits are never negative
    best = (run_dir / "best_model.zip").read_bytes()
    subprocess.run([sys.executable, str(ROOT / "train.py"), "--run-dir", str(run_dir), "--resume", "--device", "cpu",
                    "--no-eval", "--total-timesteps", "128"], cwd=ROOT, check=True, capture_output=True)
    assert (run_dir / "best_model.zip").read_bytes() == best
    assert json.loads((run_dir / "best_model.json").read_text())["value"] == -1.0
    # a checkpoint runs as a policy with its run's config (SB3 saves it while collecting, before that rollout's
    # update, so it is not the final model)
    from agents.model_file import run_config

    checkpoint = run_dir / "checkpoints" / "model_256_steps.zip"
    assert run_config(checkpoint) == run_config(run_dir / "model.zip")
    row, _, _ = run(RunSpec(str(checkpoint), "small", "tiny", seed=3))
    assert row["n_completed"] == row["n_jobs"] > 0


def test_learning_rate_decays_linearly_to_learning_rate_end():
    from agents.ppo import new_model

    env = gym.make("gpusched/GPUCluster-Tiny-v0")
    model = new_model({"learning_rate": 1e-3, "learning_rate_end": 1e-4, "n_steps": 32, "batch_size": 32,
                       "hidden": 8}, env, "cpu", 0, None)
    assert [model.lr_schedule(p) for p in (1.0, 0.5, 0.0)] == pytest.approx([1e-3, 5.5e-4, 1e-4])


def test_imitation_warm_start_fits_the_teacher_on_unseen_episodes():
    from agents.imitation import HeuristicTeacher, pretrain

    smallest_area_first = HeuristicTeacher("saf+greedy/pack")

    env = gym.make("gpusched/GPUCluster-Tiny-v0", work_conserving=True, episode_jobs=64)
    # a fine-tuning rate for PPO: imitation uses its own (a clone at 1e-6 would stay near uniform)
    model = MaskablePPO(SlotPolicy, env, n_steps=64, batch_size=32, seed=0, device="cpu", learning_rate=1e-6,
                        policy_kwargs={"hidden": 32})
    stats = pretrain(model, env, smallest_area_first, list(range(20)), epochs=30, batch_size=64)
    assert stats["decisions"] > 500 and stats["agreement"] > 0.9
    same = total = 0
    for seed in (500, 501):  # episodes it was not fitted on
        obs, _ = env.reset(seed=seed)
        terminated = False
        while not terminated:
            teacher = smallest_area_first(env.unwrapped)
            assert env.unwrapped.action_masks()[teacher]
            action, _ = model.predict(obs, action_masks=env.unwrapped.action_masks(), deterministic=True)
            same, total = same + (int(action) == teacher), total + 1
            obs, _, terminated, _, _ = env.step(teacher)
    assert same / total > 0.8


def test_contested_decisions_are_choices_between_jobs():
    from agents.imitation import contested_decisions

    # two slots x two rules, then Wait
    masks = np.array([[1, 1, 0, 0, 0],   # one job, two rules: a placement choice only
                      [1, 0, 0, 1, 0],   # two jobs
                      [0, 1, 0, 0, 1],   # one job or Wait
                      [0, 0, 0, 0, 1]], dtype=bool)  # Wait alone
    assert contested_decisions(masks, n_starts=4, rules=2).tolist() == [False, True, True, False]


def test_imitation_reports_agreement_per_decision_type():
    from agents.imitation import HeuristicTeacher, pretrain

    env = gym.make("gpusched/GPUCluster-Tiny-v0", work_conserving=True, episode_jobs=64)
    model = MaskablePPO(SlotPolicy, env, n_steps=64, batch_size=32, seed=0, device="cpu",
                        policy_kwargs={"hidden": 16})
    stats = pretrain(model, env, HeuristicTeacher("saf+greedy/pack"), list(range(4)), epochs=5, batch_size=64)
    share = stats["contested_share"]
    assert 0 < share < 1
    mixed = share * stats["agreement_contested"] + (1 - share) * stats["agreement_uncontested"]
    assert stats["agreement"] == pytest.approx(mixed)
    assert stats["agreement_uncontested"] == 1.0  # one legal job: every start of it is the teacher's job


def test_dagger_episodes_follow_the_actor_and_carry_the_teachers_labels():
    from agents.imitation import HeuristicTeacher, demonstrations, pretrain

    teacher = HeuristicTeacher("saf+greedy/pack")
    env = gym.make("gpusched/GPUCluster-Tiny-v0", work_conserving=True, episode_jobs=64)

    def last_legal(obs, mask):  # an actor that rarely agrees with smallest-area-first
        return int(np.flatnonzero(mask)[-1])

    obs, masks, actions, returns = demonstrations(env, teacher, [7], 1.0, actor=last_legal)
    state, _ = env.reset(seed=7)  # replay the actor alone: the same states, in the same order
    teacher.reset()
    rewards = []
    for i in range(len(actions)):
        assert all(np.array_equal(state[k], obs[k][i]) for k in state)
        assert actions[i] == teacher(env.unwrapped) and masks[i][actions[i]]  # labelled by the teacher
        state, reward, terminated, _, _ = env.step(last_legal(state, env.unwrapped.action_masks()))
        rewards.append(reward)
    assert terminated and returns[0] == pytest.approx(sum(rewards))  # the actor's return, undiscounted here
    assert (actions != [last_legal(None, m) for m in masks]).any()

    model = MaskablePPO(SlotPolicy, env, n_steps=64, batch_size=32, seed=0, device="cpu",
                        policy_kwargs={"hidden": 32})
    stats = pretrain(model, env, teacher, list(range(10)), epochs=20, batch_size=64,
                     dagger_seeds=[list(range(10, 15))])
    bc_only = sum(len(demonstrations(env, teacher, [s], 1.0)[2]) for s in range(10))
    assert stats["decisions"] > bc_only and stats["agreement"] > 0.8  # on the states the clone itself reached


def test_set_overrides_env_settings_and_dotted_config_paths():
    from agents.experiment import apply_sets

    config = {"env": {"slots": 4}, "ppo": {"n_steps": 64}}
    out = apply_sets(config, ["backfill=true", "ppo.n_steps=512", "pretrain.teacher=f1", "slots=[1, 2]"])
    assert out == {"env": {"slots": [1, 2], "backfill": True}, "ppo": {"n_steps": 512}, "pretrain": {"teacher": "f1"}}
    assert config == {"env": {"slots": 4}, "ppo": {"n_steps": 64}}  # the loaded config is left as it was
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        apply_sets(config, ["novalue"])


def test_the_teacher_can_be_a_learning_suite_reference():
    from train import resolve_teacher

    assert resolve_teacher("saf+greedy/pack") == "saf+greedy/pack"
    with pytest.raises(ConfigError, match="unknown case 'nope'"):
        resolve_teacher("reference:nope")
