"""Lookahead planning over heuristics: how much better a scheduler can do by choosing, every so often, which of a few
heuristics decides next, judged by simulating each choice forward.

``lookahead`` (a policy anyone can run) and ``hindsight`` (a bound for tables only) share one mechanism, a
*rollout over candidates* (Bertsekas' rollout; switching among committed heuristics):

- A *planning instant* is the run's first decision point, and then the first decision point at least ``every``
  after the last planning instant at which two or more jobs are pending. There the planner forks the simulator
  (:meth:`View.fork <envs.sim.view.View.fork>`) and rolls each candidate forward: the candidate decides until
  ``every`` has passed, then the *base* heuristic decides, up to the end of the episode or ``horizon``. A
  rollout's cost is the job-seconds spent waiting from the fork on (∫ pending jobs dt: the rollout's share of the
  total wait), and the candidate of least mean cost over the futures is committed for ``every``; the base wins
  ties, and keeps its place unless a candidate's mean gain over it, future by future, exceeds ``z`` standard
  errors. Afterwards, until the next planning instant, the base decides. Each commitment starts a fresh instance of
  its heuristic, in the run as in the rollouts.
- Candidates are policy names (``sjf+greedy/topology``) or ``holdD`` (``hold15m``: start nothing for D, leaving
  GPUs idle for the jobs to come, then the base). The first candidate is the base.
- ``lookahead`` never reads the run's true future: each planning instant draws ``m`` futures from a
  :class:`~envs.workload.futures.FutureModel` of training streams (arrivals spliced from them, and the runtimes of
  the jobs pending or running now drawn from what their requests say), the same futures for every candidate
  (common random numbers). Its parameters bound what a learner choosing among the same heuristics at the same
  instants can reach without knowing the future.
- ``hindsight`` rolls forward on the true future (one, exact), with the base set to the candidate that is best
  over the whole episode. Since the base's own rollout is among the choices and rollouts are exact, its total
  wait is never more than its best candidate's (for candidates that keep no state between decisions: every
  candidate here). It knows the future: a bound, never a policy to deploy.

Names: ``lookahead[:KEY=VALUE]...`` and ``hindsight[:KEY=VALUE]...`` with keys ``c`` (candidates joined by ``|``,
the base first), ``m`` (futures, lookahead only), ``every`` (commitment and spacing of planning instants), ``h``
(rollout horizon, ``inf`` for the end of the episode), ``z`` (lookahead only), ``know`` (lookahead only:
``arrivals``, ``runtimes`` or ``arrivals+runtimes``, the parts of the true future a *diagnostic* lookahead keeps
instead of drawing them: a bound on what that information is worth, never a policy) and ``seed``; durations as ``900``,
``15m``, ``1h`` or ``inf``. ``lookahead`` alone is ``lookahead:c=C:m=4:every=1h:h=inf:z=0:seed=0`` with C
``sjf+greedy/topology|saf+greedy/pack|sjf+easy/topology|hold15m``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from envs.core.errors import ConfigError
from envs.sim import Action, Policy, Simulator, View, Wait
from envs.sim.fork import Future
from envs.sim.loop import apply_action
from envs.workload.futures import FutureModel

LOOKAHEAD_PREFIX, HINDSIGHT_PREFIX = "lookahead", "hindsight"
HOLD_PREFIX = "hold"
MAX_FUTURES = 64
"""Most futures a lookahead may draw per planning instant (each costs a rollout per candidate)."""
KNOWABLE = frozenset({"arrivals", "runtimes"})
"""Parts of the true future a diagnostic lookahead may be given (``know=``)."""
DEFAULT_CANDIDATES = ("sjf+greedy/topology", "saf+greedy/pack", "sjf+easy/topology", "hold15m")
_UNITS_S = {"s": 1.0, "m": 60.0, "h": 3600.0}

PLANNER_DOCS = {
    LOOKAHEAD_PREFIX: "every `every` (default 1h), roll each candidate heuristic forward over m resampled futures "
                      "(never the true one) and commit the best for `every`; keys c, m, every, h, z, seed",
    HINDSIGHT_PREFIX: "the same over the true future (a bound that knows the future, for tables only)",
}
"""One line per planner family, for ``python -m baselines``."""


def duration_s(text: str, where: str) -> float:
    """A duration ``900``, ``900s``, ``15m``, ``1h`` or ``inf`` in seconds; :class:`ConfigError` naming ``where``."""
    value = text.strip().lower()
    scale = _UNITS_S.get(value[-1:])
    try:
        seconds = float(value[:-1] if scale else value) * (scale or 1.0)
    except ValueError:
        raise ConfigError(f"{where}: {text!r} is not a duration (e.g. 900, 15m, 1h, inf)") from None
    if not seconds > 0 or math.isnan(seconds):
        raise ConfigError(f"{where}: a duration must be > 0, got {text!r}")
    return seconds


@dataclass(frozen=True)
class PlannerSpec:
    """A planner's parameters, as its name gives them."""

    hindsight: bool
    candidates: tuple[str, ...] = DEFAULT_CANDIDATES  # the base first
    futures: int = 4  # resampled futures per planning instant (lookahead) [count]
    every_s: float = 3600.0  # commitment, and least time between planning instants [s]
    horizon_s: float = math.inf  # rollout length [s]; inf: to the end of the episode
    seed: int = 0  # seeds the futures' draws
    z: float = 0.0  # a candidate replaces the base only if its mean gain exceeds z standard errors [count]
    know: frozenset[str] = frozenset()  # parts of the true future a diagnostic lookahead keeps: arrivals, runtimes

    @property
    def name(self) -> str:
        """The canonical name (every key written out)."""
        prefix = HINDSIGHT_PREFIX if self.hindsight else LOOKAHEAD_PREFIX
        keys = [f"c={'|'.join(self.candidates)}"] + ([] if self.hindsight else [f"m={self.futures}"])
        keys += [f"every={_fmt_s(self.every_s)}", f"h={_fmt_s(self.horizon_s)}"]
        keys += [] if self.hindsight else [f"z={self.z:g}"]
        keys += [f"know={'+'.join(sorted(self.know))}"] if self.know else []
        keys += [f"seed={self.seed}"]
        return ":".join([prefix, *keys])


