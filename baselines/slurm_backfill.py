"""Slurm's backfill cycle (``sched/backfill``, ``_attempt_backfill`` in Slurm 22.05's backfill.c) and the will-run
test it asks the select plugin (``_will_run_test`` in cons_common/job_test.c), rule by rule.

**The node-space map** (``node_space_map_t``): time slots, each with the set of nodes that no reservation made
earlier in this cycle holds. It starts as one slot [now rounded down to ``bf_resolution``, that + ``bf_window``)
with every node. A reservation takes its **whole nodes** out of every slot of its window (``_add_reservation``:
``bit_and(node_space[j].avail_bitmap, res_bitmap)``), so no later job of the cycle is planned on those nodes then,
even on GPUs the reserved job leaves free. Running jobs are not in the map: the will-run test counts them, GPU by
GPU.

**Each job, in queue order** (up to ``bf_max_job_test``), from ``start_res`` = now:

1. the usable nodes: its partition's nodes that are free in every slot overlapping [start_res, start_res + its
   requested time] (a slot beginning exactly at the job's end counts: ``begin_time <= end_time``). ``later_start``
   is the end of the first slot ending after start_res whose next slot offers a partition node that this slot
   (with those before it) does not: a later try could use more nodes;
2. none usable, or the will-run test fails: try again from ``later_start`` (if any), else give up on the job;
3. the will-run test on those nodes (running jobs only): the job fits now → start = now; else the running jobs
   on those nodes are taken away in batches, by end (start + requested time): the first batch is every job ending
   within [first end, B + 30 s], B being the first end rounded up to the next multiple of 30 s of the wall clock
   (``end_time + (time_window - end_time % time_window)``); the window then doubles until it reaches the next end,
   and the next batch is every job ending within B + window. After each batch the job is placed again; its start is
   the **latest** end of the batch that made it fit (later, at times, than the first end that would have);
4. start = max(that, start_res). Now (or earlier) → the job starts now and holds its GPUs for the rest of the
   cycle. Later than ``later_start`` → try again from ``later_start``. Beyond now + ``bf_window`` → no reservation.
   Overlapping a reservation on its nodes ([start, end) rounded down to ``bf_resolution``; ``_test_resv_overlap``)
   → try again from that start. Otherwise the job is reserved on its nodes for [start, end), both rounded down to
   ``bf_resolution``, the end at least one resolution after the start.

Time limits are whole minutes (:func:`time_limit_s`), running jobs end at start + limit. Times that Slurm aligns
to the wall clock (30-s batches, resolution) use ``epoch_s``, the Unix time of simulated
time 0 (0 unless a replay says).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterator
from typing import NamedTuple

import numpy as np

from baselines.shapes import shape_key_of
from baselines.slurm_placement import nodes_needed
from envs.core.cluster import MILLI_PER_GPU, ClusterSpec
from envs.core.job import Job
from envs.sim.resources import ResourceState, add_node_holdings
from envs.sim.view import PlacementRule, View

WILL_RUN_WINDOW_S = 30
"""First batch window of the will-run test [s] (``time_window = 30``)."""

OVERDUE_START_S = 1.0
"""Start assumed for a job that fits only once a running job past its requested time has ended [s after now]."""

def time_limit_s(job: Job) -> float:
    """The job's time limit as Slurm holds it [s]: its requested time rounded up to whole minutes (``--time`` is in
    minutes; a limit given in seconds is rounded up)."""
    return math.ceil(job.runtime_estimate_s / 60 - 1e-9) * 60.0


MAX_TRIES = 1000
"""Retries of one job within a cycle before it is given up (a guard; each retry moves start_res forward)."""


class NodeSpace:
    """The node-space map of one backfill cycle (module docstring): slots [begin, end) in time order, each with the
    nodes no reservation holds then (a row of ``nodes``)."""

    def __init__(self, n_nodes: int, begin_s: float, end_s: float) -> None:
        self.begins = np.array([begin_s])
        self.ends = np.array([end_s])
        self.nodes = np.ones((1, n_nodes), dtype=bool)

    def usable(self, base: np.ndarray, start_res: float, end_s: float) -> tuple[np.ndarray, float]:
        """(nodes of ``base`` free in every slot overlapping [start_res, end_s], later_start or 0); start_res is
        -inf on a job's first try (Slurm's 0: every slot up to end_s counts). ``later_start`` is the end of the
        first slot ending after start_res whose next slot offers a node of ``base`` that this slot, with those
        before it, does not: trying again from there could use more nodes (``bit_super_set(next_bitmap,
        current_bitmap)`` in ``_attempt_backfill``)."""
        avail, later = base.copy(), 0.0
        for j in range(len(self.ends)):  # ends: one pass over the slots
            if not later and self.ends[j] > start_res and j + 1 < len(self.ends) and (
                    base & self.nodes[j + 1] & ~(avail & self.nodes[j])).any():
                later = float(self.ends[j])
            if self.ends[j] <= start_res:
                continue
            if self.begins[j] > end_s:
                break
            avail &= self.nodes[j]
        return avail, later

    def overlaps(self, nodes: np.ndarray, start_s: float, end_s: float) -> bool:
        """True when a slot within [start_s, end_s) lacks one of ``nodes`` (``_test_resv_overlap``)."""
        within = (self.ends > start_s) & (self.begins < end_s)
        return bool(within.any() and not self.nodes[np.ix_(within, nodes)].all())

    def reserve(self, nodes: np.ndarray, start_s: float, end_s: float, resolution_s: float) -> None:
        """Take ``nodes`` out of [start_s, end_s) (``_add_reservation``)."""
        start_s = max(start_s, float(self.begins[0]))
        end_s = max(end_s, start_s + resolution_s)
        self._split(start_s)
        self._split(end_s)
        inside = (self.begins >= start_s) & (self.ends <= end_s)
        self.nodes[np.ix_(inside, nodes)] = False

    def _split(self, t: float) -> None:
        j = np.flatnonzero((self.begins < t) & (t < self.ends))
        if j.size:
            k = int(j[0])
            self.begins = np.insert(self.begins, k + 1, t)
            self.ends = np.insert(self.ends, k, t)
            self.nodes = np.insert(self.nodes, k + 1, self.nodes[k], axis=0)


def _hold(c: ClusterSpec, job: Job, gpus: np.ndarray, free: np.ndarray, cpu: np.ndarray, ram: np.ndarray,
          mem: np.ndarray, sign: int) -> None:
    """Give back (``sign`` +1) or take (-1) what ``job`` holds on ``gpus``, in place: its share of each GPU, its
    GPU memory (a whole GPU's all, a fractional job's ``gpu_mem_mib``) [MiB], its CPU and RAM."""
    free[gpus] += sign * job.gpu_milli
    if job.is_fractional:
        mem[gpus] += sign * job.gpu_mem_mib
    else:
        mem[gpus] = c.gpu_memory_mib[gpus] if sign > 0 else 0
    add_node_holdings(c, job, c.gpu_node[gpus], cpu, ram, sign)


class Holding(NamedTuple):
    """Free resources at one point of the will-run test: shares [milli-GPU] and memory [MiB] per GPU, CPU
    [milli-cores] and RAM [MiB] per node, and each node's entirely free GPUs."""

    free: np.ndarray
    cpu: np.ndarray
    ram: np.ndarray
    mem: np.ndarray
    whole: np.ndarray

    @classmethod
    def of(cls, c: ClusterSpec, free: np.ndarray, cpu: np.ndarray, ram: np.ndarray, mem: np.ndarray) -> Holding:
        """These holdings, with the entirely free GPUs of each node counted."""
        return cls(free, cpu, ram, mem, np.bincount(c.gpu_node[free == MILLI_PER_GPU], minlength=c.n_nodes))


