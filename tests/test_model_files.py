"""Model files and training runs lose nothing and run nothing: doctored model files are loaded (or refused) through
every path without running what they pickle, saves are atomic, and a killed train.py resumes from its newest
checkpoint."""

from __future__ import annotations

import base64
import json
import os
import pickle
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import cloudpickle
import pytest
from paths import ROOT

from agents import load
from agents.model_file import load_model, run_config, save_model
from envs.core import ConfigError
from evaluation.runner import RunSpec, run

TINY = ("env_id: gpusched/GPUCluster-Tiny-v0\nenv: {{}}\ntotal_timesteps: {total}\nn_envs: 1\n"
        "ppo: {{n_steps: 64, batch_size: 32, hidden: 8}}\ntrain: {{checkpoint_every_steps: {every}}}\n")
PEER_SWF = "\n".join(["; MaxNodes: 2", "; MaxProcs: 2"] + [
    f"{i} {20 * i} -1 {10 + 37 * i % 90} {1 + i % 2} -1 -1 -1 -1 -1 1 -1 -1 -1 0 -1 -1 -1" for i in range(1, 41)
]) + "\n"


def train_py(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "train.py"), "--device", "cpu", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)


def evaluate_py(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "evaluate.py"), "--no-plots", "--workers", "1", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory) -> Path:
    """A run folder of a 64-step GPUCluster-Tiny-v0 model."""
    folder = tmp_path_factory.mktemp("tiny")
    (folder / "exp.yaml").write_text(TINY.format(total=64, every=64))
    done = train_py("--config", str(folder / "exp.yaml"), "--run-dir", str(folder / "run"), "--no-eval")
    assert done.returncode == 0, done.stderr
    return folder / "run"


@pytest.fixture(scope="module")
def peer_run(tmp_path_factory) -> tuple[Path, Path]:
    """(run folder of a 64-step RLSched-v0 model, its SWF trace)."""
    folder = tmp_path_factory.mktemp("peer")
    trace = folder / "t.swf"
    trace.write_text(PEER_SWF)
    (folder / "exp.yaml").write_text(
        f"env_id: gpusched/RLSched-v0\nenv: {{trace: {trace}, sequence_jobs: 8, slots: 4}}\ntotal_timesteps: 64\n"
        "ppo: {n_steps: 64, batch_size: 32, hidden: 8}\n")
    done = train_py("--config", str(folder / "exp.yaml"), "--run-dir", str(folder / "run"), "--no-eval")
    assert done.returncode == 0, done.stderr
    return folder / "run", trace


