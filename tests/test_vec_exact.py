"""The batched engine against the event env: the same workloads and the same random masked actions give the same
masks, observations, rewards and job logs (start and end times, GPUs), cluster by cluster, with auto-reset."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch

from envs.core.errors import ConfigError
from envs.core.job import JobState
from envs.core.metrics import summarize
from envs.gymenv.config import EnvConfig
from envs.gymenv.env import GPUClusterEnv
from envs.gymenv.episodes import EpisodeSource
from envs.vec import VecClusterEnv

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])

# three racks of mixed nodes: 8-GPU V100 boxes with two NVLink islands, 8-GPU H100 boxes, 4-GPU A100 boxes
RACKS = """
name: racks
node_groups:
  - {name: v100, count: 2, gpu_type: V100, gpus: 8, island_size: 4, cpus: 48, ram_gib: 384, rack: 0}
  - {name: h100, count: 2, gpu_type: H100, gpus: 8, cpus: 128, ram_gib: 1024, rack: 1}
  - {name: a100, count: 2, gpu_type: A100-40GB, gpus: 4, island_size: 2, cpus: 64, ram_gib: 512, rack: 2}
  - {name: mix, count: 1, gpu_type: V100, gpus: 4, island_size: 2, cpus: 32, ram_gib: 256, rack: 2}
"""
# a busy whole-GPU workload with gangs of up to 24 GPUs (the cluster has 52) and type / memory constraints
BUSY = """
name: busy
n_jobs: 60
target_load: 1.3
arrivals: {process: poisson}
runtime: {median_s: 900.0, sigma: 1.2, max_s: 14400.0}
gpus:
  counts: [1, 2, 4, 8, 12, 24]
  probs: [0.45, 0.15, 0.15, 0.1, 0.1, 0.05]
  fractional_share: 0.0
constraints: {typed_share: 0.2, memory_share: 0.3}
data: {share: 0.0}
"""


@pytest.fixture(scope="module")
def racks_config(tmp_path_factory: pytest.TempPathFactory) -> EnvConfig:
    folder = tmp_path_factory.mktemp("vec")
    (folder / "racks.yaml").write_text(RACKS)
    (folder / "busy.yaml").write_text(BUSY)
    return EnvConfig(cluster=str(folder / "racks.yaml"), workload=str(folder / "busy.yaml"), episode_jobs=60,
                     slots=6, reward_weights={"wait": 1.0, "utilization": 0.5})


def _completed(env: GPUClusterEnv) -> dict[int, tuple[float, float, tuple[int, ...]]]:
    log = env.unwrapped._require_sim().log()
    return {r.job.job_id: (r.start_time_s, r.finish_time_s, tuple(int(g) for g in r.gpus))
            for r in log.records if r.state is JobState.COMPLETED}


def summarize_wait(env: GPUClusterEnv) -> float:
    """The event env's mean wait of its finished episode [s]."""
    return summarize(env.unwrapped._require_sim().log())["mean_wait_s"]


def _same_log(ours: dict, theirs: dict) -> None:
    """The same jobs, each with the same GPUs and start and end times to 1e-6 s."""
    assert ours.keys() == theirs.keys()
    for job_id, (start, end, gpus) in theirs.items():
        assert ours[job_id][2] == gpus, f"job {job_id}"
        assert ours[job_id][:2] == pytest.approx((start, end), abs=1e-6, rel=0), f"job {job_id}"


def lockstep(config: EnvConfig, n: int, steps: int, seed: int, device: str = "cpu", pool: int = 3,
             max_passes: int = 64) -> dict[str, object]:
    """Drive N event envs and one batched env with the same random masked actions; assert they agree at every
    decision point; return what was exercised."""
    source = EpisodeSource(config)
    rng = np.random.default_rng(seed)
    workloads = [source.sample(rng).workload for _ in range(pool)]
    vec = VecClusterEnv(config, n, device=device, workloads=workloads, max_passes=max_passes, record=True)
    events = [GPUClusterEnv(config) for _ in range(n)]
    episode = [0] * n
    obs, mask = vec.reset()
    ev_obs = [env.reset(seed=0, options={"workload": workloads[i % pool]})[0] for i, env in enumerate(events)]
    generator = torch.Generator().manual_seed(seed)
    used = Counter()
    finished = 0
    # the reward of an event-env step is the batched env's over that step and the Wait-only steps after it
    theirs, ours, ended = [0.0] * n, [0.0] * n, [False] * n
    for _ in range(steps):
        mask_cpu = mask.cpu()
        actions = torch.multinomial(mask_cpu.float(), 1, generator=generator).squeeze(1)
        ready = mask_cpu[:, :config.n_starts].any(1)
        for i, env in enumerate(events):
            if not ready[i]:  # the batched env stopped its skip at max_passes: Wait is the skip going on
                assert mask_cpu[i].tolist() == [False] * config.n_starts + [True]
                continue
            assert not ended[i]
            assert ours[i] == pytest.approx(theirs[i], rel=1e-5, abs=1e-7)
            ours[i] = theirs[i] = 0.0
            np.testing.assert_array_equal(mask_cpu[i].numpy(), env.unwrapped.action_masks())
            for key, value in ev_obs[i].items():
                np.testing.assert_allclose(obs[key][i].cpu().numpy(), value, atol=1e-6, err_msg=key)
        obs, mask, reward, done, info = vec.step(actions.to(device))
        for i, env in enumerate(events):
            ours[i] += float(reward[i])
            if ready[i]:
                action = int(actions[i])
                if action < config.n_starts:
                    used[config.placement_rules[action % len(config.placement_rules)]] += 1
                ev_obs[i], ev_reward, ended[i], _, _ = env.step(action)
                theirs[i] += ev_reward
            assert bool(done[i]) <= ended[i]
            if done[i]:
                _same_log(vec.logs[i][episode[i]], _completed(env))
                assert ours[i] == pytest.approx(theirs[i], rel=1e-5, abs=1e-7)
                assert float(info["mean_wait_s"][i]) == pytest.approx(summarize_wait(env))
                ours[i] = theirs[i] = 0.0
                ended[i] = False
                finished += 1
                episode[i] += 1
                ev_obs[i] = env.reset(seed=0, options={"workload": workloads[(i + episode[i]) % pool]})[0]
    logs = [entry for cluster in vec.logs for ep in cluster for entry in ep.values()]
    c = vec.cluster
    nodes = [set(c.gpu_node[list(gpus)].tolist()) for _, _, gpus in logs]
    return {"finished": finished, "rules": used, "multi_node": sum(len(s) > 1 for s in nodes),
            "multi_rack": sum(len({c.nodes[x].rack for x in s}) > 1 for s in nodes),
            "types": Counter(c.nodes[min(s)].gpu_type for s in nodes)}


