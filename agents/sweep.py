"""Training sweeps on Ray Tune (``train.py --sweep SWEEP.yaml``): one experiment trained once per trial, the trials
being training seeds × settings of ``ppo.*`` and ``env.*`` keys (every combination of a grid, seeded random draws,
or both), each trial a normal train.py run folder inside the sweep folder. The sweep file (:class:`SweepFile`,
``configs/sweeps/*.yaml``)::

    seeds: [0, 1, 2]                    # training seeds: every setting is trained once with each
    grid:                               # every combination of these values
      ppo.learning_rate: [0.00001, 0.00003]
    random:                             # and/or `samples` draws of these keys (each grid combination as many times)
      samples: 4
      space:                            # uniform or log_uniform: [low, high]; integer: [low, high]; choice: [...]
        ppo.clip_range: {uniform: [0.05, 0.3]}
    seed: 0                             # seed of the random draws (numbers kept to 4 significant digits)
    early_stopping: {grace_steps: 8192, reduction_factor: 2}   # ASHA; left out: every trial trains to its total
    resources: {cpu: 1, gpu: 0.25}      # per trial; the GPU share only where CUDA is present
    max_concurrent: 2                   # trials at once (default: as many as the resources allow)

Every validation of a trial (the experiment's ``train.eval_every_steps``) reports its score to Tune: the first
validation metric (mean wait; avg_bsld on the peer-mode env), lower is better. With ``early_stopping``, ASHA stops
a trial at ``grace_steps``, ``grace_steps × reduction_factor``, ... environment steps unless its score there is among
the best ``1 / reduction_factor`` of the scores recorded there so far (the first trial to get there goes on); a
stopped trial keeps its run folder as it was (checkpoints, best_model.zip), without model.zip or a final evaluation.
ASHA compares trials of every seed, so it may stop a setting's unlucky seeds: for statistics over the seeds of each
setting, leave early stopping out. Rerunning the same command continues a killed sweep: finished and stopped trials
are not run again, the others resume from their run folders.

The sweep folder holds ``sweep.yaml`` (the plan: the experiment, every trial's seed and values), ``experiments/``
(each trial's experiment file), one run folder per trial (named by its setting and seed), ``logs/`` (each trial's
output), ``tune/`` (Ray Tune's state), ``trials.csv`` and ``settings.csv`` (the summary tables, also printed; a
setting's mean and standard deviation over its seeds) and ``hparams/`` (``tensorboard --logdir SWEEP`` shows the
trials' settings beside their scores in the HParams tab). The training itself is the caller's (:data:`RunTrial`):
this module does not know train.py.
"""

from __future__ import annotations

import contextlib
import copy
import csv
import io
import itertools
import json
import logging
import math
import os
import re
import shutil
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import yaml
from pydantic import Field, model_validator

from agents.experiment import Seed, apply_sets, check_experiment, read_experiment
from envs.core.errors import ConfigError
from envs.core.files import LOCK_FILE, folder_lock, read_yaml, write_text_atomically
from envs.core.schema import FileModel, validated

SWEPT_SECTIONS = ("ppo", "env")
"""The experiment sections whose keys a sweep varies (``ppo.NAME``, ``env.NAME``)."""
MAX_TRIALS = 10_000
"""The most trials one sweep runs."""
MAX_LABEL = 100
"""The most characters of swept values in a trial's name (its folder's)."""
SIGNIFICANT_DIGITS = 4
"""Random draws of numbers are rounded to this many significant digits (the value trained is the value shown)."""
RAY_MISSING = "--sweep needs Ray Tune: pip install 'gpusched[ray]'"
PLAN, EXPERIMENTS, LOGS, TUNE, HPARAMS = "sweep.yaml", "experiments", "logs", "tune", "hparams"
"""What the sweep folder holds (module docstring)."""


def _pair(kind: Any) -> Any:
    """``[low, high]`` of ``kind``."""
    return Annotated[list[kind], Field(min_length=2, max_length=2)]


