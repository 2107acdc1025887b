"""Bounded inputs: every number read by one strict rule, every time, rate, size and nesting bounded at load time with
a one-line error, so that no input hangs a run, runs away with memory or ends in a traceback."""

from __future__ import annotations

import io
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from paths import ROOT

import envs  # noqa: F401  (registers the ids)
from envs.core.dynamics import DynamicsConfig
from envs.core.errors import ActionRefused, ConfigError, JobSpecError, TraceFormatError
from envs.core.files import MAX_YAML_BYTES, parse_yaml, read_yaml
from envs.core.job import Job
from envs.core.numbers import decimal, integer
from envs.gymenv import EnvConfig
from envs.workload.loaders import load_trace
from envs.workload.operators.slurm_nodes import expand_hostlist

SWF_OK = "1 0 -1 100 1 -1 -1 1 100 -1 1 1 1 -1 1 -1 -1 -1"


@pytest.mark.parametrize("text", ["3_0", "٣", "²", "inf", "nan", " 1", "1 ", "0x10", "1e", "", "+", "1,5",
                                  "9" * 5000])
def test_a_number_is_plain_ascii(text):
    assert decimal(text) is None and integer(text) is None


def test_plain_numbers_read_as_python_reads_them():
    assert [decimal(t) for t in ("12", "-1.5", ".5", "12.", "1e3", "+2E-2")] == [12.0, -1.5, 0.5, 12.0, 1e3, 0.02]
    assert decimal("1e999") == float("inf")  # syntactically a number: callers refuse it as not finite
    assert [integer(t) for t in ("0", "-7", "+42", "9" * 18)] == [0, -7, 42, int("9" * 18)]
    assert integer("1.0") is None and integer("9" * 19) is None


@pytest.mark.parametrize("record, fragment", [
    (SWF_OK.replace("100 1 -1", "1_00 1 -1", 1), "(run time) '1_00' is not a number"),
    (SWF_OK.replace("1 0 -1 100", "1 1e308 -1 100", 1), "submit_time_s: must be in [0, 1e+10]"),
    (SWF_OK.replace("1 0 -1 100", "1 0 -1 1e308", 1), "runtime_s: must be in [0, 1e+10]"),
    (SWF_OK.replace("1 0 -1", "1 ٣ -1", 1), "is not a number"),
])
def test_swf_fields_follow_the_number_rule_and_the_time_bound(tmp_path, record, fragment):
    path = tmp_path / "t.swf"
    path.write_text(record + "\n")
    with pytest.raises(TraceFormatError, match=re.escape(fragment)):
        load_trace(path, "swf")


def test_huge_or_non_finite_job_fields_are_refused():
    base = {"job_id": 1, "submit_time_s": 0.0, "runtime_s": 1.0, "runtime_estimate_s": 1.0, "n_gpus": 1}
    for field, value in [("submit_time_s", 1e308), ("runtime_s", float("nan")), ("cpu_milli_per_gpu", 10**23),
                         ("priority", 10**23), ("gpu_mem_gib", float("inf")), ("n_gpus", 10**9)]:
        with pytest.raises(JobSpecError, match=field):
            Job(**{**base, field: value})


@pytest.mark.parametrize("failures, outages, fragment", [
    ({"node_mtbf_s": 0.001}, {}, "failures.node_mtbf_s: must be in [60, 1e+10] s or .inf, got 0.001"),
    ({"gpu_mtbf_s": {"A100": 1e300}}, {}, "failures.gpu_mtbf_s.A100: must be in [60, 1e+10] s or .inf"),
    ({"mttr_s": 0.001}, {}, "failures.mttr_s: input should be greater than or equal to 1, got 0.001"),
    ({}, {"mttr_s": 1e300}, "outages.mttr_s: input should be less than or equal to 10000000000, got 1e+300"),
    ({}, {"windows": [[0, 1e300]]}, "outages.windows[0][1]: input should be less than or equal to 10000000000"),
    ({"schedule": [{"node": 0, "fail_s": 1e300, "repair_s": 10}]}, {}, "schedule[0].fail_s: input should be less"),
])
def test_scenario_times_and_rates_are_bounded(failures, outages, fragment):
    with pytest.raises(ConfigError, match=re.escape(fragment)):
        DynamicsConfig.from_dict({"failures": failures, "outages": outages}, name="odd")


BILLION_LAUGHS = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{b}: &{b} [{', '.join([f'*{a}'] * 9)}]\n" for a, b in zip("abcdefgh", "bcdefghi", strict=True))


