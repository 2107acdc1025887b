"""Job orders for the peer compatibility mode (:mod:`envs.peer.engine`): RLScheduler's heuristics, job for job.

Each order is a :class:`~envs.peer.engine.KeyOrder`: one key per job, smaller first. The engine applies it as the
peer does: at every decision the queue is stably sorted in place by the key and its first job committed, so ties
keep the list order the earlier sorts left (arrival order without backfilling). Called as a ``choose(queue, now)``
it is the stable arg-min of the key over the queue. Notation: ``s`` = absolute submit time [s],
``r`` = requested time [s], ``n`` = processors, ``now`` = decision time [s].

- ``fcfs``: ``s``. ``sjf``: ``(r, s)`` (the request; clairvoyant when the trace has no estimates). ``saf`` (ours,
  not the peer's): ``(n * r, s)``.
- ``f1``: ``log10(r') * n + 870 * log10(s')``, ``r'``/``s'`` = the value if > 0 else 0.1 (absolute submit).
- ``wfp3-peer`` / ``unicep-peer``: the peer's code as it runs, with its bug: the wait is ``-(s + 1)`` (an
  unscheduled job's "scheduled time" is -1), so these are *static* orders. Keys in float64, operation by
  operation as the peer evaluates them: WFP3 ``-((float(-1 - s) / r) ** 3) * n``; UNICEP
  ``-((-1 - s) + 1e-15) / (log2(n + 1e-15) * r)``.
- ``wfp3`` / ``unicep``: the textbook (dynamic) orders with ``wait = now - s`` in the same formulas: WFP3
  priority ``(wait / r)^3 * n``, UNICEP priority ``wait / (log2(n) * r)``, highest first. UNICEP's guard for
  ``n = 1`` (log2(1) = 0) is the peer's epsilon: ``-(wait + 1e-15) / (log2(max(n, 1) + 1e-15) * r)``, so a waiting
  one-processor job (log2 about 1.4e-15) has a huge priority and goes first. This guard gives the clean-room
  means the reference quotes on lublin_256 (381.71 / 103.10 with rlsbackfill); ``log2(max(n, 2))`` would give
  370.56 / 98.65. A request time <= 0 is floored at 0.1 s in both (the peer's formulas divide by it).

Two stages (ours, not the peer's): ``ORDER/BY@FRACTION`` keeps the first ``ceil(FRACTION * n)`` of the ``n``
queued jobs by ``BY`` and commits ``ORDER``'s first among them (:func:`shortlist_order`).

Backfill: ``+rlsbackfill`` selects the peer's simplified backfill (see :mod:`envs.peer.engine`; not EASY).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from envs.core.errors import ConfigError
from envs.peer.engine import Choose, KeyOrder
from envs.peer.swf import PeerJob

StaticKey = Callable[[PeerJob], object]
DynamicKey = Callable[[PeerJob, int], float]

_EPS = 1e-15  # the peer's guard against log2(1) = 0 and a zero wait
_FLOOR = 0.1  # what F1 (and our textbook orders) use for a request or submit time <= 0 [s]
_BACKFILL = "rlsbackfill"
_PREFIX = "rls:"


def _at_least_floor(value: float) -> float:
    return value if value > 0 else _FLOOR


def fcfs_key(job: PeerJob) -> int:
    """FCFS: submit time [s]."""
    return job.submit


def sjf_key(job: PeerJob) -> tuple[int, int]:
    """SJF: (request time, submit time) [s]."""
    return job.request, job.submit


def saf_key(job: PeerJob) -> tuple[int, int]:
    """SAF: (processors x request [processor-seconds], submit time [s])."""
    return job.procs * job.request, job.submit


def f1_key(job: PeerJob) -> float:
    """F1 (Carastan-Santos and de Camargo): log10(r') * n + 870 * log10(s')."""
    return math.log10(_at_least_floor(job.request)) * job.procs + 870 * math.log10(_at_least_floor(job.submit))


def wfp3_peer_key(job: PeerJob) -> float:
    """The peer's WFP3 as it runs: -(((-1 - s) / r) ** 3) * n, a static key (raises when r = 0, as the peer does)."""
    if job.request == 0:
        raise ZeroDivisionError(f"job {job.job_id}: request time 0; the peer's WFP3 divides by it and crashes")
    return -((float(-1 - job.submit) / job.request) ** 3) * job.procs


def unicep_peer_key(job: PeerJob) -> float:
    """The peer's UNICEP as it runs: -((-1 - s) + 1e-15) / (log2(n + 1e-15) * r), a static key.

    r = 0 gives ±inf as numpy does (the numerator is never 0); n < 0 has no logarithm: the peer's sort order is
    undefined there (NaN keys), so it raises ``ValueError``.
    """
    numerator = -((-1 - job.submit) + _EPS)
    if job.procs + _EPS <= 0:
        raise ValueError(f"job {job.job_id}: {job.procs} processors; the peer's UNICEP key is NaN (order undefined)")
    denominator = math.log2(job.procs + _EPS) * job.request
    if denominator == 0:
        return math.copysign(math.inf, numerator) * math.copysign(1.0, denominator)
    return numerator / denominator


