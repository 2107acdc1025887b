"""Training sweeps (``train.py --sweep``, agents/sweep.py): the sweep file's checks, seeded random draws, the
one-line error without Ray, and on local Ray Tune a two-trial training sweep (run folders, summary tables,
TensorBoard HParams, a rerun that trains nothing again), ASHA stopping the worse of two scripted trials, and a
failed trial named, then tried again by a rerun."""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import pytest
import yaml

import train
from agents.sweep import RunTrial, TrialRun, run_sweep
from agents.sweep_plan import read_sweep
from envs.core import ConfigError

EXPERIMENT = ("env_id: gpusched/GPUCluster-Tiny-v0\nenv: {}\ntotal_timesteps: 256\nn_envs: 1\n"
              "ppo: {n_steps: 128, batch_size: 64, hidden: 16}\n"
              "train: {eval_every_steps: 128, eval_seeds: [5], checkpoint_every_steps: 128}\n")
"""A tiny experiment: two rollouts of 128 steps, validated after each on one episode."""


def files(tmp_path: Path, sweep: str, experiment: str = EXPERIMENT) -> tuple[Path, Path]:
    """The sweep file ``s.yaml`` and the experiment ``exp.yaml`` in ``tmp_path``."""
    (tmp_path / "s.yaml").write_text(sweep)
    (tmp_path / "exp.yaml").write_text(experiment)
    return tmp_path / "s.yaml", tmp_path / "exp.yaml"


SWEEP_ERRORS = {
    "unknown key": ("seedz: [0]\n", "s.yaml: seedz: unknown key"),
    "no seeds": ("grid: {ppo.n_epochs: [1]}\n", "s.yaml: seeds: missing"),
    "seed not an integer": ("seeds: [0, a]\n", "s.yaml: seeds[1]: input should be a valid integer, got 'a'"),
    "seed twice": ("seeds: [1, 1]\n", "s.yaml: seeds: 1 is given twice"),
    "key outside ppo and env": ("seeds: [0]\ngrid: {train.eval_every_steps: [64]}\n",
                                "s.yaml: grid.train.eval_every_steps: a swept key is ppo.NAME or env.NAME"),
    "unknown ppo key": ("seeds: [0]\ngrid: {ppo.lr: [0.1]}\n", "s.yaml: ppo.lr: unknown key"),
    "wrong ppo value": ("seeds: [0]\ngrid: {ppo.n_steps: [64, x]}\n",
                        "s.yaml: ppo.n_steps: input should be a valid integer, got 'x'"),
    "unknown env key": ("seeds: [0]\ngrid: {env.slotz: [3]}\n", "s.yaml: env.slotz: unknown key"),
    "empty grid values": ("seeds: [0]\ngrid: {ppo.n_epochs: []}\n",
                          "s.yaml: grid.ppo.n_epochs: list should have at least 1 item"),
    "two kinds of draw": ("seeds: [0]\nrandom: {samples: 2, space: {ppo.gamma: {uniform: [0.9, 1], choice: [1]}}}\n",
                          "s.yaml: random.space.ppo.gamma: give exactly one of uniform, log_uniform, integer, choice"),
    "low above high": ("seeds: [0]\nrandom: {samples: 2, space: {ppo.gamma: {uniform: [1, 0.9]}}}\n",
                       "s.yaml: random.space.ppo.gamma: uniform: low 1.0 is above high 0.9"),
    "swept twice": ("seeds: [0]\ngrid: {ppo.gamma: [1]}\nrandom: {samples: 1, space: {ppo.gamma: {choice: [1]}}}\n",
                    "s.yaml: random.space.ppo.gamma: swept by grid too"),
    "grace past the total": ("seeds: [0]\nearly_stopping: {grace_steps: 256}\n",
                             "s.yaml: early_stopping.grace_steps: 256 is not below the trials' 256 steps"),
    "a negative GPU share": ("seeds: [0]\nresources: {gpu: -1}\n",
                             "s.yaml: resources.gpu: input should be greater than or equal to 0"),
    "too many trials": ("seeds: [0, 1]\ngrid: {ppo.n_epochs: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]}\n"
                        "random: {samples: 1000, space: {ppo.gamma: {uniform: [0.9, 1]}}}\n",
                        "s.yaml: 20,000 trials (grid × random.samples × seeds); at most 10,000"),
}


@pytest.mark.parametrize("case", SWEEP_ERRORS)
def test_sweep_file_errors_name_the_file_and_the_key(case, tmp_path):
    text, expected = SWEEP_ERRORS[case]
    sweep, experiment = files(tmp_path, text)
    with pytest.raises(ConfigError) as raised:
        read_sweep(sweep, experiment, [])
    assert expected in str(raised.value)


