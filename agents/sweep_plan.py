"""The plan of a training sweep (``train.py --sweep SWEEP.yaml``, run by :mod:`agents.sweep`): one experiment trained
once per trial, the trials being training seeds × settings of ``ppo.*`` and ``env.*`` keys (every combination of a
grid, seeded random draws, or both), each trial a normal train.py run folder inside the sweep folder. The sweep file
(:class:`SweepFile`, ``configs/sweeps/*.yaml``)::

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

:func:`read_sweep` checks a file against an experiment and plans its trials; :mod:`agents.sweep` runs them.
"""

from __future__ import annotations

import copy
import itertools
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import numpy as np
from pydantic import Field, model_validator

from agents.experiment import Seed, apply_sets, check_experiment, read_experiment
from envs.core.errors import ConfigError
from envs.core.files import read_yaml
from envs.core.schema import FileModel, validated

SWEPT_SECTIONS = ("ppo", "env")
"""The experiment sections whose keys a sweep varies (``ppo.NAME``, ``env.NAME``)."""
MAX_TRIALS = 10_000
"""The most trials one sweep runs."""
MAX_LABEL = 100
"""The most characters of swept values in a trial's name (its folder's)."""
SIGNIFICANT_DIGITS = 4
"""Random draws of numbers are rounded to this many significant digits (the value trained is the value shown)."""



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
        label = "".join(f"{short[key]}={value_text(value)}-" for key, value in values.items())[:MAX_LABEL]
        for seed in spec.seeds:
            name = f"{index:0{width}d}-{label}seed={seed}" if label else f"seed={seed}"
            trials.append(Trial(re.sub(r"[^\w.=+-]", "_", name), index, values, seed))
    return trials


def value_text(value: Any) -> str:
    """A swept value in a trial's name."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list):
        return "+".join(value_text(item) for item in value)
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
