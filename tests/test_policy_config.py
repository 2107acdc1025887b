"""Policy configs (``evaluate.py --policy-config``): parameters reach the orders and k8s profiles, governance reaches
the cluster, every mistake is a one-line error naming the key, and a run with a config differs only by it."""

from __future__ import annotations

import subprocess
import sys

import pytest
from paths import ROOT

from baselines import make
from baselines.config import load_policy_config, policy_config_from_dict
from envs.core import ConfigError, Job, RuntimeConfig
from envs.scenario import load_cluster
from envs.sim import simulate
from evaluation.backends import execute
from evaluation.runner import RunSpec

CONFIG = {
    "orders": {"fairshare": {"half_life_s": 3600, "by": "team", "shares": {"a": 3}},
               "multifactor": {"w_age": 5.0}},
    "kubernetes": {"mostallocated": {"topology_weight": 0, "gpu_weight": 7}},
    "governance": {"quotas": {"limits": {"teams": {"a": 2}}},
                   "partitions": [{"name": "fast", "groups": ["a100"]}]},
}


def test_parameters_reach_the_order_and_the_profile():
    config = policy_config_from_dict(CONFIG, "cfg.yaml")
    fairshare = config.make("fairshare+easy/pack").order.fair_share
    assert (fairshare.usage.half_life_s, fairshare.by, fairshare.shares) == (3600, "team", {"a": 3})
    assert config.make("multifactor").order.weights["age"] == 5.0
    assert config.make("fcfs").order.name == "fcfs"  # no section: defaults
    profile = config.make("k8s:mostallocated+preempt").scheduler.profile
    assert (profile.topology_weight, profile.gpu_weight) == (0, 7)
    assert make("k8s:mostallocated").profile.gpu_weight != 7


def test_governance_replaces_the_clusters_partitions_and_quotas():
    config = policy_config_from_dict(CONFIG, "cfg.yaml")
    cluster = config.apply(load_cluster("tiny"))
    assert [p.name for p in cluster.governance.partitions] == ["fast"]
    assert cluster.governance.quotas.team_limits == {"a": 2.0}
    # team a at its cap of 2 GPUs: its second 2-GPU job waits for the first although 6 GPUs are free
    jobs = [Job(1, 0, 100, 100, n_gpus=2, team="a"), Job(2, 0, 100, 100, n_gpus=2, team="a")]
    log = simulate(cluster, jobs, config.make("fcfs"), RuntimeConfig.rigid())
    assert sorted(r.start_time_s for r in log.records) == [0, 100]


def test_the_site_example_sets_every_section_on_the_default_cluster():
    path = ROOT / "configs" / "policies" / "site-example.yaml"
    config = load_policy_config(str(path))
    assert config.orders.keys() == {"fairshare", "multifactor", "fairtree"}
    assert config.make("fairshare+easy").order.fair_share.shares == {"team0": 2, "team1": 2}
    assert config.make("k8s:mostallocated").profile.gpu_weight == 5
    assert config.make("slurm").params.conf.priority_type == "priority/multifactor"
    cluster = config.apply(load_cluster("hetero-64"))
    assert [p.name for p in cluster.governance.partitions] == ["fast", "all"]
    assert cluster.governance.quotas.team_limits == {"team7": 64.0}
    readme = (ROOT / "README.md").read_text()
    assert "--policy-config configs/policies/site-example.yaml" in readme  # the README's examples use it


@pytest.mark.parametrize(("data", "match"), [
    ({"order": {}}, r"cfg.yaml: order: unknown key \(allowed: orders, kubernetes, governance, slurm\)"),
    ({"orders": {"fairshar": {}}}, r"cfg.yaml: orders.fairshar: unknown key"),
    ({"orders": {"fairshare": {"half_life": 3}}}, r"orders.fairshare: .*unknown parameter\(s\) half_life"),
    ({"orders": {"fairshare": {"half_life_s": -3}}}, r"orders.fairshare: .*half_life_s: must be > 0"),
    ({"kubernetes": {"mostallocated": {"fit_weight": -1}}}, r"kubernetes.mostallocated: .*fit_weight"),
    ({"kubernetes": {"mostallocated": [1]}}, r"kubernetes.mostallocated: input should be a valid dictionary"),
    ({"governance": {"quota": {}}}, r"governance.quota: unknown key"),
])
def test_mistakes_name_the_key(data, match):
    with pytest.raises(ConfigError, match=match):
        policy_config_from_dict(data, "cfg.yaml")


def test_a_run_with_a_config_differs_only_by_it(tmp_path):
    path = tmp_path / "cfg.yaml"
    path.write_text("orders:\n  fairshare: {half_life_s: 600, by: team}\n")
    plain = RunSpec("fairshare+easy", "small", "tiny", seed=0)
    configured = RunSpec("fairshare+easy", "small", "tiny", seed=0, policy_config=str(path))
    empty = tmp_path / "empty.yaml"
    empty.write_text("{}\n")
    rows = [row for row, _, _ in execute([plain, configured, RunSpec("fairshare+easy", "small", "tiny", seed=0,
                                                                     policy_config=str(empty))], progress=False)]
    assert rows[0] == rows[2]  # an empty config changes nothing
    assert rows[0]["mean_wait_s"] != rows[1]["mean_wait_s"]
    bad = tmp_path / "bad.yaml"
    bad.write_text("governance:\n  partitions: [{name: x, nodes: [nowhere]}]\n")
    done = subprocess.run([sys.executable, str(ROOT / "evaluate.py"), "--policies", "fcfs", "--workload", "small",
                           "--cluster", "tiny", "--seeds", "0", "--policy-config", str(bad), "--out",
                           str(tmp_path / "out")], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "governance.partitions[0].nodes: no node is named 'nowhere'" in done.stderr
    load_policy_config.cache_clear()


def test_a_scenario_file_sets_the_governance_of_runs_and_envs(tmp_path):
    from envs.gymenv import GPUClusterEnv
    from envs.scenario import scenario

    path = tmp_path / "capped.yaml"
    path.write_text("governance:\n  quotas: {limits: {teams: {team0: 1}}}\n  partitions: [{name: v, groups: [v100]}]\n")
    world = scenario("small", "tiny", seed=0, dynamics=str(path))
    assert world.cluster.governance.quotas.team_limits == {"team0": 1.0} and not world.dynamics.active
    log = simulate(world.cluster, world.workload, make("fcfs+easy"), world.runtime, world.dynamics)
    events = sorted(e for r in log.completed() if r.job.team == "team0"
                    for e in ((r.finish_time_s, -r.job.gpu_milli), (r.start_time_s, r.job.gpu_milli)))
    held = [sum(m for _, m in events[: i + 1]) for i in range(len(events))]  # ends before starts at one instant
    assert max(held) == 1000 and log.quota_violations == 0  # team0 never holds more than one GPU
    assert {r.reject_reason.name for r in log.rejected() if r.job.team == "team0"} == {"QUOTA"}
    env = GPUClusterEnv(cluster="tiny", workload="small", scenario=str(path))
    assert env.reset(seed=0)[0]["jobs"].shape[1] == 13  # quotas: the headroom column
    path.write_text("governance:\n  partitions: [{name: v, groups: [nope]}]\n")
    with pytest.raises(ConfigError, match=r"scenario 'capped': governance.partitions\[0\].groups: no node"):
        scenario("small", "tiny", seed=0, dynamics=str(path))