@pytest.mark.parametrize("text, fragment", [
    (BILLION_LAUGHS, "more than 1,000,000 values with its aliases expanded"),
    ("a: &x [1, *x]", "an alias refers to a value that contains it"),
    ("name: one\nname: two", "key 'name' is given twice"),
    ("[" * 50_000, "nested too deeply"),
    ("x: !!python/object/apply:os.system [echo]", "could not determine a constructor"),
])
def test_yaml_that_would_run_away_or_mislead_is_refused(text, fragment):
    with pytest.raises(ConfigError, match=fragment):
        parse_yaml(text, "odd.yaml", "scenario file")


def test_yaml_keeps_merge_keys_and_shared_anchors():
    text = "base: &b {x: 1}\nother: {<<: *b, x: 2}\nboth: [*b, *b]"
    assert parse_yaml(text, "f", "file") == {"base": {"x": 1}, "other": {"x": 2}, "both": [{"x": 1}, {"x": 1}]}


def test_files_that_never_end_or_are_too_large_are_refused(tmp_path):
    with pytest.raises(ConfigError, match="not a regular file"):
        read_yaml("/dev/zero", "cluster file")
    big = tmp_path / "big.yaml"
    big.write_bytes(b"#" * (MAX_YAML_BYTES + 1))
    with pytest.raises(ConfigError, match="larger than"):
        read_yaml(big, "cluster file")
    with pytest.raises(ConfigError, match="not a regular file"):
        load_trace("/dev/zero", "swf")


def test_a_hostlist_product_is_bounded():
    with pytest.raises(TraceFormatError, match="names more than 100,000 nodes"):
        expand_hostlist("x[0-99999]y[0-99999]", "f", 1)
    with pytest.raises(TraceFormatError, match="names more than 100,000 nodes"):
        expand_hostlist("x[0-60000,0-60000]", "f", 1)
    with pytest.raises(TraceFormatError, match="is not N or N-M"):
        expand_hostlist("x[٣]", "f", 1)
    assert expand_hostlist("x[0-1]y[0-1]", "f", 1) == ["x0y0", "x0y1", "x1y0", "x1y1"]