class Distribution(FileModel):
    """How ``random`` draws one key: exactly one of ``uniform`` or ``log_uniform`` ([low, high]: numbers, rounded to
    :data:`SIGNIFICANT_DIGITS`), ``integer`` ([low, high], both included) or ``choice`` (a list of values, equally
    likely)."""

    uniform: _pair(float) | None = None  # type: ignore[valid-type]
    log_uniform: _pair(Annotated[float, Field(gt=0)]) | None = None  # type: ignore[valid-type]
    integer: _pair(int) | None = None  # type: ignore[valid-type]
    choice: Annotated[list[Any], Field(min_length=1)] | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> Distribution:
        given = [name for name in type(self).model_fields if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of {', '.join(type(self).model_fields)}")
        bounds = getattr(self, given[0])
        if given[0] != "choice" and bounds[0] > bounds[1]:
            raise ValueError(f"{given[0]}: low {bounds[0]} is above high {bounds[1]}")
        return self

    def draw(self, rng: np.random.Generator) -> Any:
        """One value; numbers rounded to :data:`SIGNIFICANT_DIGITS`."""
        if self.choice is not None:
            return self.choice[int(rng.integers(len(self.choice)))]
        if self.integer is not None:
            return int(rng.integers(self.integer[0], self.integer[1] + 1))
        if self.uniform is not None:
            return _rounded(rng.uniform(*self.uniform))
        low, high = self.log_uniform
        return _rounded(math.exp(rng.uniform(math.log(low), math.log(high))))


def _rounded(value: float) -> float:
    return float(f"{value:.{SIGNIFICANT_DIGITS}g}")


class RandomSearch(FileModel):
    """``random:``: ``samples`` settings drawn from ``space`` (key: its :class:`Distribution`)."""

    samples: Annotated[int, Field(ge=1, le=MAX_TRIALS)]
    space: Annotated[dict[str, Distribution], Field(min_length=1)]


class EarlyStopping(FileModel):
    """``early_stopping:``: ASHA on the validation score, its first rung at ``grace_steps`` environment steps, each
    next one ``reduction_factor`` times further, where all but the best ``1 / reduction_factor`` stop."""

    grace_steps: Annotated[int, Field(ge=1, le=2**50)]
    reduction_factor: Annotated[float, Field(gt=1, le=100)] = 2.0


class Resources(FileModel):
    """``resources:`` of each trial: CPUs (its torch threads too, unless ``--threads``) and a share of a GPU
    (0.25: four trials on a GPU), honoured only where CUDA is present."""

    cpu: Annotated[float, Field(gt=0, le=4096)] = 1.0
    gpu: Annotated[float, Field(ge=0, le=4096)] = 0.0


class SweepFile(FileModel):
    """A sweep file (``configs/sweeps/*.yaml``; module docstring)."""

    seeds: Annotated[list[Seed], Field(min_length=1, max_length=MAX_TRIALS)]
    grid: dict[str, Annotated[list[Any], Field(min_length=1)]] | None = None
    random: RandomSearch | None = None
    seed: Seed = 0
    early_stopping: EarlyStopping | None = None
    resources: Resources = Resources()
    max_concurrent: Annotated[int, Field(ge=1, le=MAX_TRIALS)] | None = None


@dataclass(frozen=True)
class Trial:
    """One training run of a sweep: a setting (swept key -> value; ``setting``: its index) and a seed."""

    name: str
    setting: int
    values: dict[str, Any]
    seed: int


@dataclass(frozen=True)
class Sweep:
    """A checked sweep: its file's settings, the experiment its trials vary (``--set`` applied), their total steps,
    the trials."""

    spec: SweepFile
    experiment: dict[str, Any]
    total_timesteps: int
    trials: list[Trial]

    def plan(self) -> dict[str, Any]:
        """What the sweep runs, as plain data (``sweep.yaml``): a rerun continues only the same plan."""
        return {"sweep": self.spec.model_dump(mode="json", exclude_none=True), "experiment": self.experiment,
                "total_timesteps": self.total_timesteps,
                "trials": [{"name": t.name, "seed": t.seed, "values": t.values} for t in self.trials]}

    def trial_experiment(self, trial: Trial) -> dict[str, Any]:
        """The experiment of ``trial``: the sweep's, its swept keys set."""
        config = copy.deepcopy(self.experiment)
        for key, value in trial.values.items():
            section, _, name = key.partition(".")
            config[section] = {**(config.get(section) or {}), name: value}
        return config


@dataclass(frozen=True)
class TrialRun:
    """What the caller trains for one trial: the experiment file, the seed, the run folder (a run there already,
    from an earlier try, is continued), the trial's CPUs and GPU share, and ``report(steps, metrics)`` to call at
    each validation (``metrics``: the validation's means, the first one the score, lower is better)."""

    experiment: Path
    seed: int
    run_dir: Path
    cpus: float
    gpu: float
    report: Callable[[int, dict[str, float]], None]


RunTrial = Callable[[TrialRun], int]
"""Trains one trial; its exit status (0: done)."""


def read_sweep(path: Path, experiment_path: Path, sets: list[str], total_timesteps: int | None = None) -> Sweep:
    """The sweep of file ``path`` over the experiment ``experiment_path`` with ``sets`` applied (train.py's ``--set``)
    and ``total_timesteps`` (default: the experiment's), every trial's experiment checked (its env built once per
    distinct env section); a one-line :class:`ConfigError` naming the file and the key for anything wrong."""
    where = path.name
    spec = validated(SweepFile, read_yaml(path, "sweep file"), where)
    _check_keys(spec, where)
    experiment = apply_sets(read_experiment(experiment_path), sets)
    if sets:
        check_experiment(experiment, f"{experiment_path.name} with --set")
    if experiment.get("recipe"):
        raise ConfigError(f"{experiment_path.name}: recipe: a sweep varies ppo and env settings; a recipe has none")
    if not (experiment.get("train") or {}).get("eval_every_steps"):
        raise ConfigError(f"{experiment_path.name}: train.eval_every_steps: a sweep ranks its trials by their "
                          "validation, which this experiment never runs; set it (--set train.eval_every_steps=N)")
    total = total_timesteps or int(experiment["total_timesteps"])
    if spec.early_stopping is not None and spec.early_stopping.grace_steps >= total:
        raise ConfigError(f"{where}: early_stopping.grace_steps: {spec.early_stopping.grace_steps:,} is not below "
                          f"the trials' {total:,} steps, so no trial could be stopped")
    sweep = Sweep(spec, experiment, total, _trials(spec, _settings(spec, where)))
    envs: list[dict[str, Any]] = []
    for trial in sweep.trials:
        config = sweep.trial_experiment(trial)
        check_experiment(config, where)
        if config.get("env") not in envs:
            envs.append(config.get("env"))
            _check_env(config, where)
    return sweep


def _check_keys(spec: SweepFile, where: str) -> None:
    """Swept keys are ``ppo.NAME`` or ``env.NAME`` (checked further with each trial's experiment), each swept once;
    seeds are distinct."""
    grid, space = spec.grid or {}, spec.random.space if spec.random is not None else {}
    for section, keys in (("grid", grid), ("random.space", space)):
        for key in keys:
            head, _, name = key.partition(".")
            if head not in SWEPT_SECTIONS or not re.fullmatch(r"\w+", name):
                raise ConfigError(f"{where}: {section}.{key}: a swept key is ppo.NAME or env.NAME")
    both = sorted(set(grid) & set(space))
    if both:
        raise ConfigError(f"{where}: random.space.{both[0]}: swept by grid too")
    twice = sorted({s for s in spec.seeds if spec.seeds.count(s) > 1})
    if twice:
        raise ConfigError(f"{where}: seeds: {twice[0]} is given twice")


def _settings(spec: SweepFile, where: str) -> list[dict[str, Any]]:
    """Every combination of the grid (one setting of no keys without one), each with ``random.samples`` draws of
    ``random.space`` (seeded with ``seed``); at most :data:`MAX_TRIALS` trials in all."""
    grid = spec.grid or {}
    samples = spec.random.samples if spec.random is not None else 1
    count = math.prod(len(values) for values in grid.values()) * samples * len(spec.seeds)
    if count > MAX_TRIALS:
        raise ConfigError(f"{where}: {count:,} trials (grid × random.samples × seeds); at most {MAX_TRIALS:,}")
    combinations = [dict(zip(grid, values, strict=True)) for values in itertools.product(*grid.values())]
    if spec.random is None:
        return combinations
    rng = np.random.default_rng(spec.seed)
    return [{**combination, **{key: d.draw(rng) for key, d in spec.random.space.items()}}
            for combination in combinations for _ in range(samples)]


def _trials(spec: SweepFile, settings: list[dict[str, Any]]) -> list[Trial]:
    """Each setting with each seed, named ``NN-KEY=VALUE-...-seed=S`` (KEY: the last part of the swept key, unless
    two end alike; the values cut to :data:`MAX_LABEL` characters, others than letters, digits and ``.=+-_`` as
    ``_``)."""
    keys = list(settings[0])
    ends = [key.split(".")[-1] for key in keys]
    short = dict(zip(keys, ends if len(set(ends)) == len(ends) else keys, strict=True))
    width = max(2, len(str(len(settings) - 1)))
    trials = []
    for index, values in enumerate(settings):
        label = "".join(f"{short[key]}={_text(value)}-" for key, value in values.items())[:MAX_LABEL]
        for seed in spec.seeds:
            name = f"{index:0{width}d}-{label}seed={seed}" if label else f"seed={seed}"
            trials.append(Trial(re.sub(r"[^\w.=+-]", "_", name), index, values, seed))
    return trials


def _text(value: Any) -> str:
    """A swept value in a trial's name."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list):
        return "+".join(_text(item) for item in value)
    return str(value)


def _check_env(config: dict[str, Any], where: str) -> None:
    """Build the env of ``config`` once: its section checked by the env itself."""
    import gymnasium as gym

    import envs  # noqa: F401  (registers the ids)

    try:
        gym.make(str(config["env_id"]), **(config.get("env") or {})).close()
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    except gym.error.Error as exc:
        raise ConfigError(f"{where}: env_id: {exc}") from None


def run_sweep(sweep: Sweep, folder: Path, run_trial: RunTrial) -> int:
    """Run ``sweep`` on local Ray Tune in ``folder`` (held by this process), or continue it there, each trial
    trained by ``run_trial``; print and write the summary tables and the HParams. 0 when every trial finished or
    was stopped early, else 1 (the failed ones named on stderr)."""
    try:
        from ray.tune import ExperimentAnalysis
    except ImportError:
        raise ConfigError(RAY_MISSING) from None
    folder = folder.resolve()
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"{folder}: exists and is not a folder")
    folder.mkdir(parents=True, exist_ok=True)
    with folder_lock(folder, f"sweep folder {folder}"):
        _write_plan(sweep, folder)
        _start_ray()
        _fit(sweep, folder, run_trial)
        rows = summary(sweep, folder, ExperimentAnalysis(str(folder / TUNE)))
        print(report_tables(sweep, rows, folder))
        write_hparams(sweep, rows, folder / HPARAMS)
    failed = [row["trial"] for row in rows if row["status"] == "error"]
    unfinished = [row["trial"] for row in rows if row["status"] == "unfinished"]
    for name in failed:
        print(f"trial {name} failed; its output: {folder / LOGS / name}.log", file=sys.stderr)
    if unfinished:
        print(f"{len(unfinished)} trials unfinished: rerun the same command to continue the sweep", file=sys.stderr)
    return 1 if failed or unfinished else 0


def _write_plan(sweep: Sweep, folder: Path) -> None:
    """``sweep.yaml`` and each trial's experiment file; refused when the folder holds another sweep's plan."""
    plan_path, plan = folder / PLAN, sweep.plan()
    if plan_path.exists():
        if read_yaml(plan_path, "sweep plan") != yaml.safe_load(yaml.safe_dump(plan)):
            raise ConfigError(f"{folder}: holds another sweep (its {PLAN} differs from this one's: the sweep file, "
                              "the experiment, --set or --total-timesteps changed); choose another --run-dir, or "
                              "remove that folder to start again")
        print(f"continuing the sweep in {folder}")
    else:
        if any(child.name != LOCK_FILE for child in folder.iterdir()):
            raise ConfigError(f"{folder}: holds something other than a sweep; choose another --run-dir")
        write_text_atomically(plan_path, yaml.safe_dump(plan, sort_keys=False))
    for sub in (EXPERIMENTS, LOGS):
        (folder / sub).mkdir(exist_ok=True)
    for trial in sweep.trials:
        write_text_atomically(folder / EXPERIMENTS / f"{trial.name}.yaml",
                              yaml.safe_dump(sweep.trial_experiment(trial), sort_keys=False))


def _start_ray() -> None:
    """Start local Ray with this machine's CPUs (and GPUs), quietly, unless it runs already."""
    import ray

    if not ray.is_initialized():
        ray.init(num_cpus=os.cpu_count() or 1, include_dashboard=False, log_to_driver=False,
                 logging_level=logging.ERROR)


def _gpu_share(share: float) -> float:
    """The GPU share a trial asks Ray for: ``share`` where CUDA is present, else 0 (with a note when it was > 0)."""
    import torch

    if share and not torch.cuda.is_available():
        print(f"resources.gpu: {share:g} ignored: no CUDA device here; the trials train on the CPU")
        return 0.0
    return share


def _fit(sweep: Sweep, folder: Path, run_trial: RunTrial) -> None:
    """Run the trials on Tune, or continue them: Tune's state in ``folder/tune`` says which are done."""
    from ray import tune
    from ray.tune.logger import JsonLoggerCallback
    from ray.tune.schedulers import ASHAScheduler

    os.environ["TUNE_DISABLE_AUTO_CALLBACK_LOGGERS"] = "1"  # Tune's own TensorBoard files would be a second HParams
    os.environ["RAY_AIR_NEW_OUTPUT"] = "0"  # its tables: the lines of _progress instead
    cpu, gpu = sweep.spec.resources.cpu, _gpu_share(sweep.spec.resources.gpu)
    trainable = tune.with_resources(_trainable(sweep, folder, run_trial, gpu), {"cpu": cpu, "gpu": gpu})
    path = folder / TUNE
    if tune.Tuner.can_restore(path):
        tune.Tuner.restore(str(path), trainable, restart_errored=True).fit()
        return
    shutil.rmtree(path, ignore_errors=True)  # a sweep killed before Tune saved its state
    stopping = sweep.spec.early_stopping
    scheduler = (ASHAScheduler(time_attr="steps", max_t=sweep.total_timesteps, grace_period=stopping.grace_steps,
                               reduction_factor=stopping.reduction_factor) if stopping is not None else None)
    tune.Tuner(trainable, param_space={"trial": tune.grid_search([t.name for t in sweep.trials])},
               tune_config=tune.TuneConfig(metric="score", mode="min", scheduler=scheduler,
                                           max_concurrent_trials=sweep.spec.max_concurrent,
                                           trial_name_creator=_trial_name, trial_dirname_creator=_trial_name),
               run_config=tune.RunConfig(name=TUNE, storage_path=str(folder), verbose=0,
                                         callbacks=[JsonLoggerCallback(), _progress(folder)])).fit()


def _progress(folder: Path) -> Any:
    """A Tune callback that prints a line as a trial validates, ends or fails (defined here: Ray is optional)."""
    from ray.tune import Callback

    class Progress(Callback):
        def on_trial_result(self, iteration: int, trials: list, trial: Any, result: dict, **info: Any) -> None:
            print(f"{trial}: {result['steps']:,} steps, validation {result['metric']} {result['score']:,.4g}",
                  flush=True)

        def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
            ended = "finished" if (folder / str(trial) / "model.zip").is_file() else "stopped early"
            print(f"{trial}: {ended}", flush=True)

        def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
            print(f"{trial}: failed (its output: {folder / LOGS / str(trial)}.log)", flush=True)

    return Progress()


def _trial_name(trial: Any) -> str:
    """A Tune trial's name (and folder under ``tune/``): its :class:`Trial`'s."""
    return str(trial.config["trial"])


def _trainable(sweep: Sweep, folder: Path, run_trial: RunTrial, gpu: float) -> Callable[[dict[str, Any]], None]:
    """Tune's function for a trial: ``run_trial`` of its :class:`TrialRun`, the output to ``logs/TRIAL.log``, each
    validation reported to Tune (``steps``, ``score``: the first metric, ``metric``: its name, and the metrics)."""
    by_name = {trial.name: trial for trial in sweep.trials}
    cpus, total = sweep.spec.resources.cpu, sweep.total_timesteps

    def train_trial(config: dict[str, Any]) -> None:
        from ray import tune

        trial = by_name[config["trial"]]
        final: list[dict[str, Any]] = []

        def report(steps: int, metrics: dict[str, float]) -> None:
            metric, score = next(iter(metrics.items()))
            result = {"steps": steps, "score": score, "metric": metric, **metrics}
            if steps < total:
                tune.report(result)
            else:  # ASHA stops every trial at its total: reported once the run is over (model.zip saved)
                final[:] = [result]

        log = folder / LOGS / f"{trial.name}.log"
        with (log.open("a", encoding="utf-8", buffering=1) as out, contextlib.redirect_stdout(out),
              contextlib.redirect_stderr(out)):
            status = run_trial(TrialRun(folder / EXPERIMENTS / f"{trial.name}.yaml", trial.seed, folder / trial.name,
                                        cpus, gpu, report))
        if status:
            raise RuntimeError(f"trial {trial.name}: exit status {status} (its output: {log})")
        if final:
            tune.report(final[0])

    return train_trial


def summary(sweep: Sweep, folder: Path, analysis: Any) -> list[dict[str, Any]]:
    """One row per trial: name, seed, swept values, status (finished: trained to its total; stopped: by early
    stopping; error; unfinished: the sweep was interrupted), the steps, score and metric of its last validation,
    and its best validation score and step (``best_model.json``)."""
    found = {str(t.config.get("trial")): t for t in analysis.trials}
    rows = []
    for trial in sweep.trials:
        tune_trial = found.get(trial.name)
        last = dict(tune_trial.last_result) if tune_trial is not None else {}
        record = folder / trial.name / "best_model.json"
        best = json.loads(record.read_text()) if record.is_file() else {}
        state = tune_trial.status if tune_trial is not None else "PENDING"
        status = ("error" if state == "ERROR" else "unfinished" if state != "TERMINATED"
                  else "finished" if (folder / trial.name / "model.zip").is_file() else "stopped")
        rows.append({"trial": trial.name, "seed": trial.seed, **trial.values, "status": status,
                     "steps": last.get("steps"), "metric": last.get("metric", best.get("metric")),
                     "score": last.get("score"), "best": best.get("value"), "best_step": best.get("step")})
    return rows


def report_tables(sweep: Sweep, rows: list[dict[str, Any]], folder: Path) -> str:
    """Write ``trials.csv`` and ``settings.csv`` (a setting's seeds, and the mean and standard deviation of their
    best validation scores) into ``folder``; both as Markdown tables."""
    metric = next((row["metric"] for row in rows if row["metric"]), "score")
    keys = list(sweep.trials[0].values)
    trial_rows = [{"trial": r["trial"], "seed": r["seed"], **{k: r[k] for k in keys}, "status": r["status"],
                   "steps": r["steps"], metric: r["score"], f"best_{metric}": r["best"], "best_step": r["best_step"]}
                  for r in rows]
    setting_rows = []
    for _, group in itertools.groupby(zip(sweep.trials, rows, strict=True), key=lambda pair: pair[0].setting):
        pairs = list(group)
        scores = [row["best"] for _, row in pairs if row["best"] is not None]
        setting_rows.append({**pairs[0][0].values, "seeds": len(pairs), "scored": len(scores),
                             f"mean_best_{metric}": statistics.fmean(scores) if scores else None,
                             f"sd_best_{metric}": statistics.stdev(scores) if len(scores) > 1 else None})
    write_text_atomically(folder / "trials.csv", _csv(trial_rows))
    write_text_atomically(folder / "settings.csv", _csv(setting_rows))
    return (f"trials ({metric}: the last validation's; best_{metric}: the best, in best_model.json), "
            f"{folder / 'trials.csv'}:\n\n{_markdown(trial_rows)}\n\nsettings over their seeds, "
            f"{folder / 'settings.csv'}:\n\n{_markdown(setting_rows)}\n")


def _csv(rows: list[dict[str, Any]]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows({k: "" if v is None else v for k, v in row.items()} for row in rows)
    return out.getvalue()


def _markdown(rows: list[dict[str, Any]]) -> str:
    """``rows`` as a Markdown table: other numbers than integers to 4 significant digits, whole from 1,000 on."""
    def cell(value: Any) -> str:
        if value is None:
            return ""
        if isinstance(value, float):
            return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"
        return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else _text(value)

    lines = [list(rows[0]), ["---"] * len(rows[0]), *([cell(v) for v in row.values()] for row in rows)]
    return "\n".join("| " + " | ".join(line) + " |" for line in lines)


def write_hparams(sweep: Sweep, rows: list[dict[str, Any]], folder: Path) -> None:
    """TensorBoard HParams of the trials in ``folder`` (replaced as a whole): one session per trial (its seed,
    swept values and status; its last and best validation scores and steps as metrics, at its last step)."""
    from torch.utils.tensorboard import SummaryWriter
    from torch.utils.tensorboard.summary import hparams

    partial = folder.with_name(f".{folder.name}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    keys = ["seed", *sweep.trials[0].values, "status"]
    for row in rows:
        metric = row["metric"] or "score"
        values = {key: _hparam(row[key]) for key in keys}
        scores = {name: float(row[column]) for name, column in [(f"validation/{metric}", "score"),
                                                                 (f"validation/best_{metric}", "best"),
                                                                 ("steps", "steps")]
                  if row[column] is not None}
        with SummaryWriter(str(partial / row["trial"])) as writer:
            for proto in hparams(values, scores)[1:]:  # the session's start and end; Tensorboard infers the rest
                writer.file_writer.add_summary(proto)
            for tag, value in scores.items():
                writer.add_scalar(tag, value, int(row["steps"] or 0))
    shutil.rmtree(folder, ignore_errors=True)
    partial.rename(folder)


def _hparam(value: Any) -> float | str:
    """A value as HParams shows it: a number, else text."""
    return float(value) if isinstance(value, (int, float)) else _text(value)
