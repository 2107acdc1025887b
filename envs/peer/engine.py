"""Peer compatibility mode: the RLScheduler (SchedGym) simulator's world, reproduced exactly.

Our own simulator (:mod:`envs.sim.simulator`) batches decision points and models GPUs; the peer does neither, so
its published heuristic results are reproduced by this separate, small engine, written clean-room from the plain
description in the peer reference's ``SEMANTICS.md`` (``../shared/reference`` beside the checkout; section numbers
below refer to it). It holds the world's rules only; the order in which jobs are picked comes from a ``choose``
callback (heuristics in ``baselines/rls.py``, or a learned agent). Times are integer seconds, as in the SWF file.

World rules (per sequence of jobs, from scratch):

- Machine: a count of free nodes; a job needs ``ceil(procs / procs_per_node)`` nodes and fits when that is at
  most the free count (§2).
- Clock starts at the first job's submit time; only that job is queued (§5.1).
- Queue: one list, arrivals appended (§4). At a decision a :class:`KeyOrder` (the peer's heuristics) stably sorts
  it in place by its key and commits its first job; any other ``choose(queue, now)`` (an agent, a two-stage order)
  picks one queued job and leaves the others in place. The committed job starts now if it fits, else nothing else
  starts (except peer backfilling) until it does; arrivals meanwhile do not revisit the choice.
  Events are processed one at a time: the next arrival when its submit time is at most the earliest actual
  completion (arrivals first on ties), otherwise that completion (§5.2).
- After a start the next decision is at the same instant; with an empty queue, running jobs that end strictly
  before the next arrival complete and that single arrival is decided on alone (§5.4).
- ``backfill=True`` is the peer's simplified backfill, not EASY (§7): when the committed job blocks, a shadow time
  is computed once from running jobs' estimated ends (start + request); then before every event the queue is
  stably sorted in place by submit time (jobs with equal submits keep the order the last key sort left) and each
  queued job, in that order, starts if it fits now and ``now + request < shadow``.
- Completion ties: running jobs are kept as a list; ties in actual end complete in list order, which is start
  order, re-sorted by estimated end (stably) at each shadow computation (§7.5).
- Metric: bounded slowdown ``max(1, (start - submit + run) / max(run, 10))``; the sequence's value is the sum of
  ``bsld / n`` in start order (§6).

Protocol (§3): a legacy ``numpy.random.RandomState`` seeded as gym 0.12.5's ``seeding.np_random(seed)`` does
(SHA-512 of the decimal seed), then ``randint(length, n_jobs - length - 1)`` per sequence gives its first job.
"""

from __future__ import annotations

import hashlib
import heapq
import itertools
import struct
import time
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from envs.core.errors import ConfigError, SimulationStalled
from envs.peer.swf import PeerJob, PeerMachine, PeerTrace

Choose = Callable[[Sequence[PeerJob], int], int]
"""``choose(queue, now)``: the index in ``queue`` (queue order, read-only) of the job to commit at time ``now`` [s]."""

Sorter = Callable[[list[int], int], None]
"""``sort(queue, now)``: reorder a sequence's queue (positions of its jobs) in place, at time ``now`` [s]."""