def _fmt_s(seconds: float) -> str:
    if math.isinf(seconds):
        return "inf"
    for unit in ("h", "m"):
        if seconds % _UNITS_S[unit] == 0:
            return f"{seconds / _UNITS_S[unit]:g}{unit}"
    return f"{seconds:g}"


def is_planner_name(name: str) -> bool:
    """Whether ``name`` names a planner (``lookahead...`` or ``hindsight...``)."""
    head = name.strip().lower().partition(":")[0]
    return head in (LOOKAHEAD_PREFIX, HINDSIGHT_PREFIX)


def parse_planner(name: str, make_policy: Callable[[str], Policy]) -> PlannerSpec:
    """The :class:`PlannerSpec` of a planner name; each candidate is checked with ``make_policy``."""
    head, *fields = name.strip().split(":")
    fields_by_key: dict[str, str] = {}
    for field in fields:
        key, eq, value = field.partition("=")
        if not eq or key.strip().lower() not in ("c", "m", "every", "h", "z", "know", "seed"):
            raise ConfigError(f"policy {name!r}: {field!r} is not KEY=VALUE with KEY one of c, m, every, h, z, "
                              "know, seed")
        fields_by_key[key.strip().lower()] = value.strip()
    hindsight = head.strip().lower() == HINDSIGHT_PREFIX
    lookahead_only = sorted(set(fields_by_key) & {"m", "z", "know"})
    if hindsight and lookahead_only:
        raise ConfigError(f"policy {name!r}: {', '.join(lookahead_only)} apply to lookahead only")
    spec = PlannerSpec(hindsight)
    if "c" in fields_by_key:
        candidates = tuple(c.strip() for c in fields_by_key["c"].split("|") if c.strip())
        if not candidates or candidates[0].lower().startswith(HOLD_PREFIX):
            raise ConfigError(f"policy {name!r}: c= needs a heuristic first (the base), then any holdD")
        spec = PlannerSpec(hindsight, candidates)
    for candidate in spec.candidates:
        if not candidate.lower().startswith(HOLD_PREFIX):
            if is_planner_name(candidate):
                raise ConfigError(f"policy {name!r}: a candidate cannot be a planner ({candidate!r})")
            make_policy(candidate)
        elif math.isinf(duration_s(candidate[len(HOLD_PREFIX):], f"policy {name!r}: candidate {candidate!r}")):
            raise ConfigError(f"policy {name!r}: candidate {candidate!r}: a hold must be finite")
    try:
        futures = int(fields_by_key.get("m", spec.futures))
        seed = int(fields_by_key.get("seed", spec.seed))
    except ValueError:
        raise ConfigError(f"policy {name!r}: m and seed must be integers") from None
    if not 1 <= futures <= MAX_FUTURES:
        raise ConfigError(f"policy {name!r}: m must be in 1..{MAX_FUTURES}, got {futures}")
    if seed < 0:
        raise ConfigError(f"policy {name!r}: seed must be >= 0, got {seed}")
    every = duration_s(fields_by_key.get("every", "1h"), f"policy {name!r}: every")
    if math.isinf(every):
        raise ConfigError(f"policy {name!r}: every must be finite")
    horizon = duration_s(fields_by_key.get("h", "inf"), f"policy {name!r}: h")
    try:
        z = float(fields_by_key.get("z", spec.z))
    except ValueError:
        raise ConfigError(f"policy {name!r}: z must be a number") from None
    if not z >= 0 or math.isinf(z):
        raise ConfigError(f"policy {name!r}: z must be finite and >= 0, got {z}")
    know = frozenset(part.strip().lower() for part in fields_by_key.get("know", "").split("+") if part.strip())
    if not know <= KNOWABLE:
        raise ConfigError(f"policy {name!r}: know= takes {' and/or '.join(sorted(KNOWABLE))} joined by +, got "
                          f"{fields_by_key['know']!r}")
    return PlannerSpec(hindsight, spec.candidates, futures, every, horizon, seed, z, know)