class CreatesFile:
    """Unpickled, it creates a file: what a hostile model file could do instead."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def __reduce__(self) -> tuple:
        return (open, (self.path, "w"))


def doctored(run_dir: Path, marker: Path, extra: bool) -> Path:
    """A copy of the run folder whose model.zip pickles :class:`CreatesFile` in every pickled entry (and, with
    ``extra``, in an entry the project does not know)."""
    copy = run_dir.parent / f"{run_dir.name}-doctored-{'extra' if extra else 'known'}"
    copy.mkdir(exist_ok=True)
    (copy / "config.yaml").write_text((run_dir / "config.yaml").read_text())
    payload = base64.b64encode(pickle.dumps(CreatesFile(marker))).decode()
    with zipfile.ZipFile(run_dir / "model.zip") as source, zipfile.ZipFile(copy / "model.zip", "w") as target:
        for name in source.namelist():
            content = source.read(name)
            if name == "data":
                data = json.loads(content)
                for value in data.values():
                    if isinstance(value, dict) and ":serialized:" in value:
                        value[":serialized:"] = payload
                if extra:
                    data["hostile_entry"] = {":type:": "<class 'object'>", ":serialized:": payload}
                content = json.dumps(data).encode()
            target.writestr(name, content)
    return copy / "model.zip"


def test_the_doctored_payload_would_run_if_unpickled(tmp_path):
    marker = tmp_path / "created"
    cloudpickle.loads(base64.b64decode(base64.b64encode(pickle.dumps(CreatesFile(marker)))))
    assert marker.exists()  # so the tests below would see it if any load unpickled it


def test_doctored_entries_are_rebuilt_on_every_path_and_nothing_runs(tiny_run, peer_run, tmp_path):
    marker = tmp_path / "created"
    model = doctored(tiny_run, marker, extra=False)
    policy = load(model)  # agents.load
    assert policy.model.num_timesteps == 64 and policy.model.policy_class.__name__ == "SlotPolicy"
    row, _, _ = run(RunSpec(str(model), "small", "tiny", seed=1))  # an evaluate.py policy
    assert row["n_completed"] == row["n_jobs"] > 0
    done = evaluate_py("--policies", str(model), "--workload", "small", "--cluster", "tiny", "--seeds", "0",
                       "--out", str(tmp_path / "eval"))
    assert done.returncode == 0, done.stderr
    done = train_py("--run-dir", str(model.parent), "--resume", "--total-timesteps", "128", "--no-eval")
    assert done.returncode == 0 and "resumed from" in done.stdout, done.stderr
    peer_model = doctored(peer_run[0], marker, extra=False)
    row, _, _ = run(RunSpec(f"rls:{peer_model}", f"swf:{peer_run[1]}", None, 0, 1.0, (0, 8)))  # an rls: model
    assert row["n_completed"] == 8
    assert not marker.exists()


def test_a_pickled_entry_the_project_cannot_rebuild_makes_every_path_refuse(tiny_run, peer_run, tmp_path):
    marker = tmp_path / "created"
    model = doctored(tiny_run, marker, extra=True)
    refusal = "entry 'hostile_entry' holds pickled code that the project cannot rebuild"
    with pytest.raises(ConfigError, match=refusal):
        load(model)
    done = evaluate_py("--policies", str(model), "--workload", "small", "--cluster", "tiny", "--seeds", "0")
    assert done.returncode == 2 and refusal in done.stderr and len(done.stderr.strip().splitlines()) == 1
    done = train_py("--run-dir", str(model.parent), "--resume", "--no-eval")
    assert done.returncode == 2 and refusal in done.stderr and len(done.stderr.strip().splitlines()) == 1
    with pytest.raises(ConfigError, match=refusal):
        run(RunSpec(f"rls:{doctored(peer_run[0], marker, extra=True)}", f"swf:{peer_run[1]}", None, 0, 1.0, (0, 8)))
    assert not marker.exists()


@pytest.mark.parametrize("damage", ["garbage", "truncated", "no data"])
def test_a_corrupt_model_file_is_a_one_line_error_naming_it(tiny_run, tmp_path, damage):
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "config.yaml").write_text((tiny_run / "config.yaml").read_text())
    content = (tiny_run / "model.zip").read_bytes()
    model = folder / "model.zip"
    if damage == "garbage":
        model.write_bytes(b"not a zip file at all")
    elif damage == "truncated":
        model.write_bytes(content[: len(content) // 2])
    else:
        with zipfile.ZipFile(tiny_run / "model.zip") as source, zipfile.ZipFile(model, "w") as target:
            for name in source.namelist():
                if name != "data":
                    target.writestr(name, source.read(name))
    with pytest.raises(ConfigError, match=rf"model {model}: not a readable model file"):
        load_model(model, run_config(model))
    done = evaluate_py("--policies", str(model), "--workload", "small", "--cluster", "tiny", "--seeds", "0")
    assert done.returncode == 2 and "not a readable model file" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_a_save_cut_short_leaves_the_previous_model_intact(tiny_run, tmp_path, monkeypatch):
    model = load_model(tiny_run / "model.zip", run_config(tiny_run / "model.zip"))
    path = tmp_path / "model.zip"
    save_model(model, path)
    before = path.read_bytes()

    def killed_midway(target: str) -> None:
        Path(target).write_bytes(before[:100])  # half a file, then the process dies
        raise KeyboardInterrupt

    monkeypatch.setattr(model, "save", killed_midway)
    with pytest.raises(KeyboardInterrupt):
        save_model(model, path)
    assert path.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["model.zip"]


def test_a_killed_training_run_resumes_from_its_newest_checkpoint_to_its_total(tmp_path):
    config = tmp_path / "exp.yaml"
    config.write_text(TINY.format(total=100_000, every=64))
    run_dir = tmp_path / "run"
    checkpoints = run_dir / "checkpoints"
    proc = subprocess.Popen([sys.executable, str(ROOT / "train.py"), "--config", str(config), "--run-dir",
                             str(run_dir), "--device", "cpu", "--no-eval"], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 240
        while not list(checkpoints.glob("model_*_steps.zip")) and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    saved = sorted(int(p.name.split("_")[1]) for p in checkpoints.glob("model_*_steps.zip"))
    assert saved and not (run_dir / "model.zip").exists()
    total = saved[-1] + 192
    done = train_py("--run-dir", str(run_dir), "--resume", "--total-timesteps", str(total), "--no-eval")
    assert done.returncode == 0, done.stderr
    assert f"resumed from {checkpoints / f'model_{saved[-1]}_steps.zip'} ({saved[-1]:,} steps" in done.stdout
    assert f"trained {total - saved[-1]:,} steps" in done.stdout
    assert load_model(run_dir / "model.zip", run_config(run_dir / "model.zip")).num_timesteps == total


def test_resume_needs_a_run_folder_with_a_config_and_a_model(tmp_path):
    done = train_py("--run-dir", str(tmp_path), "--resume")
    assert done.returncode == 2 and done.stderr.strip() == f"train.py: error: --resume: {tmp_path} has no " \
                                                           "config.yaml (not a train.py run folder)"
    (tmp_path / "config.yaml").write_text(TINY.format(total=64, every=64))
    done = train_py("--run-dir", str(tmp_path), "--resume")
    assert done.returncode == 2 and done.stderr.strip() == f"train.py: error: --resume: {tmp_path} has no " \
                                                           "model.zip and no checkpoint to continue from"


@pytest.mark.parametrize("entry, value", [("n_steps", "x"), ("rollout_buffer_kwargs", 5), ("gamma", [1]),
                                          ("num_timesteps", {"a": 1})])
def test_a_model_file_entry_of_the_wrong_type_is_a_one_line_error(tiny_run, tmp_path, entry, value):
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "config.yaml").write_text((tiny_run / "config.yaml").read_text())
    model = folder / "model.zip"
    with zipfile.ZipFile(tiny_run / "model.zip") as source, zipfile.ZipFile(model, "w") as target:
        for name in source.namelist():
            content = source.read(name)
            if name == "data":
                content = json.dumps({**json.loads(content), entry: value}).encode()
            target.writestr(name, content)
    with pytest.raises(ConfigError, match=rf"model {model}: "):
        run(RunSpec(str(model), "small", "tiny", seed=0))


def test_a_run_config_that_is_not_utf8_is_a_one_line_error(tiny_run, tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "config.yaml").write_bytes(b"env_id: \xff\xfe\n")
    (folder / "model.zip").write_bytes((tiny_run / "model.zip").read_bytes())
    with pytest.raises(ConfigError, match="not UTF-8"):
        run_config(folder / "model.zip")