class KeyOrder:
    """A priority order given by one key per job (smaller first), applied as the peer applies its heuristics (§4):
    at every decision the queue is stably sorted in place by the key, which leaves ties in their current list
    order, and its first job is committed.

    Give ``key(job)`` for a static order (keys are cached per job) or ``dynamic_key(job, now)`` for one that
    changes with the clock. Called as a :data:`Choose`, it returns the index of the queue's first job by key, ties
    to the earlier one, without reordering anything (for an agent's teacher or a two-stage order).
    """

    _CACHE_JOBS = 1 << 17  # static keys kept before the cache starts over

    def __init__(self, key: Callable[[PeerJob], Any] | None = None,
                 dynamic_key: Callable[[PeerJob, int], Any] | None = None) -> None:
        if (key is None) == (dynamic_key is None):
            raise ValueError("KeyOrder: give exactly one of key and dynamic_key")
        self._key, self._dynamic = key, dynamic_key
        self._cache: dict[PeerJob, Any] = {}

    def _static(self, job: PeerJob) -> Any:
        value = self._cache.get(job, self)  # self: a sentinel no key equals
        if value is self:
            if len(self._cache) > self._CACHE_JOBS:
                self._cache.clear()  # bound the memory of a long-lived order; keys are cheap to recompute
            value = self._cache[job] = self._key(job)  # type: ignore[misc]
        return value

    def keys(self, queue: Sequence[PeerJob], now: int) -> list:
        """The key of every job of ``queue`` at time ``now``, in queue order."""
        if self._dynamic is not None:
            return [self._dynamic(job, now) for job in queue]
        return list(map(self._static, queue))

    def __call__(self, queue: Sequence[PeerJob], now: int) -> int:
        values = self.keys(queue, now)
        return values.index(min(values))

    def sorter(self, jobs: Sequence[PeerJob]) -> Sorter:
        """The in-place sort of a queue of positions into ``jobs`` (one sequence)."""
        dynamic = self._dynamic
        if dynamic is None:
            by_position = list(map(self._static, jobs)).__getitem__
            return lambda queue, now: queue.sort(key=by_position)
        return lambda queue, now: queue.sort(key=lambda p: dynamic(jobs[p], now))


SEQUENCE_LENGTH = 1024  # jobs per evaluation sequence (the peer's --len)
SEQUENCE_COUNT = 10  # sequences per evaluation (the peer's --iter)
PEER_SEED = 1  # the peer's --seed

BSLD_THRESHOLD_S = 10  # bounded-slowdown denominator floor [s]


@dataclass(frozen=True)
class PeerResult:
    """One sequence scheduled by the peer's rules."""

    start_times: tuple[int, ...]
    """Start time [s] of every job, in the order of the sequence (trace order)."""
    start_order: tuple[int, ...]
    """Positions in the sequence, in the order the jobs started."""
    avg_bsld: float
    """Average bounded slowdown, summed as the peer does (bsld / n, in start order)."""


@dataclass(frozen=True)
class PeerEvaluation:
    """The peer's protocol on one trace: one result per sampled sequence."""

    start_indices: tuple[int, ...]
    """Index in the parsed job list of each sequence's first job."""
    results: tuple[PeerResult, ...]

    @property
    def avg_bsld(self) -> tuple[float, ...]:
        """Per-sequence average bounded slowdowns."""
        return tuple(r.avg_bsld for r in self.results)

    @property
    def mean_avg_bsld(self) -> float:
        """Arithmetic mean of the per-sequence averages (the number the peer's README table shows)."""
        return sum(self.avg_bsld) / len(self.results)


def gym_seed_words(seed: int) -> list[int]:
    """The word list gym 0.12.5's ``seeding.np_random(seed)`` seeds ``RandomState`` with.

    gym hashes the seed: the first 8 bytes of SHA-512 of ``str(seed)`` as a little-endian integer, split into
    32-bit words, least significant first, without leading zero words (at least one word). Seed 1 gives
    ``[2739863373, 598274112]``.
    """
    if seed < 0:
        raise ConfigError(f"seed: must be >= 0, got {seed}")
    digest = hashlib.sha512(str(seed).encode("utf8")).digest()
    words = list(struct.unpack("<2I", digest[:8]))
    while len(words) > 1 and words[-1] == 0:
        words.pop()
    return words


def peer_start_indices(
    n_jobs: int, seed: int = PEER_SEED, count: int = SEQUENCE_COUNT, length: int = SEQUENCE_LENGTH
) -> tuple[int, ...]:
    """First-job indices of the peer's evaluation sequences: ``randint(length, n_jobs - length - 1)`` each.

    ``n_jobs`` is the number of parsed jobs (or the peer's ``batch_job_slice`` when that is nonzero).
    """
    if n_jobs - length - 1 <= length:
        raise ConfigError(f"n_jobs: {n_jobs} jobs are too few for sequences of {length} (need > {2 * length + 1})")
    rng = np.random.RandomState(gym_seed_words(seed))
    return tuple(int(rng.randint(length, n_jobs - length - 1)) for _ in range(count))


