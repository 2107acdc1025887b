"""Every user error is one line and exit status 2, naming what and where, in evaluate.py, train.py and the workload
inspector; evaluate.py checks everything before the first run and keeps what it ran; train.py checks its experiment
before it trains."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from paths import ROOT

import evaluate
import train
from agents.experiment import check_experiment
from envs.core import ConfigError
from envs.workload.inspect import main as inspect_main

SWF = "1 0 -1 10 2 -1 -1 2 20 -1 1 1 1 -1 -1 -1 -1 -1\n2 5 -1 30 4 -1 -1 4 40 -1 1 2 1 -1 -1 -1 -1 -1\n"
SMALL = ["--workload", "small", "--cluster", "tiny", "--seeds", "0", "--no-plots", "--workers", "1"]


def one_line(main: Callable[[list[str]], int], argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The one stderr line of ``main(argv)``, which must exit with status 2 and print nothing on stdout."""
    try:
        status = main(argv)
    except SystemExit as exc:
        status = exc.code
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert status == 2 and len(lines) == 1, (status, captured.err)
    assert captured.out == "" or captured.out.isspace()
    return lines[0]


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    """Bad inputs on disk."""
    paths = {}
    zero_and_unknown_runtime = SWF.replace(" 10 2 ", " 0 2 ", 1).replace(" 30 4 ", " -1 4 ", 1)
    for key, name, text in [
        ("malformed", "malformed.swf", SWF + "3 x\n"),
        ("skipped", "skipped.swf", zero_and_unknown_runtime),
        ("huge_swf", "huge.swf", "; MaxProcs: 1e300\n" + SWF),
        ("huge_yaml", "huge.yaml", "name: huge\nnode_groups:\n  - {count: 100000000, gpu_type: V100, gpus: 8}\n"),
    ]:
        paths[key] = tmp_path / name
        paths[key].write_text(text)
    paths["folder"] = tmp_path / "folder"
    paths["folder"].mkdir()
    (paths["folder"] / "config.yaml").write_text("env_id: gpusched/GPUCluster-Tiny-v0\ntotal_timesteps: 64\n")
    (paths["folder"] / "model.zip").write_bytes(b"\x00" * 64)
    return paths


EVALUATE_CASES = {
    "unknown policy, last of three": (["--policies", "fifo,sjf,sjff"], "policy 'sjff': unknown order 'sjff'"),
    "missing trace": (["--workload", "swf:{tmp}/nope.swf"], "nope.swf: No such file"),
    "a folder given as a trace": (["--workload", "swf:{folder}"], "folder: is a directory, not a trace"),
    "malformed trace": (["--workload", "swf:{malformed}"], "malformed.swf line 3: 2 fields"),
    "trace with no usable job": (["--workload", "swf:{skipped}", "--cluster", "swf:4"],
                                 "no jobs left after skipping: 1 unknown_runtime, 1 zero_runtime"),
    "SWF machine past the bounds": (["--workload", "swf:{huge_swf}"], "header MaxProcs '1e300' is out of range"),
    "cluster count past the bounds": (["--cluster", "{huge_yaml}"],
                                      "node_groups[0].count: input should be less than or equal to 100000"),
    "unknown cluster": (["--cluster", "tinyy"], "cluster 'tinyy': no such preset"),
    "corrupt model file": (["--policies", "{folder}/model.zip"], "not a readable model file"),
    "missing model file": (["--policies", "{tmp}/run/model.zip"], "run/model.zip: no such file"),
    "window outside the trace": (["--workload", "swf:{skipped}", "--starts", "5", "--length", "3", "--cluster",
                                  "swf:4"], "no jobs left"),
    "unwritable run folder": (["--out", "{malformed}/out"], "cannot write there"),
    "a file as the run folder": (["--out", "{malformed}"], "exists and is not a folder"),
    "no workers": (["--workers", "0"], "argument --workers: must be an integer >= 1"),
    "bad seeds": (["--seeds", "1,x"], "argument --seeds: expected comma-separated integers"),
    "bad load": (["--load", "-1"], "argument --load: load factors must be in [0.001, 1000]"),
}


@pytest.mark.parametrize("case", EVALUATE_CASES)
def test_evaluate_bad_input_is_one_line_exit_2(case, files, tmp_path, capsys):
    argv, expected = EVALUATE_CASES[case]
    names = {"tmp": tmp_path, **{k: v for k, v in files.items()}}
    argv = [a.format(**names) for a in argv]
    base = [*SMALL, "--out", str(tmp_path / "out")]
    line = one_line(evaluate.main, [*base, *argv] if "--policies" in argv else [*base, "--policies", "fifo", *argv],
                    capsys)
    assert line.startswith("evaluate.py: error: ") and expected in line


