"""Priority orders (SPEC §6): which pending job should go first.

An order ranks the pending jobs of a view, highest priority first; the backfilling and placement heuristics
decide what to do with the ranking. Every order breaks ties by submit time, then job id. "GPUs" below is the
job's GPU share (``n_gpus × gpu_milli / 1000``, so a half-GPU job counts 0.5), "req" its requested wall time
``runtime_estimate_s`` and "wait" ``now - submit`` [s].

Each order's key is the first line of its class docstring; :data:`ORDER_DOCS` (``python -m baselines``) lists them.

Guards: req′ = max(req, 0.1 s) and submit′ = max(submit, 0.1 s), so that no key divides by zero or takes the log
of zero (a request of 0 s is valid input). UNICEP's log2(GPUs) is 0 for one GPU and negative for a fractional
share, which would divide by zero or flip the sign; GPUs are floored at 2 inside the log2, so a job of at most two
GPUs (whole or fractional) gets the denominator req′ (log2 2 = 1) and larger jobs get the textbook log2(GPUs) × req′.
WFP3 and UNICEP are the textbook (dynamic) keys, not the peer simulator's static bug (``reference/README.md``).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol, runtime_checkable

from baselines.fairshare import DAY_S, DEFAULT_HALF_LIFE_S, FairShare
from baselines.fairtree import FairTree
from envs.core.errors import ConfigError
from envs.core.job import Job
from envs.sim.view import View

MIN_TIME_S = 0.1
"""Floor of req and submit wherever a key divides by them or takes their log [s]."""

DEFAULT_MAX_AGE_S = 7 * DAY_S
"""Slurm's PriorityMaxAge default (7-0): the wait at which the age factor reaches 1 [s]."""

FAIRSHARE_KINDS = ("classic", "fairtree")
"""Where multifactor's fair-share factor comes from: Slurm's classic formula (:class:`FairShare`) or Fair Tree
(:class:`FairTree`)."""


@runtime_checkable
class Order(Protocol):
    """A priority order: ranks the pending jobs of a view, highest priority first."""

    name: str

    def reset(self) -> None:
        """Forget any state from a previous run (usage history)."""

    def rank(self, view: View) -> list[Job]:
        """The pending jobs, highest priority first; ties by submit time, then job id."""


def rank_by(jobs: Iterable[Job], key: Callable[[Job], float]) -> list[Job]:
    """``jobs`` sorted by ascending ``key``, ties by submit time, then job id."""
    return sorted(jobs, key=lambda j: (key(j), j.submit_time_s, j.job_id))


class _KeyOrder:
    """An order given by a key per job (lowest first) that may depend on the current time; stateless."""

    name = ""

    def reset(self) -> None:
        """Stateless: nothing to forget."""

    def rank(self, view: View) -> list[Job]:
        """The pending jobs by ascending key, ties by submit time, then job id."""
        return rank_by(view.pending.values(), self.key(view.time_s))

    def key(self, now_s: float) -> Callable[[Job], float]:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class Fcfs(_KeyOrder):
    """First come, first served: submit time, then job id (the queue order)."""

    name = "fcfs"

    def rank(self, view: View) -> list[Job]:
        """The pending jobs by submit time, then job id: the simulator's queue order itself (no sort needed)."""
        return list(view.pending.values())

    def key(self, now_s: float) -> Callable[[Job], float]:
        return lambda j: j.submit_time_s


class Sjf(_KeyOrder):
    """Shortest job first: requested wall time ascending."""

    name = "sjf"

    def key(self, now_s: float) -> Callable[[Job], float]:
        return lambda j: j.runtime_estimate_s


class Saf(_KeyOrder):
    """Smallest area first: GPU share × requested wall time ascending [GPU-seconds]."""

    name = "saf"

    def key(self, now_s: float) -> Callable[[Job], float]:
        return lambda j: j.gpu_share * j.runtime_estimate_s


class Ljf(_KeyOrder):
    """Longest job first: requested wall time descending."""

    name = "ljf"

    def key(self, now_s: float) -> Callable[[Job], float]:
        return lambda j: -j.runtime_estimate_s


class Wfp3(_KeyOrder):
    """WFP3: priority (wait / req′)³ × GPUs, highest first (dynamic: long waits of short jobs win)."""

    name = "wfp3"

    def key(self, now_s: float) -> Callable[[Job], float]:
        return lambda j: -((now_s - j.submit_time_s) / max(j.runtime_estimate_s, MIN_TIME_S)) ** 3 * j.gpu_share