class Hold:
    """Start nothing for ``hold_s`` [s] from the first decision it is asked for, then let ``then`` decide."""

    def __init__(self, hold_s: float, then: Policy) -> None:
        self.name = f"{HOLD_PREFIX}{_fmt_s(hold_s)}"
        self.hold_s, self.then = hold_s, then
        self._until_s: float | None = None

    def reset(self) -> None:
        self._until_s = None
        self.then.reset()

    def act(self, view: View) -> Action:
        if self._until_s is None:
            self._until_s = view.time_s + self.hold_s
        if view.time_s < self._until_s:
            return Wait(self._until_s)
        return self.then.act(view)


class Committed:
    """A candidate that decides until ``until_s`` [s], then a fresh base from the first decision point after."""

    def __init__(self, candidate: Policy, until_s: float, base: Callable[[], Policy]) -> None:
        self.name = candidate.name
        self.current, self.until_s, self._base = candidate, until_s, base
        self.switched = False

    def reset(self) -> None:
        self.current.reset()

    def act(self, view: View) -> Action:
        if not self.switched and view.time_s >= self.until_s:
            self.current, self.switched = self._base(), True
        return self.current.act(view)


def rollout_cost(sim: Simulator, policy: Policy, horizon_s: float) -> float:
    """Run ``policy`` on ``sim`` (a fork) to its end, or to ``horizon_s`` [s] from now; the job-seconds of wait
    it accrues on the way (∫ pending jobs dt)."""
    start_job_s = sim.pending_job_s
    end_s = sim.time_s + horizon_s
    if not math.isinf(end_s):
        sim.wake_at(end_s)  # stop exactly there when jobs are pending then (none pending: nothing accrues)
    view, act = sim.view, policy.act
    while not sim.done and sim.time_s < end_s:
        apply_action(sim, act(view))
    return sim.pending_job_s - start_job_s


