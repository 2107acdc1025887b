"""The peer-mode learning env (``gpusched/RLSched-v0``): a hand-computed episode, the reference reproduced through
the env's actions, held-out sampling, and a trained model as an ``rls:`` policy (the Gymnasium and SB3 checks,
pickling and rollouts are in test_registered_envs.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from paths import LUBLIN, ROOT, require
from sb3_contrib import MaskablePPO

import envs  # noqa: F401  (registers the ids)
from agents.imitation import PeerTeacher
from agents.peer_policy import PeerModelPolicy, Shortlist, evaluate_model_peer, parse_model_name
from baselines.rls import rls_policy
from envs.core.errors import ConfigError
from envs.peer.engine import evaluate_peer, peer_start_indices, run_sequence
from envs.peer.env import PeerEnvConfig, PeerSchedEnv, training_starts
from evaluation.runner import RunSpec, run

# Two one-processor nodes. Job 1 fills the machine until 100; job 2 (1 node) is committed at 10 and starts at 100;
# then the agent's first real choice, at t = 100 with one node free: job 3 (1 node, 10 s) or job 4 (2 nodes).
HAND_SWF = """; MaxNodes: 2
; MaxProcs: 2
1 0 -1 100 2 -1 -1 -1 -1 -1 1 -1 -1 -1 0 -1 -1 -1
2 10 -1 50 1 -1 -1 -1 -1 -1 1 -1 -1 -1 0 -1 -1 -1
3 20 -1 10 1 -1 -1 -1 -1 -1 1 -1 -1 -1 0 -1 -1 -1
4 30 -1 200 2 -1 -1 -1 -1 -1 1 -1 -1 -1 0 -1 -1 -1
"""


@pytest.fixture
def long_trace(tmp_path: Path) -> Path:
    """60 jobs of 1 or 2 processors on the two-node machine, every 20 s."""
    path = tmp_path / "long.swf"
    records = [f"{i} {20 * i} -1 {10 + 37 * i % 90} {1 + i % 2} -1 -1 -1 -1 -1 1 -1 -1 -1 0 -1 -1 -1"
               for i in range(1, 61)]
    path.write_text("\n".join([*HAND_SWF.splitlines()[:2], *records]) + "\n")
    return path


@pytest.fixture
def hand_trace(tmp_path: Path) -> str:
    path = tmp_path / "hand.swf"
    path.write_text(HAND_SWF)
    return str(path)


@pytest.mark.parametrize(("action", "backfill", "avg_bsld"), [
    # job 3 now (bsld (80 + 10) / 10 = 9), job 4 at 150 (bsld 1.6): (1 + 2.8 + 9 + 1.6) / 4
    (0, False, 3.6),
    # job 4 committed blocks until 150, then job 3 waits for it until 350 (bsld 34): (1 + 2.8 + 1.6 + 34) / 4
    (1, False, 9.85),
    # with the peer's backfill, job 3 (10 s < shadow 150 - 100) starts at 100 beside the blocked job 4
    (1, True, 3.6),
])
def test_hand_computed_episode(hand_trace, action, backfill, avg_bsld):
    env = PeerSchedEnv(trace=hand_trace, backfill=backfill, slots=4, reward_scale=2.0)
    obs, info = env.reset(options={"start": 0, "length": 4})
    # jobs 1 and 2 were single-job decisions, taken for the agent; job 1 started at 0 and job 2 at 100
    skipped = info["skipped_reward"]
    assert skipped == pytest.approx(-(1 + 2.8) / 4 / 2.0)
    assert env.action_masks().tolist() == [True, True, False, False, False]
    np.testing.assert_allclose(obs["jobs"][:2, 5], [1.0, 0.0])  # fits now: job 3 yes, job 4 (2 nodes) no
    np.testing.assert_allclose(obs["jobs"][:2, 3], [0.5, 1.0])  # processors / machine
    assert obs["cluster"][0, 0] == pytest.approx(0.5)  # one node of two free
    _, reward, terminated, _, info = env.step(action)
    assert terminated
    assert info["episode_metrics"]["avg_bsld"] == pytest.approx(avg_bsld)
    assert skipped + reward == pytest.approx(-avg_bsld / 2.0)  # the return is minus the metric / reward_scale


def test_masked_action_is_refused_and_changes_nothing(hand_trace):
    env = PeerSchedEnv(trace=hand_trace, slots=4)
    obs, _ = env.reset(options={"start": 0, "length": 4})
    for action in (2, 4):  # an empty slot, and Wait
        again, reward, terminated, _, info = env.step(action)
        assert info["refused"] and reward == 0.0 and not terminated
        for key in obs:
            np.testing.assert_array_equal(again[key], obs[key])


def test_bad_config_is_a_typed_error(hand_trace):
    with pytest.raises(ConfigError, match="trace"):
        PeerSchedEnv()
    with pytest.raises(ConfigError, match=r"peer_env\.sequence_jobz: unknown key"):
        PeerSchedEnv(trace=hand_trace, sequence_jobz=3)
    with pytest.raises(ConfigError, match="no sequence"):
        PeerSchedEnv(trace=hand_trace, sequence_jobs=4).reset()  # 4 jobs leave no room for a 4-job sequence
    with pytest.raises(ConfigError, match="outside"):
        PeerSchedEnv(trace=hand_trace, sequence_jobs=2).reset(options={"start": 3, "length": 2})


@pytest.mark.parametrize(("length", "test_length"), [(256, 1024), (100, 500), (1000, 50)])
def test_outside_test_sampling_never_touches_an_evaluation_window(length, test_length):
    config = PeerEnvConfig(trace="unused.swf", sequence_jobs=length, sampling="outside_test",
                           test_length=test_length)
    starts = training_starts(10_000, config)
    windows = peer_start_indices(10_000, length=test_length)
    for t in windows:
        assert not np.any((starts < t + test_length) & (starts + length > t))
    everywhere = training_starts(10_000, PeerEnvConfig(trace="unused.swf", sequence_jobs=length))
    assert np.isin(starts, everywhere).all() and 0 < starts.size < everywhere.size


@pytest.mark.parametrize("backfill", [False, True])
def test_env_actions_reproduce_the_peer_reference_on_lublin(backfill):
    require(LUBLIN)
    env = PeerSchedEnv(trace=str(LUBLIN), slots=4096, backfill=backfill)  # every queued job visible
    from baselines.rls import rls_policy

    reference = evaluate_peer(env.trace, rls_policy("sjf")[0], backfill, count=3)
    teacher = PeerTeacher("sjf")  # the imitation teacher acts through the env's actions
    for start, expected in zip(reference.start_indices, reference.avg_bsld, strict=True):
        env.reset(options={"start": start, "length": 1024})
        while env.result is None:
            env.step(teacher(env))
        assert env.result.avg_bsld == pytest.approx(expected, rel=1e-12)


def test_trained_peer_model_runs_in_the_harness_and_train_py(tmp_path, long_trace):
    config = tmp_path / "exp.yaml"
    config.write_text(
        f"env_id: gpusched/RLSched-v0\nenv: {{trace: {long_trace}, sequence_jobs: 8, slots: 8}}\n"
        "total_timesteps: 128\nn_envs: 1\nppo: {n_steps: 64, batch_size: 32, hidden: 8}\n"
        "train: {eval_every_steps: 64, eval_seeds: [1]}\neval: {heuristics: [sjf]}\n")
    run_dir = tmp_path / "run"
    train = [sys.executable, str(ROOT / "train.py"), "--run-dir", str(run_dir), "--device", "cpu", "--no-eval"]
    subprocess.run([*train, "--config", str(config), "--set", "slots=6"], cwd=ROOT, check=True, capture_output=True)
    assert yaml.safe_load((run_dir / "config.yaml").read_text())["env"]["slots"] == 6
    # a resumed run keeps the run's own settings (no --config: not the default experiment) and trains to the new total
    subprocess.run([*train, "--resume", "--total-timesteps", "192"], cwd=ROOT, check=True, capture_output=True)
    model_path = run_dir / "model.zip"
    assert MaskablePPO.load(model_path, device="cpu").num_timesteps == 192
    assert (run_dir / "best_model.zip").exists()  # saved at the first periodic evaluation
    policy = PeerModelPolicy(model_path)
    result, latencies = policy.run_window(long_trace, 10, 20)
    assert sorted(result.start_order) == list(range(20)) and len(latencies) >= 1
    evaluation = evaluate_model_peer(policy, long_trace, count=2, length=8)
    row, _, _ = run(RunSpec(f"rls:{model_path}", f"swf:{long_trace}", None, 0, 1.0,
                            (evaluation.start_indices[0], 8)))
    assert row["mean_bsld"] == pytest.approx(evaluation.avg_bsld[0])  # the harness runs the same schedule
    # shortlist decoding: ratio 1 keeps the most probable job; a ratio near 0 makes every visible job a candidate,
    # so SJF decides alone (windows of 6 jobs: the whole queue is visible in the 6 slots)
    top = PeerModelPolicy(model_path, decode=Shortlist("sjf", 1.0)).run_window(long_trace, 10, 20)[0]
    assert top.start_times == result.start_times
    # the masked probabilities (the shortlist's and the sampling benchmark's input): a distribution over the
    # allowed jobs whose most probable job is the default decoding's pick
    env = policy.env(long_trace)
    obs, _ = env.reset(options={"start": 10, "length": 20})
    probs, mask = policy.probabilities(env, obs), env.action_masks()
    assert probs.sum() == pytest.approx(1.0) and not probs[~mask].any() and mask.sum() > 1
    assert int(np.argmax(probs)) == policy.act(env, obs)
    trace = PeerSchedEnv(trace=str(long_trace)).trace
    for start in (0, 17, 30):
        sjf = run_sequence(trace.jobs[start : start + 6], trace.machine, rls_policy("sjf")[0]).avg_bsld
        row, _, _ = run(RunSpec(f"rls:{model_path}+sjf@1e-9", f"swf:{long_trace}", None, 0, 1.0, (start, 6)))
        assert row["mean_bsld"] == pytest.approx(sjf)
    with pytest.raises(ConfigError, match="peer mode"):
        run(RunSpec(str(model_path), "small", "tiny"))
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(next((run_dir / "tb").rglob("events.out.tfevents*")).parent))
    events.Reload()
    assert {"eval/avg_bsld", "eval/heuristic_avg_bsld", "rollout/ep_rew_mean"} <= set(events.Tags()["scalars"])



def test_model_policy_names_parse_with_and_without_a_shortlist_decoding(hand_trace):
    assert parse_model_name("runs/a b/model.zip") == ("runs/a b/model.zip", None)
    assert parse_model_name(" runs/x/best_model.zip+f1@0.25 ") == ("runs/x/best_model.zip", Shortlist("f1", 0.25))
    assert Shortlist("sjf", 0.5).suffix == "+sjf@0.5"
    for bad, message in [("runs/x/model.zip+sjf@0", "ratio"), ("runs/x/model.zip+sjf@1.5", "ratio"),
                         ("runs/x/model.zip+nope@0.5", "unknown"), ("runs/x/model.zip+sjf", "expected PATH.zip"),
                         ("runs/x/model.zip+sjf@1..5", "not a number"), ("runs/x/model.zip+sjf+rlsbackfill@0.5",
                                                                      "expected PATH.zip")]:
        with pytest.raises(ConfigError, match=message):
            parse_model_name(bad)
    with pytest.raises(ConfigError, match="peer-mode models"):
        run(RunSpec("runs/x/model.zip+sjf@0.5", "small", "tiny"))
    with pytest.raises(ConfigError, match=r"expected PATH\.zip"):  # a malformed suffix is named, not run as an order
        run(RunSpec("rls:runs/x/model.zip+sjf", f"swf:{hand_trace}", None, 0, 1.0, (0, 4)))


def test_train_py_evaluates_peer_models_with_their_shortlist_decodings(tmp_path, monkeypatch):
    import evaluate
    import train

    (tmp_path / "best_model.zip").write_bytes(b"")
    seen: list[list[str]] = []
    monkeypatch.setattr(evaluate, "main", lambda argv: seen.append(argv))
    final = train._final_evaluation({"decode": ["sjf@0.3"], "heuristics": ["sjf"]}, "gpusched/RLSched-v0",
                                    {"trace": "t.swf", "backfill": True})
    train._evaluate(final, tmp_path / "model.zip", tmp_path)
    policies = seen[0][seen[0].index("--policies") + 1].split(",")
    best = tmp_path / "best_model.zip"
    assert policies == [f"rls:{best}", f"rls:{best}+sjf@0.3", "rls:sjf+rlsbackfill"]  # model.zip is absent here
