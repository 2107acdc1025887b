"""The learning suite: how much room a learned scheduler has, measured before any agent trains.

Each :class:`Case` is a workload on a cluster at a load, with three disjoint seed ranges (trace windows for
Philly): *train* (what planners draw futures from, and what agents may train on), *validation* (what selects the
reference and any model) and *test* (what the tables report; never used to train or select). The protocol
(:func:`learning_protocol`):

1. every heuristic of :data:`CANDIDATES` runs on the validation seeds; the **reference** of a case is the one of
   least mean steady-state wait there, named before any test seed runs;
2. on the test seeds run the candidates, the **lookahead planner** in the settings of :data:`PLANNER_SETTINGS`
   (its candidates: the reference, the next two best heuristics on validation, and a 15-minute hold; its futures
   drawn from the train range) and the **hindsight bound** (the same candidates over the true future: a bound,
   not a policy);
3. every policy is compared with the reference seed by seed (:mod:`evaluation.paired`): the ratio of mean wait
   with a paired 95 % bootstrap interval, guard metrics beside it, and the seeds a 10 % difference needs.

:func:`selection_world` turns a case into the world a training recipe of :mod:`agents.recipes` uses: the same
seed ranges (training only from the train range), the reference first among the candidates.

Metrics are those of the steady state (:data:`STEADY_STATE`: the first and last 10 % of the jobs by submit time
left out).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from envs.core.errors import ConfigError
from evaluation.aggregate import group_by
from evaluation.runner import DEFAULT_TRAIN_SEEDS, RunSpec
from evaluation.suites import SHARED_TRACES

STEADY_STATE = (0.1, 0.1)
"""Fractions of the jobs, by submit time, that the suite's metrics leave out at the start and at the end."""

ORDERS = ("fcfs", "sjf", "saf", "unicep", "wfp3", "f1")
CANDIDATES = (*(f"{order}+{backfill}/{placement}" for order in ORDERS for backfill in ("greedy", "easy")
                for placement in ("pack", "topology")), "k8s:mostallocated", "k8s:leastallocated", "slurm")
"""The heuristics the reference is chosen from: six orders × {greedy, EASY} backfilling × {pack, topology}
placement, kube-scheduler's two NodeResourcesFit profiles, and slurmctld's own scheduler (``slurm``: its main
loop and backfill cycle with Slurm's defaults, about 5 s a run of the default size on 2 cores)."""

PHILLY_TRACE = f"philly:{SHARED_TRACES / 'philly-rfold' / 'philly_trace.csv.gz'}"
PHILLY_WINDOW = 2000
"""Jobs per Philly window; window k starts at job k × PHILLY_WINDOW, k = 1..54 (window 0 is the trace's start)."""


def _philly_windows(remainders: Sequence[int]) -> tuple[int, ...]:
    return tuple(k * PHILLY_WINDOW for k in range(1, 55) if k % 5 in remainders)


@dataclass(frozen=True)
class Case:
    """One workload × cluster × load of the suite with its seed ranges (window starts for a trace)."""

    name: str
    workload: str
    cluster: str
    load: float
    train: tuple[int, ...]
    validation: tuple[int, ...]
    test: tuple[int, ...]
    window: int | None = None  # a trace's jobs per window: the seeds are the windows' first jobs
    every: str = "1h"  # the planners' commitment (and least time between planning instants)

    def spec(self, policy: str, seed: int) -> RunSpec:
        """The run of ``policy`` on seed (window start) ``seed`` of this case, over the steady state."""
        window = (seed, self.window) if self.window else None
        return RunSpec(policy, self.workload, self.cluster, seed, self.load, window, self.name,
                       metrics_window=STEADY_STATE, train=self.train)


SYNTHETIC_TRAIN = DEFAULT_TRAIN_SEEDS
SYNTHETIC_VALIDATION = tuple(range(1000, 1010))

CASES = (
    Case("whole-gpu@1.0", "whole-gpu", "hetero-64", 1.0, SYNTHETIC_TRAIN, SYNTHETIC_VALIDATION,
         tuple(range(2000, 2030))),
    Case("whole-gpu@1.5", "whole-gpu", "hetero-64", 1.5, SYNTHETIC_TRAIN, SYNTHETIC_VALIDATION,
         tuple(range(2000, 2012))),
    Case("whole-gpu@2.0", "whole-gpu", "hetero-64", 2.0, SYNTHETIC_TRAIN, SYNTHETIC_VALIDATION,
         tuple(range(2000, 2012))),
    Case("default@1.5", "default", "hetero-64", 1.5, SYNTHETIC_TRAIN, SYNTHETIC_VALIDATION,
         tuple(range(2000, 2012))),
    Case("philly", PHILLY_TRACE, "hetero-64", 1.0, _philly_windows((0,)), _philly_windows((2,)),
         _philly_windows((1, 3)), PHILLY_WINDOW, every="8h"),
)
"""The suite's cases. Philly: 2,000-job windows of the trace at their own pace on the 512-GPU ``hetero-64`` (on
its own ``philly-like`` cluster of 2,400 GPUs most windows never queue, even 100 times faster; on ``hetero-64``
49 of the 55 windows queue under ``saf+greedy/pack``); windows k % 5 == 0 train, == 2 validate, 1 and 3 test."""