def wfp3_key(job: PeerJob, now: int) -> float:
    """Textbook WFP3, ascending: -((wait / r) ** 3) * n with wait = now - s [s]."""
    return -(((now - job.submit) / _at_least_floor(job.request)) ** 3) * job.procs


def unicep_key(job: PeerJob, now: int) -> float:
    """Textbook UNICEP, ascending: -(wait + 1e-15) / (log2(n + 1e-15) * r) with wait = now - s [s]."""
    return -((now - job.submit) + _EPS) / (math.log2(max(job.procs, 1) + _EPS) * _at_least_floor(job.request))


def static_order(key: StaticKey) -> KeyOrder:
    """The peer-style order by ``key(job)`` (cached per job): the queue is sorted by it at every decision."""
    return KeyOrder(key=key)


def dynamic_order(key: DynamicKey) -> KeyOrder:
    """The peer-style order by ``key(job, now)``: the queue is sorted by it at every decision."""
    return KeyOrder(dynamic_key=key)


def first_among(order: Choose, queue: Sequence[PeerJob], keep: Sequence[int], now: int) -> int:
    """The queue index of ``order``'s pick among the queued jobs at indices ``keep`` (ascending, so that ties still
    go to the job earlier in the queue)."""
    return keep[order([queue[i] for i in keep], now)]


def shortlist_order(order: Choose, by: KeyOrder, fraction: float) -> Choose:
    """A two-stage order: the ``ceil(fraction * n)`` first of the ``n`` queued jobs by ``by`` (ties by queue
    order), then among them the first by ``order`` (ties by queue order). It commits its pick and reorders nothing
    (only single-key orders sort the queue, as the peer's heuristics do)."""

    def choose(queue: Sequence[PeerJob], now: int) -> int:
        first = by.keys(queue, now)
        keep = sorted(range(len(queue)), key=lambda i: (first[i], i))[: math.ceil(fraction * len(queue))]
        return first_among(order, queue, sorted(keep), now)

    return choose


_ORDERS: dict[str, tuple[Callable[[], KeyOrder], str]] = {
    "fcfs": (lambda: static_order(fcfs_key), "first come first served: smallest submit time"),
    "sjf": (lambda: static_order(sjf_key), "shortest job first: smallest request time, then submit time"),
    "f1": (lambda: static_order(f1_key), "F1: smallest log10(request) * procs + 870 * log10(absolute submit)"),
    "wfp3-peer": (
        lambda: static_order(wfp3_peer_key),
        "the peer's WFP3 with its bug (wait = -(submit + 1)): static, smallest ((s + 1) / r)^3 * n",
    ),
    "unicep-peer": (
        lambda: static_order(unicep_peer_key),
        "the peer's UNICEP with its bug (wait = -(submit + 1)): static, about (s + 1) / (log2(n) * r)",
    ),
    "wfp3": (lambda: dynamic_order(wfp3_key), "textbook WFP3: highest (wait / request)^3 * procs"),
    "unicep": (
        lambda: dynamic_order(unicep_key),
        "textbook UNICEP: highest wait / (log2(procs + 1e-15) * request); 1-processor jobs first once waiting",
    ),
    "saf": (lambda: static_order(saf_key), "smallest area first: smallest procs * request, then submit time"),
}

RLS_ORDERS: tuple[str, ...] = tuple(_ORDERS)
"""Names of the peer-compatible orders (each may take ``/BY@FRACTION`` and ``+rlsbackfill``)."""

RLS_DOCS: dict[str, str] = {name: doc for name, (_, doc) in _ORDERS.items()} | {
    "ORDER/BY@FRACTION": "two stages: the first FRACTION of the queue by the order BY, then ORDER's first among "
    "them (e.g. sjf/f1@0.5: the shortest job among the half of the queue that F1 ranks first)",
    _BACKFILL: "the peer's backfill (not EASY): a shadow time computed once per blocked job; queued jobs whose "
    "request ends strictly before it start if they fit now",
}
"""One line per order, and for the ``rlsbackfill`` suffix."""


def rls_policy(name: str) -> tuple[Choose, bool]:
    """``(choose, backfill)`` for a name like ``fcfs``, ``sjf+rlsbackfill``, ``rls:wfp3-peer+rlsbackfill`` or the
    two-stage ``sjf/f1@0.5`` (see :func:`shortlist_order`)."""
    text = name.strip().lower().removeprefix(_PREFIX)
    head, plus, suffix = text.partition("+")
    order, slash, shortlist = head.partition("/")
    by, at, fraction = shortlist.partition("@")
    if order not in _ORDERS or (plus and suffix != _BACKFILL) or (slash and (by not in _ORDERS or not at)):
        raise ConfigError(f"rls policy {name!r}: unknown; known orders: {', '.join(_ORDERS)}, each optionally "
                          f"/BY@FRACTION (BY an order) and +{_BACKFILL}")
    choose = _ORDERS[order][0]()
    if not slash:
        return choose, bool(plus)
    try:
        share = float(fraction)
    except ValueError:
        raise ConfigError(f"rls policy {name!r}: fraction {fraction!r} is not a number") from None
    if not 0 < share <= 1:
        raise ConfigError(f"rls policy {name!r}: fraction must be in (0, 1], got {share}")
    return shortlist_order(choose, _ORDERS[by][0](), share), bool(plus)