def test_evaluate_checks_every_name_before_running_anything(tmp_path, capsys):
    one_line(evaluate.main, [*SMALL, "--policies", "fifo,sjf,sjff", "--out", str(tmp_path / "out")], capsys)
    assert not (tmp_path / "out").exists()  # nothing ran, no folder made


def test_an_interrupted_evaluation_keeps_its_rows_and_a_rerun_runs_only_the_rest(tmp_path):
    out = tmp_path / "out"
    argv = [sys.executable, str(ROOT / "evaluate.py"), "--workload", "default", "--cluster", "hetero-64", "--seeds",
            "0,1,2,3,4,5", "--policies", "fifo", "--workers", "1", "--no-plots", "--out", str(out)]
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and not ((out / "runs.jsonl").exists()
                                                   and (out / "runs.jsonl").read_text().count("\n") >= 1):
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    kept = [json.loads(line)["row"]["seed"] for line in (out / "runs.jsonl").read_text().splitlines()]
    assert 1 <= len(kept) < 6
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert f"{len(kept)} of 6 runs are already in {out}" in done.stderr
    rows = list(csv.DictReader((out / "results.csv").open()))
    assert [int(r["seed"]) for r in rows] == [0, 1, 2, 3, 4, 5]
    assert len((out / "runs.jsonl").read_text().splitlines()) == 6  # each run ran once


def test_the_ray_backend_names_an_address_it_cannot_reach(capsys):
    pytest.importorskip("ray")
    line = one_line(evaluate.main, [*SMALL, "--policies", "fifo", "--backend", "ray", "--ray-address",
                                    "127.0.0.1:1"], capsys)
    assert "--ray-address 127.0.0.1:1: cannot connect" in line


# ---- train.py -----------------------------------------------------------------------------------------------
TRAIN_ARGUMENT_CASES = {
    "zero steps": (["--total-timesteps", "0"], "argument --total-timesteps: must be an integer >= 1, got 0"),
    "negative steps": (["--total-timesteps", "-5"], "argument --total-timesteps: must be an integer >= 1, got -5"),
    "no envs": (["--n-envs", "0"], "argument --n-envs: must be an integer >= 1"),
    "no threads": (["--threads", "0"], "argument --threads: must be an integer >= 1"),
    "unknown device": (["--device", "tpu"], "argument --device: must be auto, cpu, cuda, cuda:N or mps, got 'tpu'"),
    "resume without a run": (["--resume"], "argument --resume: needs --run-dir"),
}


@pytest.mark.parametrize("case", TRAIN_ARGUMENT_CASES)
def test_train_bad_arguments_are_one_line_exit_2(case, capsys):
    argv, expected = TRAIN_ARGUMENT_CASES[case]
    line = one_line(train.main, argv, capsys)
    assert line == f"train.py: error: {expected}" or (line.startswith("train.py: error: ") and expected in line)