class Unicep(_KeyOrder):
    """UNICEP: priority wait / (log2(max(GPUs, 2)) × req′), highest first (dynamic)."""

    name = "unicep"

    def key(self, now_s: float) -> Callable[[Job], float]:
        return lambda j: -(now_s - j.submit_time_s) / (
            math.log2(max(j.gpu_share, 2.0)) * max(j.runtime_estimate_s, MIN_TIME_S))


class F1(_KeyOrder):
    """F1: key log10(req′) × GPUs + 870 × log10(submit′), lowest first."""

    name = "f1"

    def key(self, now_s: float) -> Callable[[Job], float]:
        return lambda j: (math.log10(max(j.runtime_estimate_s, MIN_TIME_S)) * j.gpu_share
                          + 870.0 * math.log10(max(j.submit_time_s, MIN_TIME_S)))


class PriorityOrder(_KeyOrder):
    """Priority class: job priority descending (Kubernetes' queue order: priority, then creation time)."""

    name = "priority"

    def key(self, now_s: float) -> Callable[[Job], float]:
        return lambda j: -j.priority


class FairShareOrder:
    """Slurm classic fair share: the job's account's factor F = 2^(-U/S) highest first, then age (older first).

    Arguments (see :class:`~baselines.fairshare.FairShare`): ``half_life_s`` — usage half-life [s], default 7 days
    (Slurm PriorityDecayHalfLife), inf = no decay; ``by`` — ``"user"`` or ``"team"``; ``shares`` — raw shares per
    account, default equal shares among the accounts seen so far; ``default_share`` — raw share of an unlisted
    account.
    """

    name = "fairshare"

    def __init__(self, half_life_s: float = DEFAULT_HALF_LIFE_S, by: str = "user",
                 shares: Mapping[str, float] | None = None, default_share: float = 1.0) -> None:
        self.fair_share: FairShare | FairTree = FairShare(half_life_s, by, shares, default_share)

    def reset(self) -> None:
        """Forget all usage."""
        self.fair_share.reset()

    def rank(self, view: View) -> list[Job]:
        """The pending jobs by descending fair-share factor, then submit time, then job id."""
        factors, account = self.fair_share.factors(view), self.fair_share.account
        return rank_by(view.pending.values(), lambda j: -factors[account(j)])


class FairTreeOrder(FairShareOrder):
    """Slurm Fair Tree: the user's rank in the account tree walked by Level Fairshare / users, highest first, then age.

    Arguments (see :class:`~baselines.fairtree.FairTree`): ``accounts`` — ``{name: {"shares": raw shares,
    "parent": account}}`` (default: every team an account of 1 share under root); ``users`` — raw shares per user
    (default 1); ``half_life_s`` — usage half-life [s], default 7 days (Slurm PriorityDecayHalfLife), inf = no decay.
    """

    name = "fairtree"

    def __init__(self, accounts: Mapping[str, Mapping[str, object]] | None = None,
                 users: Mapping[str, float] | None = None, half_life_s: float = DEFAULT_HALF_LIFE_S) -> None:
        self.fair_share = FairTree(accounts, users, half_life_s, where="order 'fairtree'")