def test_a_sweep_needs_validation_and_is_one_line_in_train_py(tmp_path, capsys):
    never = EXPERIMENT.replace("eval_every_steps: 128", "eval_every_steps: 0")
    sweep, experiment = files(tmp_path, "seeds: [0]\n", never)
    status = train.main(["--sweep", str(sweep), "--config", str(experiment), "--run-dir", str(tmp_path / "out")])
    lines = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(lines) == 1
    assert lines[0].startswith("train.py: error: exp.yaml: train.eval_every_steps: a sweep ranks its trials")
    assert not (tmp_path / "out").exists()


def test_random_draws_are_seeded_and_grid_combinations_times_samples_times_seeds(tmp_path):
    text = ("seeds: [3, 4]\ngrid: {ppo.n_epochs: [1, 2]}\nseed: SEED\nrandom:\n  samples: 3\n  space:\n"
            "    ppo.learning_rate: {log_uniform: [0.00001, 0.01]}\n    ppo.batch_size: {choice: [32, 64]}\n"
            "    ppo.gamma: {uniform: [0.9, 1]}\n    ppo.hidden: {integer: [8, 16]}\n")
    first = read_sweep(*files(tmp_path, text.replace("SEED", "7")), [])
    again = read_sweep(*files(tmp_path, text.replace("SEED", "7")), [])
    other = read_sweep(*files(tmp_path, text.replace("SEED", "8")), [])
    assert len(first.trials) == 2 * 3 * 2 and first.trials == again.trials
    assert [t.values for t in first.trials] != [t.values for t in other.trials]
    for trial in first.trials:
        values = trial.values
        assert 1e-5 <= values["ppo.learning_rate"] <= 1e-2 and float(f"{values['ppo.learning_rate']:.4g}") == \
            values["ppo.learning_rate"]
        assert values["ppo.batch_size"] in (32, 64) and 8 <= values["ppo.hidden"] <= 16
        assert 0.9 <= values["ppo.gamma"] <= 1 and values["ppo.n_epochs"] in (1, 2)
    # a setting's trials differ in their seed alone; names are unique and readable
    assert {t.seed for t in first.trials if t.setting == 0} == {3, 4}
    assert len({t.name for t in first.trials}) == len(first.trials)
    assert first.trials[0].name.startswith("00-n_epochs=1-learning_rate=") and first.trials[0].name.endswith("seed=3")


def test_train_py_sweep_without_ray_is_one_line(tmp_path, capsys, monkeypatch):
    sweep, experiment = files(tmp_path, "seeds: [0]\n")
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray then fails, as where it is not installed
    monkeypatch.setitem(sys.modules, "ray.tune", None)
    status = train.main(["--sweep", str(sweep), "--config", str(experiment), "--run-dir", str(tmp_path / "out")])
    captured = capsys.readouterr()
    assert status == 2
    assert captured.err.strip() == "train.py: error: --sweep needs Ray Tune: pip install 'gpusched[ray]'"


def test_sweep_refuses_resume_and_overwrite(capsys):
    with pytest.raises(SystemExit):
        train.parse_args(["--sweep", "s.yaml", "--overwrite"])
    assert "argument --sweep: not allowed with --resume or --overwrite" in capsys.readouterr().err


# ---- on local Ray Tune ----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def ray_session():
    """Local Ray for this module's sweeps (started by the first, shut down at the end)."""
    ray = pytest.importorskip("ray")
    pytest.importorskip("ray.tune")
    yield
    ray.shutdown()


def table(path: Path) -> list[dict[str, str]]:
    with path.open() as handle:
        return list(csv.DictReader(handle))


