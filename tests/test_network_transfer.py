"""A network for any cluster: the cluster's node groups go through a set encoder, so the context ignores their order
and number, and a model trained on the 2-group tiny cluster schedules the 5-group hetero-64 one, through the policy
adapter and through evaluate.py."""

from __future__ import annotations

import csv
import math
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces
from paths import ROOT
from sb3_contrib import MaskablePPO

import envs  # noqa: F401  (registers the ids)
import evaluate
import train
from agents import load
from agents.network import SlotPolicy, SlotScorer, reads
from envs.core.job import JobState
from envs.scenario import scenario
from envs.sim import WAIT, Simulator, Start
from envs.sim.checks import log_violations, state_violations

TINY_ID = "gpusched/GPUCluster-Tiny-v0"
TINY = (f"env_id: {TINY_ID}\nenv: {{}}\ntotal_timesteps: 128\nn_envs: 1\n"
        "ppo: {n_steps: 64, batch_size: 64, hidden: 16}\n")


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    """``model.zip`` of a 128-step train.py run on GPUCluster-Tiny-v0 (its run folder holds the config.yaml)."""
    folder = tmp_path_factory.mktemp("tiny-transfer")
    (folder / "exp.yaml").write_text(TINY)
    status = train.main(["--config", str(folder / "exp.yaml"), "--run-dir", str(folder / "run"), "--device", "cpu",
                         "--no-eval", "--threads", str(torch.get_num_threads())])
    assert status == 0
    return folder / "run" / "model.zip"


def flat(obs: dict[str, torch.Tensor], space: spaces.Dict) -> torch.Tensor:
    """The CombinedExtractor layout: each key flattened, in the space's key order, concatenated."""
    return torch.cat([obs[k].flatten(1) for k in space.spaces], dim=1)


def random_obs(space: spaces.Dict, batch: int, groups: int) -> dict[str, torch.Tensor]:
    """Random observations of ``space`` with ``groups`` cluster rows whose sizes sum to 1, as the env's do."""
    obs = {k: torch.rand(batch, *box.shape) for k, box in space.spaces.items()}
    cluster = torch.rand(batch, groups, space["cluster"].shape[1])
    cluster[..., 5] = cluster[..., 5] / cluster[..., 5].sum(1, keepdim=True)  # size: GPUs of the group / cluster's
    return dict(obs, cluster=cluster)


@pytest.mark.parametrize("groups", [1, 2, 5, 9])
def test_context_ignores_the_order_and_the_repetition_of_node_groups(groups):
    space = gym.make(TINY_ID).observation_space  # trained with 2 groups; fed 1, 2, 5 or 9
    torch.manual_seed(groups)
    scorer = SlotScorer(space, hidden=16)
    obs = random_obs(space, 3, groups)
    logits, values = scorer(flat(obs, space))
    assert logits.shape == (3, space["placements"].shape[0] * space["placements"].shape[1] + 1)
    shuffled = dict(obs, cluster=obs["cluster"][:, torch.randperm(groups)])
    twice = dict(obs, cluster=torch.cat([obs["cluster"], obs["cluster"]], dim=1))  # every group listed twice
    for other in (shuffled, twice):
        logits_o, values_o = scorer(flat(other, space))
        torch.testing.assert_close(logits_o, logits)
        torch.testing.assert_close(values_o, values)
    if groups > 1:  # the groups do matter: a cluster in another state gives another context
        changed = dict(obs, cluster=obs["cluster"].flip(2))
        assert not torch.allclose(scorer(flat(changed, space))[1], values)


def test_start_logits_permute_with_the_slots_and_preempt_logits_with_the_running_slots():
    env = gym.make("gpusched/GPUCluster-Preemptive-v0", cluster="tiny", workload="small", slots=4, running_slots=3)
    space = env.observation_space
    torch.manual_seed(0)
    scorer = SlotScorer(space, hidden=16)
    obs = random_obs(space, 3, 4)
    k, p = space["placements"].shape[:2]
    r = space["running"].shape[0]
    assert scorer.latent_dim_pi == env.action_space.n == k * p + r + 1
    slots, running = torch.tensor([2, 0, 3, 1]), torch.tensor([1, 2, 0])
    groups = torch.tensor([3, 1, 0, 2])
    permuted = dict(obs, jobs=obs["jobs"][:, slots], placements=obs["placements"][:, slots],
                    running=obs["running"][:, running], cluster=obs["cluster"][:, groups])
    logits, logits_p = scorer.forward_actor(flat(obs, space)), scorer.forward_actor(flat(permuted, space))
    torch.testing.assert_close(logits_p[:, : k * p].reshape(3, k, p), logits[:, : k * p].reshape(3, k, p)[:, slots])
    torch.testing.assert_close(logits_p[:, k * p : k * p + r], logits[:, k * p : k * p + r][:, running])
    torch.testing.assert_close(logits_p[:, -1], logits[:, -1])
    torch.testing.assert_close(scorer.forward_critic(flat(permuted, space)), scorer.forward_critic(flat(obs, space)))


def test_the_preemptive_variant_trains_with_a_logit_per_preempt_action():
    env = gym.make("gpusched/GPUCluster-Preemptive-v0", cluster="tiny", workload="small", episode_jobs=16, slots=4)
    model = MaskablePPO(SlotPolicy, env, n_steps=32, batch_size=32, seed=0, device="cpu",
                        policy_kwargs={"hidden": 8})
    model.learn(32)
    obs, _ = env.reset(seed=1)
    mask = env.unwrapped.action_masks()
    action, _ = model.predict(obs, action_masks=mask, deterministic=True)
    assert mask[int(action)] and len(mask) == model.policy.mlp_extractor.latent_dim_pi