class Planner:
    """The ``lookahead`` and ``hindsight`` policies (module docstring)."""

    def __init__(self, spec: PlannerSpec, make_policy: Callable[[str], Policy],
                 futures: FutureModel | None = None) -> None:
        if not spec.hindsight and futures is None:
            raise ConfigError(f"policy {spec.name!r}: lookahead needs training streams to draw futures from "
                              "(evaluate.py builds them from --train-seeds, or a suite's training range)")
        self.spec, self.name = spec, spec.name
        self._make, self._futures = make_policy, futures
        self.decisions: list[tuple[float, str]] = []  # (time [s], chosen candidate) of each planning instant
        self.reset()

    def reset(self) -> None:
        self._base_name = self.spec.candidates[0]
        self._current: Policy = self._fresh(self._base_name)
        self._commit_until_s = -math.inf
        self._next_plan_s = -math.inf
        self._committed = False
        self.decisions = []

    def _fresh(self, candidate: str) -> Policy:
        if candidate.lower().startswith(HOLD_PREFIX):
            policy: Policy = Hold(duration_s(candidate[len(HOLD_PREFIX):], candidate), self._fresh(self._base_name))
        else:
            policy = self._make(candidate)
        policy.reset()
        return policy

    def act(self, view: View) -> Action:
        now = view.time_s
        if self._committed and now >= self._commit_until_s:
            self._current, self._committed = self._fresh(self._base_name), False
        if not self._committed and (not self.decisions or (now >= self._next_plan_s and len(view.pending) >= 2)):
            choice = self.plan(view)
            self.decisions.append((now, choice))
            self._current = self._fresh(choice)
            self._commit_until_s = self._next_plan_s = now + self.spec.every_s
            self._committed = True
        return self._current.act(view)

    def plan(self, view: View) -> str:
        """The candidate to commit now: least mean rollout cost over the futures, the base on ties."""
        spec = self.spec
        if spec.hindsight:
            if not self.decisions:  # the base: the best candidate over the whole episode (from its first decision)
                heuristics = [c for c in spec.candidates if not c.lower().startswith(HOLD_PREFIX)]
                costs = [rollout_cost(view.fork(None), self._fresh(c), math.inf) for c in heuristics]
                self._base_name = heuristics[int(np.argmin(costs))]
            futures: list[Future | None] = [None]
        else:
            rng = np.random.default_rng((spec.seed, len(self.decisions), int(view.time_s * 1000)))
            futures = [self.draw_future(view, rng) for _ in range(spec.futures)]
        until_s = view.time_s + spec.every_s
        order = [self._base_name, *(c for c in spec.candidates if c != self._base_name)]
        costs = np.array([[rollout_cost(view.fork(f), Committed(self._fresh(c), until_s,
                                                                lambda: self._fresh(self._base_name)),
                                        spec.horizon_s) for f in futures] for c in order])  # candidates × futures
        gain = costs - costs[0]  # paired with the base, future by future (common random numbers)
        se = gain.std(axis=1, ddof=1) / math.sqrt(len(futures)) if len(futures) > 1 else np.zeros(len(order))
        mean = np.where(gain.mean(axis=1) + spec.z * se < 0, gain.mean(axis=1), 0.0)
        return order[int(np.argmin(mean))]  # argmin takes the first of equal means: the base

    def draw_future(self, view: View, rng: np.random.Generator) -> Future:
        """One resampled future at this instant (:func:`draw_future`), keeping the true parts ``know`` names."""
        assert self._futures is not None
        return draw_future(view, self._futures, self.spec.horizon_s, rng, self.spec.know)


def draw_future(view: View, model: FutureModel, horizon_s: float, rng: np.random.Generator,
                know: frozenset[str] = frozenset()) -> Future:
    """One resampled future at ``view``'s instant: arrivals spliced from ``model``'s training streams up to
    ``horizon_s`` [s] ahead, runtimes of the jobs pending or running drawn from what their requests say (what a
    scheduler knows); the true ones for what ``know`` names (``arrivals``, ``runtimes``)."""
    now = view.time_s
    ended = view.ended_since(0)
    known_ids = [*view.pending, *view.running, *(r.job.job_id for r in ended)]
    first_id = max(known_ids, default=-1) + 1
    arrivals = None if "arrivals" in know else model.arrivals(now, view.arrivals_left, now + horizon_s, first_id, rng)
    runtimes: dict[int, float] = {}
    if "runtimes" not in know:
        runtimes = {job_id: model.runtime_s(job, _done_work_s(view, job_id), rng)
                    for job_id, job in view.pending.items()}
        for job_id, running in view.running.items():
            elapsed_s = now - running.start_time_s
            runtimes[job_id] = model.runtime_s(running.job, _done_work_s(view, job_id) + elapsed_s, rng)
    return Future(arrivals, runtimes)


def _done_work_s(view: View, job_id: int) -> float:
    history = view.history.get(job_id)
    return history.done_work_s if history is not None else 0.0


def planner_policy(name: str, make_policy: Callable[[str], Policy], futures: FutureModel | None = None) -> Planner:
    """The planner called ``name`` (module docstring), its candidates made by ``make_policy``."""
    return Planner(parse_planner(name, make_policy), make_policy, futures)
