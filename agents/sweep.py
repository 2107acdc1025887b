"""Training sweeps on Ray Tune (``train.py --sweep SWEEP.yaml``): the trials that :mod:`agents.sweep_plan` plans
(training seeds × settings of ``ppo.*`` and ``env.*`` keys; the file format is there), each a normal train.py run
folder inside the sweep folder.

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
import csv
import io
import itertools
import json
import logging
import os
import shutil
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from agents.sweep_plan import Sweep, value_text
from envs.core.errors import ConfigError
from envs.core.files import LOCK_FILE, folder_lock, read_yaml, write_text_atomically

RAY_MISSING = "--sweep needs Ray Tune: pip install 'gpusched[ray]'"
PLAN, EXPERIMENTS, LOGS, TUNE, HPARAMS = "sweep.yaml", "experiments", "logs", "tune", "hparams"
"""What the sweep folder holds (module docstring)."""


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
        return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else value_text(value)

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
    return float(value) if isinstance(value, (int, float)) else value_text(value)