@pytest.mark.parametrize("device", DEVICES)
def test_one_cluster_matches_the_event_env(racks_config: EnvConfig, device: str) -> None:
    seen = lockstep(racks_config, n=1, steps=400, seed=1, device=device)
    assert seen["finished"] >= 2  # auto-reset into the next workload, compared too
    assert seen["multi_node"] > 0 and seen["multi_rack"] > 0


@pytest.mark.parametrize("device", DEVICES)
def test_64_clusters_match_the_event_env(racks_config: EnvConfig, device: str) -> None:
    seen = lockstep(racks_config, n=64, steps=170, seed=2, device=device)
    assert seen["finished"] >= 16
    assert set(seen["rules"]) == {"pack", "spread", "topology"}
    assert seen["multi_node"] > 50 and seen["multi_rack"] > 10
    assert {"V100", "H100", "A100-40GB"} <= set(seen["types"])  # heterogeneous speeds: 0.5, 1 and 2+


def test_work_conserving_and_a_pass_limit_keep_the_log(racks_config: EnvConfig) -> None:
    """With Wait masked while a start is legal, and with a skip cut after one pass (Wait-only masks in between)."""
    seen = lockstep(racks_config.replace(work_conserving=True, placement_rules=("topology", "pack")), n=8,
                    steps=300, seed=3, max_passes=1)
    assert seen["finished"] >= 8


def test_default_cluster_and_rigid_runtime() -> None:
    config = EnvConfig(workload="whole-gpu", episode_jobs=120, slots=16, runtime_model="rigid", load_factor=3.0)
    seen = lockstep(config, n=4, steps=300, seed=4, pool=2)
    assert seen["finished"] >= 4


@pytest.mark.parametrize(("overrides", "match"), [
    ({"workload": "default"}, "outside the batched engine's subset"),
    ({"preemption": True}, "preemption"),
    ({"scenario": "flaky", "workload": "whole-gpu"}, "failures"),
    ({"backfill_assist": True, "workload": "whole-gpu"}, "backfill_assist"),
    ({"placement_rules": ("first-fit",), "workload": "whole-gpu"}, "placement_rules"),
])
def test_outside_the_subset_is_a_config_error(overrides: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        VecClusterEnv(EnvConfig(episode_jobs=50).replace(**overrides), 2, workloads=1)


def test_fractional_jobs_are_outside(tmp_path: Path) -> None:
    shares = tmp_path / "shares.yaml"
    shares.write_text("name: shares\nn_jobs: 30\ngpus: {fractional_share: 1.0}\ndata: {share: 0.0}\n")
    with pytest.raises(ConfigError, match="fractional"):
        VecClusterEnv(EnvConfig(workload=str(shares), episode_jobs=30), 2, workloads=1)


def test_datasets_need_the_rigid_runtime(tmp_path: Path) -> None:
    data = tmp_path / "data.yaml"
    data.write_text("name: data\nn_jobs: 30\ngpus: {fractional_share: 0.0}\ndata: {share: 1.0}\n")
    with pytest.raises(ConfigError, match="dataset"):
        VecClusterEnv(EnvConfig(workload=str(data), episode_jobs=30), 2, workloads=1)
    VecClusterEnv(EnvConfig(workload=str(data), episode_jobs=30, runtime_model="rigid"), 2, workloads=1)


def test_partitions_match_the_event_env(tmp_path: Path) -> None:
    """Partitions fit the engine's tensors: they only narrow each placement class's eligible nodes (and reject jobs
    at submission); quotas do not, and are a ConfigError."""
    partitions = """
partitions:
  - {name: fast, groups: [h100], max_wall_s: 20000}
  - {name: mixed, groups: [v100, a100, mix]}
  - {name: every, groups: [v100, h100, a100, mix], default: true}
"""
    (tmp_path / "racks.yaml").write_text(RACKS + partitions)
    (tmp_path / "busy.yaml").write_text(BUSY + "partitions: {names: [fast, mixed, ''], shares: [0.3, 0.3, 0.4]}\n")
    config = EnvConfig(cluster=str(tmp_path / "racks.yaml"), workload=str(tmp_path / "busy.yaml"), episode_jobs=60,
                       slots=6)
    seen = lockstep(config, n=8, steps=300, seed=5)
    assert seen["finished"] >= 8 and seen["multi_node"] > 0
    (tmp_path / "quotas.yaml").write_text(RACKS + "quotas: {limits: {teams: {team0: 4}}}\n")
    with pytest.raises(ConfigError, match="quotas are outside the batched engine's subset"):
        VecClusterEnv(config.replace(cluster=str(tmp_path / "quotas.yaml")), 2, workloads=1)