class Holdings:
    """What the running jobs of :class:`Running` hold, one entry per (job, GPU), the jobs in their order: the GPU,
    its node, the share [milli-GPU], whether the job is fractional, its GPU memory [MiB] (a fractional job's), and
    its CPU [milli-cores] and RAM [MiB] on that node (0 where the node does not model them); ``first[k]``: job k's
    first entry (``first[-1]``: the entries)."""

    def __init__(self, c: ClusterSpec, jobs: list[Job], gpus: list[np.ndarray]) -> None:
        sizes = np.array([len(g) for g in gpus], dtype=np.int64)
        self.first = np.concatenate([[0], np.cumsum(sizes)])
        self.gpu = np.concatenate(gpus) if gpus else np.zeros(0, dtype=np.int64)
        self.node = c.gpu_node[self.gpu]
        self.milli = np.repeat(np.array([j.gpu_milli for j in jobs], dtype=np.int64), sizes)
        self.fractional = np.repeat(np.array([j.is_fractional for j in jobs], dtype=bool), sizes)
        self.mem = np.repeat(np.array([j.gpu_mem_mib for j in jobs], dtype=np.int64), sizes)
        self.cpu = np.where(c.cpu_modelled[self.node],
                            np.repeat(np.array([j.cpu_milli_per_gpu for j in jobs], dtype=np.int64), sizes), 0)
        self.ram = np.where(c.ram_modelled[self.node],
                            np.repeat(np.array([j.ram_mib_per_gpu for j in jobs], dtype=np.int64), sizes), 0)
        self.any_cpu, self.any_ram = bool(self.cpu.any()), bool(self.ram.any())

    def entries(self, runs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(the entries of jobs ``runs``, in that order; where each job's entries begin among them, and the end)."""
        sizes = self.first[runs + 1] - self.first[runs]
        bounds = np.concatenate([[0], np.cumsum(sizes)])
        return np.repeat(self.first[runs] - bounds[:-1], sizes) + np.arange(bounds[-1]), bounds

    def release(self, c: ClusterSpec, entries: np.ndarray, free: np.ndarray, cpu: np.ndarray, ram: np.ndarray,
                mem: np.ndarray) -> None:
        """Give back, in place, what ``entries`` hold: shares, GPU memory, CPU and RAM in one vectorized step
        (integer sums: the same as :func:`_hold` job by job)."""
        gpus = self.gpu[entries]
        np.add.at(free, gpus, self.milli[entries])
        fractional = self.fractional[entries]
        np.add.at(mem, gpus[fractional], self.mem[entries][fractional])
        whole = gpus[~fractional]
        mem[whole] = c.gpu_memory_mib[whole]
        if self.any_cpu:
            np.add.at(cpu, self.node[entries], self.cpu[entries])
        if self.any_ram:
            np.add.at(ram, self.node[entries], self.ram[entries])


class Running:
    """The running jobs of one cycle, and those it has started, by expected end (then job id): what the will-run
    test takes away, batch by batch (module docstring, step 3)."""

    def __init__(self, view: View, epoch_s: float) -> None:
        self.view, self.cluster, self.epoch_s = view, view.cluster, epoch_s
        runs = sorted((r.start_time_s + time_limit_s(r.job), r.job.job_id, r) for r in view.running.values())
        self.ends = [end for end, _, _ in runs]
        self.jobs = [r.job for _, _, r in runs]
        self.gpus = [np.asarray(r.gpus) for _, _, r in runs]
        self.on_node = np.zeros((len(runs), self.cluster.n_nodes), dtype=bool)  # run x node: holds GPUs there
        if runs:
            run_of = np.repeat(np.arange(len(runs)), [len(g) for g in self.gpus])
            self.on_node[run_of, self.cluster.gpu_node[np.concatenate(self.gpus)]] = True
        self.free = view.gpu_free_milli.copy()
        self.mem = view.gpu_free_mem_mib.copy()  # [MiB]: a job started in this cycle holds its share too
        self.cpu, self.ram = view.node_free_cpu_milli.copy(), view.node_free_ram_mib.copy()
        self.biggest_node = int(self.cluster.node_n_gpus.max())  # GPUs of the largest node
        self._holdings: Holdings | None = None  # built when first needed, until a start
        self._now: Holding | None = None  # the holdings now, counted when first needed, until a start
        self._answers: dict[tuple, tuple[float, np.ndarray] | None] = {}  # (shape, nodes) -> will_run, until a start
        self._batches: dict[bytes, tuple[list, Iterator]] = {}  # nodes -> holdings after each batch, until a start

    def start(self, job: Job, gpus: np.ndarray, end_s: float) -> None:
        """``job`` starts now on ``gpus`` and is expected to end at ``end_s``."""
        k = bisect.bisect_right(self.ends, end_s)
        self.ends.insert(k, end_s)
        self.jobs.insert(k, job)
        self.gpus.insert(k, gpus)
        row = np.zeros((1, self.cluster.n_nodes), dtype=bool)
        row[0, self.cluster.gpu_node[gpus]] = True
        self.on_node = np.insert(self.on_node, k, row, axis=0)
        _hold(self.cluster, job, gpus, self.free, self.cpu, self.ram, self.mem, -1)
        self._holdings = self._now = None
        self._answers.clear()
        self._batches.clear()

    def _fits(self, job: Job, rule: PlacementRule, state: Holding, nodes: np.ndarray,
              gpu_on: np.ndarray) -> np.ndarray | None:
        """``rule``'s GPUs for ``job`` on ``nodes`` (``gpu_on``: their GPUs) with these holdings, or None. ``rule``
        places whole-GPU jobs as :func:`~baselines.slurm_placement.whole_node_gang` does, so a job short of nodes
        with enough whole GPUs is refused before the rule runs."""
        need = nodes_needed(self.biggest_node, job)
        if need is not None and np.count_nonzero(state.whole[nodes] >= need[0]) < need[1]:
            return None
        return rule(ResourceState(self.view, np.where(gpu_on, state.free, 0), np.where(nodes, state.cpu, 0),
                                  np.where(nodes, state.ram, 0), self.view.time_s, np.where(gpu_on, state.mem, 0),
                                  self.view.gpu_mig_used, dict(self.view.mig_slices)), job)

    def will_run(self, job: Job, nodes: np.ndarray, rule: PlacementRule) -> tuple[float, np.ndarray] | None:
        """(start [s], GPUs) of ``job`` on ``nodes``, by the batched test; None if it never fits there. Jobs of one
        shape get one answer per set of nodes (for the rules that read only the shape) until the next start."""
        shape_of = shape_key_of(rule)
        if shape_of is None:
            return self._will_run(job, nodes, rule)
        key = (shape_of(job), nodes.tobytes())
        if key not in self._answers:
            self._answers[key] = self._will_run(job, nodes, rule)
        return self._answers[key]

    def _will_run(self, job: Job, nodes: np.ndarray, rule: PlacementRule) -> tuple[float, np.ndarray] | None:
        now, gpu_on = self.view.time_s, nodes[self.cluster.gpu_node]
        if self._now is None:
            self._now = Holding.of(self.cluster, self.free, self.cpu, self.ram, self.mem)
        gpus = self._fits(job, rule, self._now, nodes, gpu_on)
        if gpus is not None:
            return now, gpus
        for last, state in self._released(nodes):
            gpus = self._fits(job, rule, state, nodes, gpu_on)
            if gpus is not None:
                return (self.ends[last] if self.ends[last] > now else now + OVERDUE_START_S), gpus
        return None

    def _released(self, nodes: np.ndarray) -> Iterator[tuple[int, Holding]]:
        """The holdings after each batch of running jobs on ``nodes`` is given back (module docstring, step 3): (the
        batch's last job, the holdings). Computed once per set of nodes and shared by every job tested on it until
        the next start (:meth:`start` forgets them)."""
        key = nodes.tobytes()
        if key not in self._batches:
            self._batches[key] = ([], self._release_batches(nodes))
        done, more = self._batches[key]
        yield from done
        for state in more:  # ends: the batches of a finite list of running jobs
            done.append(state)
            yield state

    def _release_batches(self, nodes: np.ndarray) -> Iterator[tuple[int, Holding]]:
        if self._holdings is None:
            self._holdings = Holdings(self.cluster, self.jobs, self.gpus)
        held = self._holdings  # CPU and RAM copied only where a running job holds some
        free, mem = self.free.copy(), self.mem.copy()
        cpu, ram = self.cpu.copy() if held.any_cpu else self.cpu, self.ram.copy() if held.any_ram else self.ram
        found = np.flatnonzero(self.on_node[:, nodes].any(axis=1))  # those holding a usable node
        entries, bounds = held.entries(found)
        runs, ends, window, barrier, i = found.tolist(), self.ends, WILL_RUN_WINDOW_S, None, 0
        while i < len(runs):
            first = i
            while True:
                k = runs[i]
                if barrier is None:
                    barrier = ends[k] + (window - (ends[k] + self.epoch_s) % window)
                i += 1
                if i >= len(runs) or ends[runs[i]] > barrier + window:
                    break
            held.release(self.cluster, entries[bounds[first]:bounds[i]], free, cpu, ram, mem)
            window *= 2
            while i < len(runs) and ends[runs[i]] > barrier + window:
                window *= 2
            yield runs[i - 1], Holding.of(self.cluster, free.copy(), cpu.copy() if held.any_cpu else cpu,
                                          ram.copy() if held.any_ram else ram, mem.copy())


def backfill_cycle(view: View, queue: list[Job], rule: PlacementRule, *, max_jobs: int, window_s: float,
                   resolution_s: float, epoch_s: float) -> list[tuple[Job, np.ndarray]]:
    """The jobs one backfill cycle starts now, in order, with their GPUs (module docstring)."""
    c, now = view.cluster, view.time_s

    def floor_res(t: float) -> float:
        return math.floor((t + epoch_s) / resolution_s) * resolution_s - epoch_s

    space = NodeSpace(c.n_nodes, floor_res(now), floor_res(now + window_s))
    running = Running(view, epoch_s)
    out = []
    for job in queue[:max_jobs]:
        limit_s = time_limit_s(job)
        base = c.partition_nodes(job.partition) & view.node_up
        start_res = -math.inf
        for _ in range(MAX_TRIES):
            avail, later = space.usable(base, start_res, max(start_res, now) + limit_s)
            found = running.will_run(job, avail, rule) if avail.any() else None
            if found is None:
                if later:
                    start_res = later
                    continue
                break
            start_s, gpus = max(found[0], start_res), found[1]
            if start_s <= now:
                running.start(job, np.asarray(gpus), now + limit_s)
                out.append((job, gpus))
                break
            if later and start_s > later:
                start_res = later
                continue
            if start_s > now + window_s:
                break
            nodes = np.unique(c.gpu_node[np.asarray(gpus)])
            begin, end = floor_res(start_s), floor_res(start_s + limit_s)
            if space.overlaps(nodes, begin, end):
                start_res = start_s
                continue
            space.reserve(nodes, begin, end, resolution_s)
            break
    return out