def hparams_sessions(folder: Path) -> dict[str, tuple[dict[str, object], set[str]]]:
    """The TensorBoard HParams sessions under ``folder``: run -> (hparams, the scalar tags beside them)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import metadata

    sessions = {}
    for run in sorted(p for p in folder.iterdir() if p.is_dir()):
        events = EventAccumulator(str(run))
        events.Reload()
        content = events.PluginTagToContent(metadata.PLUGIN_NAME)
        start = metadata.parse_session_start_info_plugin_data(content[metadata.SESSION_START_INFO_TAG])
        values = {k: v.number_value if v.HasField("number_value") else v.string_value for k, v in start.hparams.items()}
        sessions[run.name] = (values, set(events.Tags()["scalars"]))
    return sessions


def test_a_two_trial_sweep_trains_run_folders_and_a_rerun_trains_nothing_again(ray_session, tmp_path, capsys):
    sweep, experiment = files(tmp_path, "seeds: [0]\ngrid: {ppo.learning_rate: [0.0003, 0.003]}\n")
    out = tmp_path / "sweep"
    argv = ["--sweep", str(sweep), "--config", str(experiment), "--run-dir", str(out), "--no-eval"]
    assert train.main(argv) == 0
    printed = capsys.readouterr().out
    names = ["00-learning_rate=0.0003-seed=0", "01-learning_rate=0.003-seed=0"]
    rows = table(out / "trials.csv")
    assert [row["trial"] for row in rows] == names
    assert [row["ppo.learning_rate"] for row in rows] == ["0.0003", "0.003"]
    for name, row in zip(names, rows, strict=True):
        run = out / name
        assert row["status"] == "finished" and row["steps"] == "256" and float(row["best_mean_wait_s"]) > 0
        assert all((run / f).is_file() for f in ("config.yaml", "model.zip", "best_model.zip", "best_model.json"))
        rate = yaml.safe_load((run / "config.yaml").read_text())["ppo"]["learning_rate"]
        assert rate == float(row["ppo.learning_rate"]) and f"| {name} | 0 | {rate:g} | finished | 256 |" in printed
    assert [row["seeds"] for row in table(out / "settings.csv")] == ["1", "1"]
    sessions = hparams_sessions(out / "hparams")
    assert sorted(sessions) == names
    values, tags = sessions[names[1]]
    assert values == {"seed": 0.0, "ppo.learning_rate": 0.003, "status": "finished"}
    assert {"validation/mean_wait_s", "validation/best_mean_wait_s", "steps"} <= tags

    trained = {name: (out / name / "model.zip").stat().st_mtime_ns for name in names}
    assert train.main(argv) == 0  # the same command again: Tune's state says both are done
    assert "continuing the sweep" in capsys.readouterr().out
    assert {name: (out / name / "model.zip").stat().st_mtime_ns for name in names} == trained
    assert table(out / "trials.csv") == rows
    changed = train.main([*argv, "--set", "ppo.n_epochs=2"])  # another plan is refused, not mixed in
    assert changed == 2 and "holds another sweep" in capsys.readouterr().err


def test_asha_stops_the_worse_trial_at_its_first_rung(ray_session, tmp_path, capsys):
    def scripted_trial(trial: TrialRun) -> int:  # defined here: Ray's workers get it by value, not by module
        """A stand-in for training: validation scores of 1,000 × the trial's learning rate at steps 0, 100, ...,
        300 (lower is better), then model.zip, as a run that trained to its total leaves it."""
        rate = yaml.safe_load(trial.experiment.read_text())["ppo"]["learning_rate"]
        trial.run_dir.mkdir(parents=True, exist_ok=True)
        for steps in range(0, 400, 100):
            trial.report(steps, {"mean_wait_s": 1000 * rate, "utilization": 0.5})
        (trial.run_dir / "model.zip").write_bytes(b"")
        return 0

    sweep, experiment = files(tmp_path, "seeds: [0]\ngrid: {ppo.learning_rate: [0.001, 0.01]}\nmax_concurrent: 1\n"
                                        "early_stopping: {grace_steps: 100, reduction_factor: 2}\n",
                              EXPERIMENT.replace("total_timesteps: 256", "total_timesteps: 400"))
    out = tmp_path / "sweep"
    assert run_sweep(read_sweep(sweep, experiment, []), out, scripted_trial) == 0
    rows = {row["trial"]: row for row in table(out / "trials.csv")}
    better, worse = rows["00-learning_rate=0.001-seed=0"], rows["01-learning_rate=0.01-seed=0"]
    assert (better["status"], better["steps"], better["mean_wait_s"]) == ("finished", "300", "1.0")
    assert (worse["status"], worse["steps"], worse["mean_wait_s"]) == ("stopped", "100", "10.0")
    assert "01-learning_rate=0.01-seed=0: stopped early" in capsys.readouterr().out
    assert hparams_sessions(out / "hparams")["01-learning_rate=0.01-seed=0"][0]["status"] == "stopped"


def test_a_failed_trial_is_named_and_tried_again_by_a_rerun(ray_session, tmp_path, capsys):
    def trial_failing_at(bad_rate: float) -> RunTrial:
        def run(trial: TrialRun) -> int:  # a stand-in for training; exit status 1 for the bad rate
            rate = yaml.safe_load(trial.experiment.read_text())["ppo"]["learning_rate"]
            trial.run_dir.mkdir(parents=True, exist_ok=True)
            trial.report(0, {"mean_wait_s": rate})
            (trial.run_dir / "model.zip").write_bytes(b"")
            return 1 if rate == bad_rate else 0
        return run

    sweep = read_sweep(*files(tmp_path, "seeds: [0]\ngrid: {ppo.learning_rate: [0.001, 0.01]}\n"), [])
    out = tmp_path / "sweep"
    assert run_sweep(sweep, out, trial_failing_at(0.01)) == 1
    assert [row["status"] for row in table(out / "trials.csv")] == ["finished", "error"]
    assert f"trial 01-learning_rate=0.01-seed=0 failed; its output: {out / 'logs'}" in capsys.readouterr().err
    assert run_sweep(sweep, out, trial_failing_at(-1.0)) == 0  # the rerun tries the failed trial again
    assert [row["status"] for row in table(out / "trials.csv")] == ["finished", "finished"]


def test_sweep_refuses_a_seed_of_its_own(capsys):
    with pytest.raises(SystemExit):
        train.parse_args(["--sweep", "s.yaml", "--seed", "3"])
    assert "argument --seed: not allowed with --sweep" in capsys.readouterr().err
    assert train.parse_args(["--seed", "3"]).seed == 3