def test_train_help_gives_each_option_its_whole_docstring(capsys):
    with pytest.raises(SystemExit):
        train.parse_args(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    for name, doc in [(f.name, train._field_doc(f.name)) for f in train.dataclasses.fields(train.Args)]:
        assert doc and doc in text, name
    assert "every core with engine vec, whose batches are large)" in text  # a docstring of three lines


EXPERIMENT_CASES = {
    "unknown top-level key": ({"total_timestep": 5}, "exp.yaml: total_timestep: unknown key"),
    "missing env id": ({"env_id": None}, "exp.yaml: env_id: input should be a valid string, got None"),
    "unknown ppo key": ({"ppo": {"n_stepz": 64}}, "exp.yaml: ppo.n_stepz: unknown key"),
    "wrong ppo type": ({"ppo": {"n_steps": "x"}}, "exp.yaml: ppo.n_steps: input should be a valid integer, got 'x'"),
    "wrong ppo number": ({"ppo": {"gamma": "high"}}, "exp.yaml: ppo.gamma: input should be a valid number, got 'high'"),
    "ppo out of range": ({"ppo": {"gamma": float("nan")}}, "exp.yaml: ppo.gamma: input should be a finite number"),
    "zero batch": ({"ppo": {"batch_size": 0}}, "exp.yaml: ppo.batch_size: input should be greater than or equal to 1"),
    "negative rate": ({"ppo": {"learning_rate": -1}}, "exp.yaml: ppo.learning_rate: input should be greater than 0"),
    "unknown train key": ({"train": {"eval_every": 5}}, "exp.yaml: train.eval_every: unknown key"),
    "wrong train type": ({"train": {"eval_seeds": [1, "a"]}}, "exp.yaml: train.eval_seeds[1]: input should be a valid"),
    "unknown pretrain key": ({"pretrain": {"teacher": "fifo", "epoch": 3}}, "exp.yaml: pretrain.epoch: unknown key"),
    "pretrain without a teacher": ({"pretrain": {"episodes": 3}}, "exp.yaml: pretrain.teacher: missing"),
    "unknown eval key": ({"eval": {"heuristic": ["fifo"]}}, "exp.yaml: eval.heuristic: unknown key"),
    "wrong total": ({"total_timesteps": 0},
                    "exp.yaml: total_timesteps: input should be greater than or equal to 1, got 0"),
}


@pytest.mark.parametrize("case", EXPERIMENT_CASES)
def test_experiment_errors_name_the_file_and_the_key(case):
    change, expected = EXPERIMENT_CASES[case]
    config = {"env_id": "gpusched/GPUCluster-Tiny-v0", "total_timesteps": 64, **change}
    with pytest.raises(ConfigError) as raised:
        check_experiment(config, "exp.yaml")
    assert expected in str(raised.value)


def experiment(tmp_path: Path, extra: str) -> Path:
    path = tmp_path / "exp.yaml"
    path.write_text("env_id: gpusched/GPUCluster-Tiny-v0\nenv: {}\ntotal_timesteps: 64\n"
                    f"ppo: {{n_steps: 64, batch_size: 32, hidden: 8}}\n{extra}")
    return path


@pytest.mark.parametrize(("extra", "expected"), [
    ("ppo_extra: 1\n", "exp.yaml: ppo_extra: unknown key"),
    ("eval: {heuristics: [fifo, sjff]}\n", "policy 'sjff': unknown order 'sjff'"),
    ("eval: {cluster: nope}\n", "cluster 'nope': no such preset"),
    ("env: {slotz: 3}\n", "exp.yaml: env.slotz: unknown key"),
    ("env_id: gpusched/Nope-v0\n", "exp.yaml: env_id: unknown id 'gpusched/Nope-v0'"),
])
def test_train_checks_the_experiment_before_it_trains(tmp_path, capsys, extra, expected):
    config = experiment(tmp_path, extra)
    if extra.startswith(("env:", "env_id:")):  # replaces the line of the same key
        key = extra.split(":")[0]
        config.write_text("\n".join(line for line in config.read_text().splitlines()
                                    if not line.startswith(f"{key}:")) + "\n" + extra)
    line = one_line(train.main, ["--config", str(config), "--run-dir", str(tmp_path / "run"), "--device", "cpu"],
                    capsys)
    assert line.startswith("train.py: error: ") and expected in line
    assert not (tmp_path / "run" / "model.zip").exists()


def test_train_exits_non_zero_when_the_final_evaluation_fails(tmp_path, capsys, monkeypatch):
    config = experiment(tmp_path, "eval: {heuristics: [fifo], seeds: [0], workload: small}\n")
    monkeypatch.setattr(evaluate, "main", lambda argv: 2)  # as evaluate.py exits on a failed run
    status = train.main(["--config", str(config), "--run-dir", str(tmp_path / "run"), "--device", "cpu"])
    assert status == 2 and (tmp_path / "run" / "model.zip").exists()
    assert "the final evaluation failed (exit status 2); the model is saved" in capsys.readouterr().err


# ---- the workload inspector ---------------------------------------------------------------------------------
@pytest.mark.parametrize(("target", "expected"), [
    ("{tmp}/nope.swf", "nope.swf: No such file"),
    ("{folder}", "is a directory, not a trace"),
    ("{malformed}", "malformed.swf line 3: 2 fields"),
    ("{huge_swf}", "header MaxProcs '1e300' is out of range"),
])
def test_inspector_bad_input_is_one_line_exit_2(target, expected, files, tmp_path, capsys):
    path = target.format(tmp=tmp_path, **files)
    line = one_line(inspect_main, [path, "--format", "swf"], capsys)
    assert line.startswith("python -m envs.workload: error: ") and expected in line


def test_debug_shows_the_traceback_instead(tmp_path):
    done = subprocess.run([sys.executable, str(ROOT / "evaluate.py"), "--policies", "sjff", "--debug"], cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode != 0 and "Traceback (most recent call last)" in done.stderr
    assert "ConfigError: policy 'sjff'" in done.stderr
