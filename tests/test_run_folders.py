"""Run folders keep every result and only current ones: no stale row reused after an input changed, no record lost
to a cut line, no two writers in one folder, no run folder overwritten by accident, no worker outliving its parent."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
from paths import ROOT

import evaluate
from envs.core import ConfigError
from envs.core.files import folder_lock, new_folder, write_atomically, write_text_atomically
from evaluation.provenance import code_version, file_digest, named_files

TINY = (ROOT / "configs" / "clusters" / "tiny.yaml").read_text()
SMALL = ["--workload", "small", "--seeds", "0", "--workers", "1", "--no-plots"]


def rows(out: Path) -> list[dict]:
    return list(csv.DictReader((out / "results.csv").open()))


def test_an_input_edited_at_the_same_path_runs_again(tmp_path, capsys):
    cluster, out = tmp_path / "site.yaml", tmp_path / "out"
    cluster.write_text(TINY)
    args = [*SMALL, "--policies", "fifo", "--cluster", str(cluster), "--out", str(out)]
    assert evaluate.main(args) == 0
    before = rows(out)[0]
    assert evaluate.main(args) == 0
    assert "1 of 1 runs are already in" in capsys.readouterr().err  # unchanged: read back
    cluster.write_text(TINY.replace("count: 1\n    gpu_type: V100", "count: 3\n    gpu_type: V100"))
    assert evaluate.main(args) == 0
    assert "already in" not in capsys.readouterr().err
    after = rows(out)[0]
    assert after["mean_wait_s"] != before["mean_wait_s"]  # two more V100 nodes (and arrivals scaled to them)


def test_a_run_names_every_file_it_reads_and_their_digests_follow_the_content(tmp_path):
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    for name in ("config.yaml", "model.zip", "checkpoints/model_8_steps.zip"):
        (run / name).write_text(name)
    assert named_files("swf:t.swf", "kubectl:nodes.json", "flaky.yaml", "pc.yaml", f"rls:{run}/model.zip+sjf@0.5") \
        == ["t.swf", "nodes.json", "flaky.yaml", "pc.yaml", f"{run}/model.zip", f"{run}/config.yaml"]
    assert named_files("small", "tiny", "none", None, str(run / "checkpoints" / "model_8_steps.zip")) \
        == [f"{run}/checkpoints/model_8_steps.zip", f"{run}/config.yaml"]
    assert named_files("default", "swf:256", "flaky", None, "sjf+easy") == []  # presets: the code version
    model = run / "model.zip"
    first = file_digest(model)
    model.write_text("other weights")
    assert file_digest(model) != first
    assert len(code_version()) == 64 and code_version() == code_version()
    with pytest.raises(ConfigError, match="cannot read"):
        file_digest(tmp_path / "missing.zip")


def test_a_cut_last_record_is_removed_before_the_next_append(tmp_path, capsys):
    out = tmp_path / "out"
    assert evaluate.main([*SMALL, "--cluster", "tiny", "--policies", "fifo", "--out", str(out)]) == 0
    with (out / "runs.jsonl").open("a") as log:
        log.write('{"key": ["sjf", "small", "ti')  # a run killed (or a disk full) mid-record
    assert evaluate.main([*SMALL, "--cluster", "tiny", "--policies", "fifo,sjf", "--out", str(out)]) == 0
    assert "removed a last record cut short" in capsys.readouterr().err
    lines = (out / "runs.jsonl").read_text().splitlines()
    assert len(lines) == 2 and all(isinstance(json.loads(line), dict) for line in lines)
    assert evaluate.main([*SMALL, "--cluster", "tiny", "--policies", "fifo,sjf", "--out", str(out)]) == 0
    assert "2 of 2 runs are already in" in capsys.readouterr().err  # neither record was lost


def test_lines_that_are_not_records_are_skipped_with_a_warning(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "runs.jsonl").write_text('[1, 2]\n"x"\n5\n{"key": 1}\n\n{"key": [], "row": [], "trace": {}, "timing": {}}\n')
    assert evaluate.main([*SMALL, "--cluster", "tiny", "--policies", "fifo", "--out", str(out)]) == 0
    assert "skipped 5 line(s) that are not run records (line 1, 2, 3, 4, 6)" in capsys.readouterr().err
    assert len(rows(out)) == 1


def test_a_second_writer_of_a_run_folder_gets_one_line(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    with folder_lock(out, "someone"):
        assert evaluate.main([*SMALL, "--cluster", "tiny", "--policies", "fifo", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--out {out}: in use by another process" in err
    assert not (out / "runs.jsonl").exists()
    assert evaluate.main([*SMALL, "--cluster", "tiny", "--policies", "fifo", "--out", str(out)]) == 0  # released


def test_new_folders_and_partial_files_never_share_a_name(tmp_path):
    base = tmp_path / "runs" / "eval-default-20261202-120000"
    assert [new_folder(base) for _ in range(3)] == [base, base.with_name(base.name + "-2"),
                                                    base.with_name(base.name + "-3")]
    target, seen = tmp_path / "summary.json", []

    def outer(partial: Path) -> None:
        seen.append(partial)
        write_atomically(target, lambda inner: (seen.append(inner), inner.write_text("inner")))
        partial.write_text("outer")

    write_atomically(target, outer)
    assert seen[0] != seen[1] and all(p.parent == tmp_path and p.name.endswith(".partial") for p in seen)
    assert target.read_text() == "outer" and sorted(p.name for p in tmp_path.iterdir()) == ["runs", "summary.json"]
    with pytest.raises(ConfigError, match=f"{tmp_path / 'nowhere' / 'x.txt'}: cannot write"):
        write_text_atomically(tmp_path / "nowhere" / "x.txt", "text")


EXPERIMENT = ("env_id: gpusched/GPUCluster-Tiny-v0\nenv: {}\ntotal_timesteps: 256\nn_envs: 1\n"
              "ppo: {n_steps: 128, batch_size: 64, hidden: 8}\ntrain: {checkpoint_every_steps: 128}\n")


def train(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "train.py"), "--device", "cpu", "--no-eval",
                           "--no-progress", *args], cwd=ROOT, capture_output=True, text=True)


def test_train_refuses_an_existing_run_folder_unless_resumed_or_overwritten(tmp_path):
    config, run = tmp_path / "exp.yaml", tmp_path / "run"
    config.write_text(EXPERIMENT)
    assert train("--config", str(config), "--run-dir", str(run)).returncode == 0
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["model_128_steps.zip", "model_256_steps.zip"]
    model = (run / "model.zip").read_bytes()
    again = train("--config", str(config), "--run-dir", str(run))
    assert again.returncode == 2 and again.stderr.count("\n") == 1
    assert "holds a run already; --resume continues it, --overwrite clears it" in again.stderr
    assert (run / "model.zip").read_bytes() == model
    other = tmp_path / "notes"
    other.mkdir()
    (other / "keep.txt").write_text("mine")
    refused = train("--config", str(config), "--run-dir", str(other), "--overwrite")
    assert refused.returncode == 2 and "nothing was removed" in refused.stderr
    assert (other / "keep.txt").read_text() == "mine"
    assert [p.name for p in other.iterdir()] == ["keep.txt"]  # not even a lock file left in a folder it refused
    cleared = train("--config", str(config), "--run-dir", str(run), "--overwrite", "--total-timesteps", "128")
    assert cleared.returncode == 0, cleared.stderr
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["model_128_steps.zip"]  # none of the old


def test_a_resumed_copy_logs_into_its_own_folder_whatever_the_model_file_says(tmp_path):
    config, run = tmp_path / "exp.yaml", tmp_path / "run"
    config.write_text(EXPERIMENT)
    assert train("--config", str(config), "--run-dir", str(run), "--total-timesteps", "128").returncode == 0
    copy, elsewhere = tmp_path / "copy", tmp_path / "elsewhere"
    subprocess.run(["cp", "-r", str(run), str(copy)], check=True)
    model = copy / "model.zip"
    with zipfile.ZipFile(model) as archive:  # a crafted entry pointing anywhere
        entries = {name: archive.read(name) for name in archive.namelist()}
    data = json.loads(entries["data"])
    data["tensorboard_log"] = str(elsewhere)
    entries["data"] = json.dumps(data).encode()
    with zipfile.ZipFile(model, "w") as archive:
        for name, content in entries.items():
            archive.writestr(name, content)
    original = sorted(p.name for p in (run / "tb").rglob("*"))
    copied = len(list((copy / "tb").rglob("events.out.tfevents*")))
    done = train("--run-dir", str(copy), "--resume", "--total-timesteps", "256")
    assert done.returncode == 0, done.stderr
    assert not elsewhere.exists() and sorted(p.name for p in (run / "tb").rglob("*")) == original
    assert len(list((copy / "tb").rglob("events.out.tfevents*"))) > copied


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        stat = (Path("/proc") / str(pid) / "stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process table from /proc (Linux)")
def test_workers_exit_when_their_parent_is_killed(tmp_path):
    parent = subprocess.Popen([sys.executable, str(ROOT / "evaluate.py"), "--policies", "slurm", "--seeds", "0,1",
                               "--workers", "2", "--no-plots", "--out", str(tmp_path / "out")], cwd=ROOT,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    workers: list[int] = []
    while len(workers) < 2 and time.monotonic() < deadline and parent.poll() is None:
        time.sleep(0.2)
        workers = _children(parent.pid)
    assert len(workers) >= 2, "the pool's workers did not start"
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 10
    while any(_alive(w) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(w) for w in workers)