def evaluate_peer(
    trace: PeerTrace,
    choose: Choose,
    backfill: bool = False,
    seed: int = PEER_SEED,
    count: int = SEQUENCE_COUNT,
    length: int = SEQUENCE_LENGTH,
) -> PeerEvaluation:
    """Run the peer's evaluation protocol (§3) on ``trace`` with one ordering and backfill mode."""
    starts = peer_start_indices(len(trace.jobs), seed, count, length)
    results = tuple(run_sequence(trace.jobs[s : s + length], trace.machine, choose, backfill) for s in starts)
    return PeerEvaluation(starts, results)


class Decision(NamedTuple):
    """The engine's state at a decision point (live objects: read them before sending the choice back)."""

    queue: list[int]
    """Positions (in the sequence) of the queued jobs, in queue order; the choice is an index into this list."""
    now: int
    """Decision time [s]."""
    free: int
    """Free nodes."""
    running: list[tuple[int, int, int]]
    """Heap of (actual end [s], list rank, position) of the running jobs."""
    start: list[int]
    """Start time [s] of every job of the sequence that has started (by position; others hold 0)."""
    order: list[int]
    """Positions of the started jobs, in start order."""


def run_sequence(jobs: Sequence[PeerJob], machine: PeerMachine, choose: Choose, backfill: bool = False,
                 latencies: list[float] | None = None) -> PeerResult:
    """Schedule ``jobs`` (in trace order) on an empty ``machine`` by the peer's rules; see the module docstring.

    A :class:`KeyOrder` sorts the queue in place at every decision and commits its first job; any other ``choose``
    gets a fresh list of the queued jobs (queue order) and returns the index of the job to commit. With
    ``latencies``, the wall-clock time of every decision is appended to it [s].

    Raises :class:`~envs.core.errors.SimulationStalled` when the committed job does not fit and nothing is running
    (a job larger than the machine: the peer aborts on an assertion there).
    """
    steps = decisions(jobs, machine, backfill)
    sort = choose.sorter(jobs) if isinstance(choose, KeyOrder) else None
    clock = time.perf_counter
    try:
        d = next(steps)
        while True:
            t0 = clock() if latencies is not None else 0.0
            if sort is not None:
                sort(d.queue, d.now)
                k = 0
            else:
                k = choose(list(map(jobs.__getitem__, d.queue)), d.now)
            if latencies is not None:
                latencies.append(clock() - t0)
            d = steps.send(k)
    except StopIteration as done:
        return done.value