PLANNER_SETTINGS = {
    "lookahead-A": "m=4:h=inf:z=1",
    "lookahead-B": "m=4:h=4h:z=0",
}
"""The lookahead planner's settings on the test seeds (with each case's candidates and ``every``): A rolls to the
end of the episode and leaves the reference only for a gain of one standard error over its futures; B looks four
hours ahead and takes any gain."""


def validation_ranking(rows: Sequence[dict], cases: Sequence[Case],
                       candidates: Sequence[str]) -> dict[str, list[str]]:
    """Per case, the candidates from least to most mean wait over the validation ``rows`` (ties in ``candidates``
    order): the first is the case's reference."""
    groups = group_by(rows, lambda row: (row["workload"], row["policy"]))
    rankings = {}
    for case in cases:
        means = {p: sum(r["mean_wait_s"] for r in groups[(case.name, p)]) / len(groups[(case.name, p)])
                 for p in candidates}
        rankings[case.name] = sorted(candidates, key=lambda p: (means[p], candidates.index(p)))
    return rankings


def case_names() -> list[str]:
    """The names of the suite's cases."""
    return [case.name for case in CASES]


def planner_labels() -> list[str]:
    """The labels of the planner rows: the lookahead settings and the hindsight bound."""
    return [*PLANNER_SETTINGS, "hindsight"]


def planner_candidates(ranking: Sequence[str]) -> str:
    """A planner's ``c=`` list from the validation ranking (best first): the reference, the next two, a hold."""
    return "|".join([*ranking[:3], "hold15m"])


def planner_names(case: Case, ranking: Sequence[str]) -> dict[str, str]:
    """Label -> policy name of the lookahead settings and the hindsight bound for ``case``."""
    c = planner_candidates(ranking)
    names = {label: f"lookahead:c={c}:every={case.every}:{setting}" for label, setting in PLANNER_SETTINGS.items()}
    names["hindsight"] = f"hindsight:c={c}:every={case.every}"
    return names


def selection_world(section: Mapping[str, Any]) -> Any:
    """The :class:`~agents.selection_training.World` of a recipe's ``world:`` section."""
    from agents.selection_training import World  # here: the harness's start-up stays free of torch
    from baselines import make

    known = {case.name: case for case in CASES}
    if section["case"] not in known:
        raise ConfigError(f"world.case: unknown {section['case']!r} (known: {', '.join(known)})")
    case = known[section["case"]]
    candidates = section.get("candidates", 4)
    if isinstance(candidates, int):
        candidates = validation_ranking_of(case)[:candidates]
    for name in candidates:
        try:
            make(name)
        except ConfigError as exc:
            raise ConfigError(f"world.candidates: {exc}") from None
    train = tuple(section.get("train_seeds") or case.train)
    held = set(case.validation) | set(case.test)
    if case.window:  # trace windows: a training window may not overlap a held-out one
        held_out = sorted(t for t in train if any(abs(t - h) < case.window for h in held))
    else:
        held_out = sorted(set(train) & held)
    if held_out:
        raise ConfigError(f"world.train_seeds: {held_out[:5]} are (or overlap) validation or test seeds of "
                          f"{case.name}")
    return World(case.workload, case.cluster, case.load, tuple(candidates), train, case.validation,
                 float(section.get("commit_s", 0.0)), case.window, STEADY_STATE)


def validation_ranking_of(case: Case) -> list[str]:
    """The learning suite's candidates ranked on ``case``'s validation seeds (best first), as evaluate.py ranks
    them (one process; a few minutes per case on 2 cores)."""
    from evaluation.runner import run

    rows = [run(case.spec(policy, seed))[0] for policy in CANDIDATES for seed in case.validation]
    ranking = validation_ranking(rows, [case], CANDIDATES)[case.name]
    print(f"reference for {case.name}: {ranking[0]} (best of {len(CANDIDATES)} on {len(case.validation)} "
          "validation seeds)")
    return ranking