def test_only_the_number_of_cluster_rows_may_differ_from_training():
    trained = gym.make(TINY_ID).observation_space
    box = trained["cluster"]

    def changed(key: str, shape: tuple[int, ...]) -> spaces.Dict:
        return spaces.Dict({**trained.spaces, key: spaces.Box(0.0, 1.0, shape, np.float32)})

    assert reads(trained, trained) and reads(trained, changed("cluster", (5, box.shape[1])))
    assert not reads(trained, changed("cluster", (5, box.shape[1] + 1)))  # a health column it never saw
    assert not reads(trained, changed("jobs", (8, trained["jobs"].shape[1])))  # other slots
    assert not reads(trained, spaces.Dict({**trained.spaces, "running": spaces.Box(0.0, 1.0, (3, 7), np.float32)}))


def test_a_model_trained_on_tiny_schedules_every_job_of_hetero_64(tiny_model):
    policy = load(tiny_model)
    world = scenario("small", "hetero-64", seed=0)
    jobs = world.workload.window(0, 120)
    sim = Simulator(world.cluster, jobs, world.runtime, world.dynamics)
    policy.reset()
    starts = 0
    while not sim.done:
        action = policy.act(sim.view)
        if isinstance(action, Start):  # every Start is the model's choice (the adapter only waits for it)
            sim.start(action.job_id, action.gpus)
            starts += 1
        else:
            assert action is WAIT  # a model trained without preemption never preempts
            sim.wait()
        assert state_violations(sim) == []
    assert log_violations(sim, jobs.jobs) == []
    records = sim.log().records
    assert len(records) == len(jobs) == starts and all(r.state is JobState.COMPLETED for r in records)
    trained, here = policy.model.observation_space["cluster"], policy.model.policy.observation_space["cluster"]
    assert (trained.shape[0], here.shape[0]) == (2, 5)


def test_evaluate_cli_runs_a_tiny_model_on_hetero_64(tiny_model, tmp_path):
    out = tmp_path / "eval"
    status = evaluate.main(["--policies", str(tiny_model), "--cluster", "hetero-64", "--workload", "small",
                            "--seeds", "0", "--out", str(out), "--workers", "1", "--no-plots", "--json"])
    assert status == 0
    (row,) = csv.DictReader((out / "results.csv").open())
    assert row["policy"] == str(tiny_model) and row["cluster"] == "hetero-64"
    assert int(row["n_completed"]) == int(row["n_jobs"]) > 0
    assert math.isfinite(float(row["mean_wait_s"]))


def test_model_rows_finish_with_worker_processes(tiny_model, tmp_path):
    """A model row in forked workers gives what it gives in one process (a forked worker that used the parent's
    torch threads used to hang: the run is a subprocess with a timeout, so a hang fails instead of stalling)."""
    rows = {}
    for workers in ("1", "2"):
        out = tmp_path / f"eval{workers}"
        subprocess.run([sys.executable, "evaluate.py", "--policies", f"{tiny_model},fifo", "--cluster", "tiny",
                        "--workload", "small", "--seeds", "0,1", "--out", str(out), "--workers", workers,
                        "--no-plots"], cwd=ROOT, check=True, timeout=300, capture_output=True)
        rows[workers] = list(csv.DictReader((out / "results.csv").open()))
    assert len(rows["2"]) == 4 and rows["2"] == rows["1"]


def test_slots_without_a_job_change_nothing_and_batching_changes_nothing():
    """The scorer computes only the slots that hold a job: what empty slots contain, and which other samples share
    the batch, leaves every held slot's logits, Wait's logit and the value as they are."""
    space = gym.make(TINY_ID).observation_space
    torch.manual_seed(3)
    scorer = SlotScorer(space, hidden=16)
    k, p = space["placements"].shape[:2]
    obs = random_obs(space, 4, 2)
    held = torch.tensor([1, 3, 0, k])  # jobs in the first 1, 3, 0 and k slots (a prefix, as the env fills them)
    present = (torch.arange(k)[None, :] < held[:, None]).float()
    obs["jobs"][..., 0] = present
    logits, values = scorer(flat(obs, space))
    garbage = {key: value.clone() for key, value in obs.items()}
    empty = present == 0
    garbage["jobs"][empty] = torch.rand(int(empty.sum()), space["jobs"].shape[1])
    garbage["jobs"][..., 0] = present
    garbage["placements"][empty] = torch.rand(int(empty.sum()), p, space["placements"].shape[2])
    logits_g, values_g = scorer(flat(garbage, space))
    starts = present.repeat_interleave(p, dim=1).bool()
    torch.testing.assert_close(logits_g[:, :-1][starts], logits[:, :-1][starts])
    torch.testing.assert_close(logits_g[:, -1], logits[:, -1])
    torch.testing.assert_close(values_g, values)
    for i in range(4):  # each sample alone gives what it gives in the batch
        alone_logits, alone_values = scorer(flat({key: value[i:i + 1] for key, value in obs.items()}, space))
        torch.testing.assert_close(alone_logits[0], logits[i])
        torch.testing.assert_close(alone_values[0], values[i])