def decisions(
    jobs: Sequence[PeerJob], machine: PeerMachine, backfill: bool = False
) -> Generator[Decision, int, PeerResult]:
    """The peer's rules as a generator: yields a :class:`Decision` at each decision point and takes the index (in
    ``Decision.queue``) of the job to commit by ``send``; returns the :class:`PeerResult` (``StopIteration.value``).

    This is the single implementation behind :func:`run_sequence` (a ``choose`` callback) and the learning env
    (:mod:`envs.peer.env`, an agent's action).
    """
    n = len(jobs)
    if n == 0:
        raise ConfigError("jobs: a sequence needs at least one job")
    submit = [j.submit for j in jobs]
    run = [j.run for j in jobs]
    request = [j.request for j in jobs]
    nodes = [machine.nodes_for(j.procs) for j in jobs]
    start: list[int] = [0] * n
    order: list[int] = []
    free = machine.nodes
    running: list[tuple[int, int, int]] = []  # heap of (actual end [s], list rank, position): completion order
    rank = itertools.count()  # list rank of a started job: appended after every job already running

    push, pop = heapq.heappush, heapq.heappop

    def launch(p: int, now: int) -> None:
        nonlocal free
        start[p] = now
        order.append(p)
        free -= nodes[p]
        push(running, (now + run[p], next(rank), p))

    now = submit[0]
    queue = [0]  # positions, in queue order
    arrived = 1
    while True:
        k = yield Decision(queue, now, free, running, start, order)
        if not 0 <= k < len(queue):
            raise IndexError(f"choice {k}: the queue holds {len(queue)} jobs")
        p = queue.pop(k)
        if nodes[p] > free:
            if backfill:
                shadow = _shadow(running, rank, p, free, nodes, start, request, jobs, machine)
                queue.sort(key=submit.__getitem__)  # the peer keeps this order
                # Passes walk the queue in this order, less the jobs whose estimate no longer ends before the
                # shadow: with the clock only moving forward they never qualify again while this job blocks.
                candidates = queue  # the first pass, due now, keeps a list of its own
                pending = True  # a pass is due: the blocking began, or free nodes grew
            while nodes[p] > free:
                if backfill and pending:
                    kept, launched = [], set()
                    for q in candidates:
                        if now + request[q] < shadow:
                            if nodes[q] <= free:
                                launch(q, now)
                                launched.add(q)
                            else:
                                kept.append(q)
                    if launched:
                        queue = [q for q in queue if q not in launched]
                    candidates = kept
                    pending = False
                if not running:
                    raise _stalled(jobs[p], nodes[p], free)
                if arrived < n and submit[arrived] <= running[0][0]:
                    queue.append(arrived)
                    if submit[arrived] > now:
                        now = submit[arrived]
                    if backfill:
                        if len(queue) > 1 and submit[arrived] < submit[queue[-2]]:  # out of submit order: re-sort
                            queue.sort(key=submit.__getitem__)
                            candidates = [q for q in queue if now + request[q] < shadow]
                            pending = True
                        elif now + request[arrived] < shadow:
                            if nodes[arrived] <= free:  # free nodes are unchanged: only the newcomer may start
                                launch(arrived, now)
                                queue.pop()
                            else:
                                candidates.append(arrived)
                    arrived += 1
                else:
                    end, _, q = pop(running)
                    if end > now:
                        now = end
                    free += nodes[q]
                    pending = backfill
        launch(p, now)
        if queue:
            continue
        if arrived == n:
            break
        while running and running[0][0] < submit[arrived]:
            free += nodes[pop(running)[2]]
        queue.append(arrived)
        if submit[arrived] > now:
            now = submit[arrived]
        arrived += 1
    avg = 0.0
    for p in order:  # the peer's sum, in start order: bsld / n per job
        avg += bounded_slowdown(start[p], submit[p], run[p]) / n
    return PeerResult(tuple(start), tuple(order), avg)


def bounded_slowdown(start: int, submit: int, run: int) -> float:
    """The peer's bounded slowdown of a job: ``max(1, (start - submit + run) / max(run, 10))`` (times in [s])."""
    return max(1, (start - submit + run) / max(run, BSLD_THRESHOLD_S))


def _shadow(
    running: list[tuple[int, int, int]],
    rank: itertools.count,
    p: int,
    free: int,
    nodes: list[int],
    start: list[int],
    request: list[int],
    jobs: Sequence[PeerJob],
    machine: PeerMachine,
) -> int:
    """The shadow time of committed job ``p`` (§7.1) [s]; re-ranks ``running`` by estimated end, in place.

    Walks the running jobs by estimated end (start + request; ties in list order), counting processors: the free
    nodes, then each visited job's nodes, times processors per node. The shadow is the estimated end at which
    the count first reaches the job's processors, else the last one.
    """
    if not running:
        raise _stalled(jobs[p], nodes[p], free)
    ppn = machine.procs_per_node
    by_estimate = sorted(running, key=lambda e: (start[e[2]] + request[e[2]], e[1]))
    procs = free * ppn
    shadow = 0
    for _, _, q in by_estimate:
        procs += nodes[q] * ppn
        shadow = start[q] + request[q]
        if procs >= jobs[p].procs:
            break
    running[:] = [(end, next(rank), q) for end, _, q in by_estimate]  # the list order is now estimated-end order
    heapq.heapify(running)
    return shadow


def _stalled(job: PeerJob, nodes: int, free: int) -> SimulationStalled:
    """The error for a committed job that can never fit (the peer aborts on an assertion)."""
    return SimulationStalled(f"job {job.job_id} needs {nodes} nodes, {free} are free and nothing is running")
