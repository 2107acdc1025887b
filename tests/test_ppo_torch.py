"""The batched engine's PPO loop (agents.ppo_torch): advantages, masking, learning, seeding, checkpoints and resume,
and train.py's ``engine: vec`` on the real batched engine, leaving a model that runs in the harness."""

from __future__ import annotations

import dataclasses
import math

import gymnasium as gym
import numpy as np
import pytest
import torch
import yaml
from stable_baselines3.common.buffers import RolloutBuffer

import envs  # noqa: F401  (registers the ids)
import train
from agents.callbacks import Checkpoints
from agents.experiment import VecSection, check_experiment
from agents.model_file import checkpoints, load_model, run_config, save_model
from agents.ppo_torch import (
    VEC_KEYS,
    BatchedPPO,
    batched_model,
    gae,
    masked_entropy,
    masked_log_probs,
    policy_outputs,
)
from envs.core import ConfigError
from evaluation.runner import RunSpec, run

TINY = "gpusched/GPUCluster-Tiny-v0"
PPO = {"n_steps": 8, "batch_size": 64, "n_epochs": 2, "hidden": 16}


@pytest.fixture(autouse=True)
def one_thread():
    """One torch thread, as train.py runs by default: these batches are far too small to share between cores, and
    on a busy 2-core machine a second thread makes them several times slower."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


class MaskedBandit:
    """A batched contextual bandit with GPUClusterEnv's observation space: random observations and masks (Wait,
    the last action, always legal), reward 1 for Wait and 0 otherwise, episodes of ``length`` steps (staggered
    over the clusters). It raises on an illegal action and keeps every (mask, action) it was given."""

    def __init__(self, num_envs: int, length: int = 8, seed: int = 0) -> None:
        event_env = gym.make(TINY).unwrapped
        self.observation_space, self.n_actions = event_env.observation_space, event_env.config.n_actions
        self.num_envs, self.length, self.device = num_envs, length, torch.device("cpu")
        self.generator = torch.Generator().manual_seed(seed)
        self.age = torch.arange(num_envs) % length
        self.returns = torch.zeros(num_envs, dtype=torch.float64)
        self.taken: list[tuple[torch.Tensor, torch.Tensor]] = []
        self.mask = torch.zeros(0)

    def _observe(self) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        n, g = self.num_envs, self.generator
        obs = {k: torch.rand((n, *box.shape), generator=g) for k, box in self.observation_space.spaces.items()}
        self.mask = torch.rand((n, self.n_actions), generator=g) < 0.3
        self.mask[:, -1] = True
        return obs, self.mask.clone()

    def reset(self) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        return self._observe()

    def step(self, actions: torch.Tensor) -> tuple:
        assert actions.dtype == torch.int64 and actions.shape == (self.num_envs,)
        if not self.mask[torch.arange(self.num_envs), actions].all():
            raise AssertionError("an illegal action was taken")
        self.taken.append((self.mask, actions))
        reward = (actions == self.n_actions - 1).float()
        self.returns += reward
        self.age += 1
        done = self.age >= self.length
        nan = torch.full((self.num_envs,), math.nan, dtype=torch.float64)
        info = {"episode_return": torch.where(done, self.returns, nan), "jobs": torch.where(done, 8.0, nan)}
        self.returns[done], self.age[done] = 0.0, 0
        return (*self._observe(), reward, done, info)


def new_model(ppo: dict | None = None, seed: int = 0):
    return batched_model({**PPO, **(ppo or {})}, gym.make(TINY), "cpu", seed, None)


def wait_probability(model) -> float:
    """The mean probability of Wait on fresh observations of the bandit."""
    obs, mask = MaskedBandit(256, seed=99).reset()
    with torch.no_grad():
        logits, _ = policy_outputs(model.policy, obs)
    return float(masked_log_probs(logits, mask)[:, -1].exp().mean())


def test_gae_matches_a_hand_computed_rollout():
    rewards = torch.tensor([[1.0, 0.0], [0.0, 0.0], [2.0, 0.0]])
    values = torch.tensor([[0.5, 0.0], [0.4, 0.0], [0.3, 0.0]])
    dones = torch.tensor([[False, False], [True, False], [False, False]])
    advantages, returns = gae(rewards, values, dones, torch.tensor([1.0, 1.0]), gamma=0.9, gae_lambda=0.8)
    # cluster 0: 2 + 0.9·1 − 0.3 = 2.6; the episode ends with step 1: −0.4; 1 + 0.9·0.4 − 0.5 + 0.72·(−0.4) = 0.572
    # cluster 1: only the bootstrap: 0.9, then 0.72·0.9, then 0.72²·0.9
    expected = torch.tensor([[0.572, 0.46656], [-0.4, 0.648], [2.6, 0.9]])
    torch.testing.assert_close(advantages, expected)
    torch.testing.assert_close(returns, expected + values)


def test_gae_agrees_with_sb3s_rollout_buffer():
    g = torch.Generator().manual_seed(3)
    t, n = 7, 3
    rewards, values = torch.randn(t, n, generator=g), torch.randn(t, n, generator=g)
    dones, last = torch.rand(t, n, generator=g) < 0.3, torch.randn(n, generator=g)
    buffer = RolloutBuffer(t, gym.spaces.Box(0, 1, (1,)), gym.spaces.Discrete(2), gamma=0.97, gae_lambda=0.9,
                           n_envs=n)
    buffer.rewards, buffer.values = rewards.numpy(), values.numpy()
    buffer.episode_starts = np.concatenate([np.zeros((1, n)), dones[:-1].numpy()]).astype(np.float32)  # SB3's view
    buffer.compute_returns_and_advantage(last, dones[-1].numpy())
    advantages, returns = gae(rewards, values, dones, last, 0.97, 0.9)
    np.testing.assert_allclose(advantages.numpy(), buffer.advantages, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(returns.numpy(), buffer.returns, rtol=1e-5, atol=1e-6)


def test_masked_outputs_are_sb3_contribs_and_ignore_illegal_logits():
    model, env = new_model(), MaskedBandit(32)
    obs, mask = env.reset()
    actions = torch.multinomial(mask.float(), 1, generator=torch.Generator().manual_seed(0)).squeeze(1)
    values, log_prob, entropy = model.policy.evaluate_actions(obs, actions, action_masks=mask)
    logits, ours = policy_outputs(model.policy, obs)
    log_probs = masked_log_probs(logits, mask)
    torch.testing.assert_close(ours, values.flatten())
    torch.testing.assert_close(log_probs.gather(1, actions[:, None]).squeeze(1), log_prob)
    torch.testing.assert_close(masked_entropy(log_probs, mask), entropy)
    assert (log_probs.exp()[~mask] == 0).all()
    moved = torch.where(mask, logits, logits + 50 * torch.randn(logits.shape))  # illegal logits count for nothing
    torch.testing.assert_close(masked_log_probs(moved, mask)[mask], log_probs[mask])
    torch.testing.assert_close(masked_entropy(masked_log_probs(moved, mask), mask), masked_entropy(log_probs, mask))


def test_ppo_learns_the_rewarded_action_and_never_samples_an_illegal_one():
    model = new_model({"learning_rate": 3e-3, "n_steps": 16, "batch_size": 128, "n_epochs": 4, "ent_coef": 0.0})
    env = MaskedBandit(16)
    before = wait_probability(model)
    BatchedPPO(model, env, seed=0).learn(16 * 16 * 8)
    after = wait_probability(model)
    assert model.num_timesteps == 2048 and len(env.taken) == 128  # and every one of them was legal
    assert before < 0.35 and after > 0.9, (before, after)


def test_a_run_is_reproducible_from_its_seed():
    params = []
    for _ in range(2):
        model = new_model(seed=4)
        BatchedPPO(model, MaskedBandit(8, seed=1), seed=4).learn(128)
        params.append(torch.cat([p.detach().flatten() for p in model.policy.parameters()]))
    torch.testing.assert_close(params[0], params[1], rtol=0, atol=0)


def test_checkpoints_and_resume_continue_to_the_total_and_load_as_a_model(tmp_path):
    ppo = {**PPO, "learning_rate": 1e-3, "learning_rate_end": 1e-4}
    tiny = {k: list(v) if isinstance(v, tuple) else v
            for k, v in dataclasses.asdict(gym.make(TINY).unwrapped.config).items()}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({"env_id": TINY, "env": tiny, "ppo": ppo}))
    model = batched_model(ppo, gym.make(TINY), "cpu", 0, str(tmp_path / "tb"))
    rollout = 8 * PPO["n_steps"]
    BatchedPPO(model, MaskedBandit(8), seed=0).learn(3 * rollout, callback=[Checkpoints(tmp_path, rollout)])
    assert sorted(checkpoints(tmp_path)) == [rollout, 2 * rollout, 3 * rollout]
    assert model.lr_schedule(model._current_progress_remaining) == pytest.approx(1e-4)
    # a run killed after its second checkpoint continues from it, to a new total that is no whole rollout
    resumed = load_model(checkpoints(tmp_path)[2 * rollout], run_config(checkpoints(tmp_path)[2 * rollout]))
    assert resumed.num_timesteps == 2 * rollout
    BatchedPPO(resumed, MaskedBandit(8, seed=1), seed=0).learn(4 * rollout + 16,
                                                               callback=[Checkpoints(tmp_path, rollout)])
    assert resumed.num_timesteps == 4 * rollout + 16  # the last rollout shortened to two steps of the 8 clusters
    assert max(checkpoints(tmp_path)) == 4 * rollout + 16
    save_model(resumed, tmp_path / "model.zip")
    assert load_model(tmp_path / "model.zip", run_config(tmp_path / "model.zip")).num_timesteps == 4 * rollout + 16
    row, trace, _ = run(RunSpec(str(tmp_path / "model.zip"), "small", "tiny", seed=3))  # the adapter acts
    assert row["n_completed"] == row["n_jobs"] == len(trace["wait_s"]) > 0


def test_the_vec_section_is_checked_like_the_rest():
    base = {"env_id": TINY, "total_timesteps": 64}
    assert set(VecSection.model_fields) == set(VEC_KEYS)
    check_experiment({**base, "engine": "vec", "vec": {"num_envs": 4, "workloads": 2}}, "exp.yaml")
    for change, expected in [
        ({"engine": "jax"}, "exp.yaml: engine: input should be 'sb3' or 'vec', got 'jax'"),
        ({"engine": "vec", "vec": {"num_env": 4}}, "exp.yaml: vec.num_env: unknown key"),
        ({"engine": "vec", "vec": {"num_envs": 0}},
         "exp.yaml: vec.num_envs: input should be greater than or equal to 1"),
        ({"vec": {"num_envs": 4}}, "exp.yaml: vec: applies only with engine: vec"),
        ({"engine": "vec", "n_envs": 2}, "exp.yaml: n_envs: the vec engine's clusters are vec.num_envs"),
        ({"engine": "vec", "env_id": "gpusched/RLSched-v0"}, "engine: vec simulates GPUClusterEnv variants"),
    ]:
        with pytest.raises(ConfigError) as raised:
            check_experiment({**base, **change}, "exp.yaml")
        assert expected in str(raised.value)


WHOLE_GPU_TINY = """\
name: tiny-whole-gpu
n_jobs: 64
target_load: 0.8
gpus: {counts: [1, 2, 4], probs: [0.85, 0.1, 0.05], fractional_share: 0.0}
data: {share: 0.0}
runtime: {median_s: 600.0, sigma: 1.5, max_s: 14400.0}
"""


def test_train_py_on_the_batched_engine_validates_checkpoints_resumes_and_evaluates(tmp_path, capsys):
    pytest.importorskip("envs.vec")
    workload = tmp_path / "tiny-whole-gpu.yaml"
    workload.write_text(WHOLE_GPU_TINY)
    config = tmp_path / "exp.yaml"
    config.write_text(
        f"env_id: {TINY}\nengine: vec\nenv: {{workload: {workload}, work_conserving: true}}\ntotal_timesteps: 256\n"
        "vec: {num_envs: 8, workloads: 4}\nppo: {n_steps: 16, batch_size: 64, n_epochs: 2, hidden: 16}\n"
        "pretrain: {teacher: saf+greedy/pack, episodes: 1, epochs: 1}\n"
        "train: {eval_every_steps: 128, eval_seeds: [5], checkpoint_every_steps: 128}\n"
        f"eval: {{workload: {workload}, cluster: tiny, seeds: [7], heuristics: [fifo]}}\n")
    run_dir = tmp_path / "run"
    assert train.main(["--config", str(config), "--run-dir", str(run_dir), "--device", "cpu"]) == 0
    out, err = capsys.readouterr()
    assert "trained 256 steps" in out and "fifo" in out  # the final table, beside the heuristic
    assert "PPO: 100%" in err and "256/256" in err and "validation mean_wait_s" in err and "imitation" in err
    assert sorted(checkpoints(run_dir)) == [0, 128, 256] and (run_dir / "best_model.zip").exists()
    resolved = run_config(run_dir / "model.zip")
    assert resolved["engine"] == "vec" and resolved["vec"] == {"num_envs": 8, "workloads": 4}
    assert "n_envs" not in resolved
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(next((run_dir / "tb").rglob("events.out.tfevents*")).parent))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    assert {"rollout/ep_rew_mean", "train/value_loss", "train/policy_gradient_loss", "train/entropy_loss",
            "train/approx_kl", "train/clip_fraction", "train/learning_rate", "time/fps", "eval/mean_wait_s",
            "eval/heuristic_mean_wait_s"} <= tags
    assert [e.step for e in events.Scalars("eval/mean_wait_s")] == [0, 128, 256]
    assert train.main(["--run-dir", str(run_dir), "--resume", "--total-timesteps", "320", "--no-eval",
                       "--no-progress"]) == 0
    out, err = capsys.readouterr()
    assert f"resumed from {run_dir / 'model.zip'} (256 steps" in out and "trained 64 steps" in out
    assert "PPO" not in err
    assert load_model(run_dir / "model.zip", run_config(run_dir / "model.zip")).num_timesteps == 320
    row, _, _ = run(RunSpec(str(run_dir / "model.zip"), str(workload), "tiny", seed=3))
    assert row["n_completed"] == row["n_jobs"] > 0


def test_train_py_says_in_one_line_what_the_batched_engine_refuses(tmp_path, capsys):
    pytest.importorskip("envs.vec")
    config = tmp_path / "exp.yaml"
    config.write_text(f"env_id: {TINY}\nengine: vec\ntotal_timesteps: 64\nvec: {{num_envs: 2}}\n"
                      "ppo: {n_steps: 8, batch_size: 16, hidden: 8}\n")  # the Tiny variant's workload is fractional
    assert train.main(["--config", str(config), "--run-dir", str(tmp_path / "run"), "--device", "cpu"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("train.py: error: exp.yaml: engine: vec: ") and "\n" not in err
    assert not (tmp_path / "run" / "model.zip").exists()


@pytest.mark.parametrize("engine", ["sb3", "vec"])
def test_both_engines_show_progress_bars_on_stderr_only(engine, tmp_path, capsys):
    if engine == "vec":
        pytest.importorskip("envs.vec")
    workload = tmp_path / "tiny-whole-gpu.yaml"
    workload.write_text(WHOLE_GPU_TINY)
    section = "vec: {num_envs: 4, workloads: 2}\n" if engine == "vec" else "n_envs: 1\n"
    config = tmp_path / "exp.yaml"
    config.write_text(
        f"env_id: {TINY}\nengine: {engine}\nenv: {{workload: {workload}, work_conserving: true}}\n"
        f"total_timesteps: 64\n{section}ppo: {{n_steps: 16, batch_size: 32, n_epochs: 1, hidden: 8}}\n"
        "pretrain: {teacher: saf+greedy/pack, episodes: 1, epochs: 2}\n"
        "train: {eval_every_steps: 32, eval_seeds: [5], checkpoint_every_steps: 0}\n")
    assert train.main(["--config", str(config), "--run-dir", str(tmp_path / "run"), "--device", "cpu",
                       "--no-eval"]) == 0
    out, err = capsys.readouterr()
    assert "imitation: episodes: 100%" in err and "imitation: fit" in err and "2/2" in err
    assert "PPO: 100%" in err and "64/64" in err and "validation mean_wait_s" in err
    assert "%|" not in out and out.splitlines()[-1].startswith("trained 64 steps")