def test_a_model_file_that_unpacks_to_too_much_is_refused_unread(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("env_id: gpusched/GPUCluster-Tiny-v0\n")
    with zipfile.ZipFile(run / "model.zip", "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("data", b" " * (17 * 2**20))  # 17 MiB of spaces: a few KiB compressed
    from agents.model_file import pickled_entries

    with pytest.raises(ConfigError, match="more than a model file holds"):
        pickled_entries(run / "model.zip")
    nested = io.BytesIO()
    with zipfile.ZipFile(nested, "w") as archive:
        archive.writestr("data", "[" * 100_000 + "]" * 100_000)
    (run / "deep.zip").write_bytes(nested.getvalue())
    with pytest.raises(ConfigError, match="not a readable model file"):
        pickled_entries(run / "deep.zip")


def test_the_batched_engine_refuses_what_the_event_env_refuses():
    from envs.vec import VecClusterEnv

    config = EnvConfig(cluster="tiny", workload="whole-gpu", episode_jobs=16, slots=4)
    with pytest.raises(ConfigError, match=re.escape("num_envs must be in 1..65,536")):
        VecClusterEnv(config, 10**8)
    env = VecClusterEnv(config, 2, workloads=2)
    _, mask = env.reset()
    legal, n = mask.int().argmax(1), mask.shape[1]
    for bad in (legal.float(), legal.numpy(), legal[:1], legal.bool()):
        with pytest.raises(TypeError, match="one integer per cluster"):
            env.step(bad)
    with pytest.raises(ActionRefused, match="cluster 0: action -1 is outside"):
        env.step(torch.tensor([-1, int(legal[1])]))
    with pytest.raises(ActionRefused, match=re.escape(f"cluster 1: action {n} is outside 0..{n - 1}")):
        env.step(torch.tensor([int(legal[0]), n]))
    masked = torch.tensor([int(np.flatnonzero(~row.numpy())[0]) for row in mask])
    with pytest.raises(ActionRefused, match=f"cluster 0: action {int(masked[0])} is masked"):
        env.step(masked)
    env.step(legal)  # nothing was applied by the refused calls: a legal step still runs


def test_step_after_the_episode_ended_is_an_error():
    env = gym.make("gpusched/GPUCluster-Tiny-v0").unwrapped
    env.reset(seed=0)
    terminated = False
    for _ in range(10_000):  # a tiny episode ends well before
        mask = env.action_masks()
        _, _, terminated, _, _ = env.step(int(np.flatnonzero(mask)[0]))
        if terminated:
            break
    assert terminated
    with pytest.raises(RuntimeError, match="after the episode ended"):
        env.step(0)


@pytest.mark.parametrize("args, fragment", [
    (["--load", "1e-300"], "load factors must be in [0.001, 1000]"),
    (["--load", "inf"], "expected comma-separated numbers"),
    (["--seeds", "-1"], "integers in 0..2^63-1"),
    (["--seeds", "٣"], "integers in 0..2^63-1"),
    (["--workers", "1_0"], "must be an integer >= 1"),
])
def test_evaluate_refuses_absurd_numbers_before_running(args, fragment):
    done = subprocess.run([sys.executable, str(ROOT / "evaluate.py"), *args], cwd=ROOT, capture_output=True,
                          text=True)
    assert done.returncode == 2 and fragment in done.stderr and done.stderr.count("\n") == 1


def test_train_refuses_a_seed_beyond_64_bits():
    done = subprocess.run([sys.executable, str(ROOT / "train.py"), "--seed", str(2**70)], cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 2 and "--seed: must be an integer >= 0" in done.stderr


def test_json_nesting_in_a_node_file_is_one_line(tmp_path):
    path = tmp_path / "nodes.json"
    path.write_text('{"items": [' + "[" * 100_000 + "]" * 100_000 + "]}")  # valid JSON, nested past the stack
    from envs.workload.operators.kubectl_nodes import read_kubectl_nodes

    with pytest.raises(TraceFormatError, match="nested too deeply"):
        read_kubectl_nodes(path)


def test_a_policy_that_cycles_at_one_instant_ends_with_simulation_stalled():
    from envs.core.errors import SimulationStalled
    from envs.core.presets import load_preset
    from envs.sim.loop import MIN_ACTIONS_PER_INSTANT, simulate
    from envs.sim.policy import Preempt, Start

    class Cycle:
        """Starts the job, preempts it, starts it again, at the same instant for ever."""

        name = "cycle"

        def reset(self) -> None:
            pass

        def act(self, view):
            return Start(1, [0]) if view.pending else Preempt(1)

    job = Job(job_id=1, submit_time_s=0.0, runtime_s=100.0, runtime_estimate_s=100.0, n_gpus=1, preemptible=True)
    with pytest.raises(SimulationStalled, match=f"took {MIN_ACTIONS_PER_INSTANT + 1:,} actions at simulated time 0"):
        simulate(load_preset("tiny"), [job], Cycle())


EXPORTS = ROOT / "tests" / "data" / "exports"


def _export(tmp_path, name: str, old: str, new: str) -> Path:
    path = tmp_path / name
    text = (EXPORTS / name).read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))
    return path


@pytest.mark.parametrize("name, old, new, fragment", [
    ("scontrol_nodes.txt", "CPUTot=64", "CPUTot=1e300", "CPUTot '1e300' is out of range"),
    ("sinfo_nodes.txt", " 32 256000 ", " 1e300 256000 ", "CPUS '1e300' is out of range"),
    ("kubectl_nodes.json", '"cpu": "95500m"', '"cpu": "1e99999"', "cpu '1e99999' is out of range"),
    ("sacct.txt", "mem=120G", "mem=9999999999999999999999G", "mem '9999999999999999999999G' is not a size"),
    ("sacct.txt", "|02:00:00|", "|99999999-00:00:00|", "is not [days-]hours:minutes:seconds (at most 1e+10 s)"),
    ("helios_cluster_log.csv", ",3600,", ",1e308,", "duration '1e308' is out of range"),
])
def test_huge_numbers_in_exports_are_one_line_errors(tmp_path, name, old, new, fragment):
    from envs.workload.operators.kubectl_nodes import read_kubectl_nodes
    from envs.workload.operators.slurm_nodes import read_scontrol_nodes, read_sinfo_nodes

    readers = {"scontrol_nodes.txt": read_scontrol_nodes, "sinfo_nodes.txt": read_sinfo_nodes,
               "kubectl_nodes.json": read_kubectl_nodes, "sacct.txt": lambda p: load_trace(p, "sacct"),
               "helios_cluster_log.csv": lambda p: load_trace(p, "helios")}
    with pytest.raises(TraceFormatError, match=re.escape(fragment)):
        readers[name](_export(tmp_path, name, old, new))


def test_a_non_ascii_gpu_count_is_not_a_count(tmp_path):
    from envs.workload.operators.kubectl_nodes import read_kubectl_nodes

    text = (EXPORTS / "kubectl_nodes.json").read_text()
    path = tmp_path / "nodes.json"
    path.write_text(text.replace('"nvidia.com/gpu": "8"', '"nvidia.com/gpu": "٣"', 1))
    with pytest.raises(TraceFormatError, match="is not a whole number >= 0"):
        read_kubectl_nodes(path)


def test_a_tiresias_trace_with_huge_times_is_one_line(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n0,1,1e308,6,vgg19,164,30\n")
    with pytest.raises(TraceFormatError, match=re.escape("submit_time '1e308' is out of range")):
        load_trace(path, "tiresias")


@pytest.mark.parametrize("data, fragment", [
    ({"constraints": {"cpu_milli_per_gpu": 10**23}}, "constraints.cpu_milli_per_gpu: must be at most 1e+09"),
    ({"priority_classes": [{"name": "a", "priority": 10**23, "share": 1.0, "preemptible_share": 0.0}]},
     "priority: must be an integer within ±1,000,000,000"),
    ({"users": {"n_users": 10**9}}, "users.n_users: must be at most 1,000,000"),
    ({"n_jobs": 10_000_000}, "n_jobs: must be at most 1,000,000"),
    ({"target_load": 1e-300}, "target_load: must be in [0.001, 100]"),
])
def test_absurd_workload_configs_are_refused(data, fragment):
    from envs.workload.synthetic_config import SyntheticConfig

    with pytest.raises(ConfigError, match=re.escape(fragment)):
        SyntheticConfig.from_dict(data)


@pytest.mark.parametrize("group, extra, fragment", [
    ({"cpus": float("inf")}, {}, "node_groups[0].cpus: input should be a finite number"),
    ({"ram_gib": 1e300}, {}, "node_groups[0].ram_gib: input should be less than or equal to 1000000"),
    ({"cpus": float("nan")}, {}, "node_groups[0].cpus: input should be a finite number"),
    ({}, {"gpu_types": {"X": {"memory_gib": 8, "speed": float("inf")}}}, "gpu_types.X.speed: input should be a finite"),
    ({}, {"mig_reconfig_s": 1e300}, "mig_reconfig_s: input should be less than or equal to 86400"),
])
def test_absurd_cluster_numbers_are_refused(group, extra, fragment):
    from envs.core.presets import cluster_from_dict

    data = {"name": "c", "node_groups": [{"count": 1, "gpu_type": "V100", "gpus": 4, **group}], **extra}
    with pytest.raises(ConfigError, match=re.escape(f"c.yaml: {fragment}")):
        cluster_from_dict(data, where="c.yaml")


@pytest.mark.parametrize("slurm, fragment", [
    ([1], "p.yaml: slurm: input should be a valid dictionary, got [1]"),
    ({"QOS": ["a", "b"]}, "slurm: QOS: input should be a valid dictionary"),
    ({"QOS": {"high": {"Preempt": 5}}}, "QOS.high.Preempt: input should be a valid string"),
])
def test_policy_config_shapes_are_checked(slurm, fragment):
    from baselines.config import policy_config_from_dict

    with pytest.raises(ConfigError, match=re.escape(fragment)):
        policy_config_from_dict({"slurm": slurm}, where="p.yaml")


def test_an_infinite_reward_weight_is_refused():
    with pytest.raises(ConfigError, match=re.escape("env.reward_weights.wait: must be a number within ±1e+06")):
        EnvConfig(reward_weights={"wait": float("inf")})


def test_reset_options_are_checked():
    env = gym.make("gpusched/GPUCluster-Tiny-v0").unwrapped
    with pytest.raises(TypeError, match="expected a Workload"):
        env.reset(options={"workload": "x"})
    with pytest.raises(TypeError, match="unknown option"):
        env.reset(options={"workloads": []})


def test_a_device_file_given_as_a_model_is_refused():
    from agents.model_file import check_archive

    with pytest.raises(ConfigError, match="not a file"):
        check_archive("/dev/zero")


@pytest.mark.parametrize("args, fragment", [
    (["evaluate.py", "--ray-address", "localhost:6379"], "argument --ray-address: applies only with --backend ray"),
    (["-m", "baselines", "--anything"], "unrecognized arguments: --anything"),
    (["train.py", "--device", "cuda", "--no-eval"], "--device cuda: this machine has 0 CUDA device(s)"),
])
def test_arguments_are_not_ignored_without_a_word(args, fragment):
    if "cuda" in args and torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device")
    command = [sys.executable, *(str(ROOT / a) if a.endswith(".py") else a for a in args)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 2 and fragment in done.stderr