class MultifactorOrder:
    """Slurm multifactor: w_age·age + w_fairshare·F + w_size·size + w_qos·qos, each factor in [0, 1], highest first.

    priority = w_age × min(1, wait / max_age_s) + w_fairshare × F + w_size × GPUs / cluster GPUs
    + w_qos × clip(job.priority / max_priority, 0, 1).

    F is the classic fair-share factor (:class:`FairShareOrder`), or with ``fairshare="fairtree"`` the Fair Tree
    factor (:class:`FairTreeOrder`, configured by ``accounts`` and ``users``). The size factor favours large jobs,
    as Slurm does by default (PriorityFavorSmall=NO). Default weights follow the example configuration of Slurm's
    multifactor documentation (age 1000, fair share 10000, job size 1000) with QoS 10000, so that a priority class
    outweighs every other factor but fair share; Slurm's own default for every weight is 0, which would rank nothing.
    ``max_age_s`` defaults to Slurm's PriorityMaxAge (7 days); ``max_priority`` = 2 maps the synthetic
    generator's top class ("high") to 1.
    """

    name = "multifactor"

    def __init__(self, w_age: float = 1000.0, w_fairshare: float = 10_000.0, w_size: float = 1000.0,
                 w_qos: float = 10_000.0, max_age_s: float = DEFAULT_MAX_AGE_S, max_priority: float = 2.0,
                 half_life_s: float = DEFAULT_HALF_LIFE_S, by: str = "user",
                 shares: Mapping[str, float] | None = None, default_share: float = 1.0, fairshare: str = "classic",
                 accounts: Mapping[str, Mapping[str, object]] | None = None,
                 users: Mapping[str, float] | None = None) -> None:
        for key, value in (("w_age", w_age), ("w_fairshare", w_fairshare), ("w_size", w_size), ("w_qos", w_qos)):
            if not (math.isfinite(value) and value >= 0):
                raise ConfigError(f"order 'multifactor': {key}: must be finite and >= 0, got {value}")
        for key, value in (("max_age_s", max_age_s), ("max_priority", max_priority)):
            if not (math.isfinite(value) and value > 0):
                raise ConfigError(f"order 'multifactor': {key}: must be finite and > 0, got {value}")
        self.weights = {"age": float(w_age), "fairshare": float(w_fairshare), "size": float(w_size),
                        "qos": float(w_qos)}
        self.max_age_s = float(max_age_s)
        self.max_priority = float(max_priority)
        where = "order 'multifactor'"
        self.fair_share: FairShare | FairTree
        if fairshare == "classic":
            if accounts is not None or users is not None:
                raise ConfigError(f"{where}: accounts, users: only with fairshare='fairtree'")
            self.fair_share = FairShare(half_life_s, by, shares, default_share)
        elif fairshare == "fairtree":
            if by != "user" or shares is not None or default_share != 1.0:
                raise ConfigError(f"{where}: by, shares, default_share: only with fairshare='classic' (Fair Tree "
                                  "charges users under their team's account, with shares from accounts and users)")
            self.fair_share = FairTree(accounts, users, half_life_s, where)
        else:
            raise ConfigError(f"{where}: fairshare: must be one of {', '.join(FAIRSHARE_KINDS)}, got {fairshare!r}")

    def reset(self) -> None:
        """Forget all usage."""
        self.fair_share.reset()

    def priorities(self, view: View) -> dict[int, float]:
        """The multifactor priority of every pending job, by job id."""
        return {job.job_id: p for job, p in self._scored(view)}

    def rank(self, view: View) -> list[Job]:
        """The pending jobs by descending priority, then submit time, then job id."""
        scored = self._scored(view)
        scored.sort(key=lambda jp: (-jp[1], jp[0].submit_time_s, jp[0].job_id))
        return [job for job, _ in scored]

    def _scored(self, view: View) -> list[tuple[Job, float]]:
        w = self.weights
        now, cluster_gpus = view.time_s, view.cluster.n_gpus
        factors, account = self.fair_share.factors(view), self.fair_share.account
        return [(job, w["age"] * min(1.0, (now - job.submit_time_s) / self.max_age_s)
                 + w["fairshare"] * factors[account(job)]
                 + w["size"] * job.gpu_share / cluster_gpus
                 + w["qos"] * min(1.0, max(0.0, job.priority / self.max_priority)))
                for job in view.pending.values()]


ORDERS: dict[str, Callable[..., Order]] = {
    "fcfs": Fcfs,
    "fifo": Fcfs,
    "sjf": Sjf,
    "saf": Saf,
    "ljf": Ljf,
    "wfp3": Wfp3,
    "unicep": Unicep,
    "f1": F1,
    "priority": PriorityOrder,
    "fairshare": FairShareOrder,
    "fairtree": FairTreeOrder,
    "multifactor": MultifactorOrder,
}
"""Factories of the priority orders by name; they take keyword parameters (see each class)."""

def _order_docs() -> dict[str, str]:
    docs: dict[str, str] = {}
    for name, factory in ORDERS.items():
        alias = next((other for other in docs if ORDERS[other] is factory), None)
        first_paragraph = (inspect.getdoc(factory) or "").split("\n\n")[0]
        docs[name] = f"alias of {alias}" if alias else " ".join(first_paragraph.split())
    return docs


ORDER_DOCS: dict[str, str] = _order_docs()
"""One line per order (the first paragraph of its class docstring), for command-line help and reports."""


def make_order(name: str, **params: object) -> Order:
    """The order registered as ``name``, built with ``params``; raises :class:`ConfigError` on unknown names or
    parameters, naming the known ones."""
    factory = ORDERS.get(name)
    if factory is None:
        raise ConfigError(f"order {name!r}: unknown (known: {', '.join(ORDERS)})")
    signature = inspect.signature(factory)
    unknown = [key for key in params if key not in signature.parameters]
    if unknown:
        accepted = ", ".join(signature.parameters) or "none"
        raise ConfigError(f"order {name!r}: unknown parameter(s) {', '.join(unknown)} (accepted: {accepted})")
    return factory(**params)
