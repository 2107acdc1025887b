"""The availability profile: when resources free up, by the running jobs' requested wall times (SPEC §2, §6).

A real scheduler knows only expected ends (start + requested wall time), so the profile is built from those: at
``now`` the cluster's current free resources, then at each expected end the running jobs' holdings come back.
Backfilling heuristics (and the env's backfill-assisted variant) ask it for a job's earliest start and add
reservations to it. A running job whose expected end has already passed (it outlives its estimate) is assumed to
end just after ``now``.

States of the profile are :class:`ResourceState` objects, which placement rules accept wherever they take a
:class:`~envs.sim.view.View`, so a reservation is placed by the same rule that would start the job.

GPU memory and MIG are projected too: free memory per GPU and the MIG occupancy masks come back at expected ends; a
job added to a state takes its memory and, for a MIG job, the lowest free valid position of its profile (where the
simulator would put it). A window of breakpoints (``duration_s``) holds the least free memory and the union of the
masks, so a placement found there is valid at every breakpoint of it. A reservation of a MIG job holds the lowest
position free throughout its window; if none is (a reservation that the state no longer allows), it holds every
free slice of the GPU in that window, which can only delay others. The GPUs' MIG modes are not projected (the
current ones): they only order ties. Every placement a projected state of *now* allows is valid now, so a start
taken from one is never refused.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator, Mapping

import numpy as np

from envs.core.cluster import MILLI_PER_GPU
from envs.core.job import Job
from envs.core.mig import ALL_SLICES
from envs.sim.resources import ResourceState, add_node_holdings, held_memory_mib, mig_mask, node_holdings
from envs.sim.state import RunningJob
from envs.sim.view import PlacementRule, View

OVERDUE_END_S = 1e-6
"""How long after ``now`` an overdue running job (past its requested wall time) is assumed to end [s]."""

Arrays = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]
"""Free milli per GPU, free CPU per node, free RAM per node, free memory per GPU, MIG occupancy per GPU."""


class _EndOrder:
    """The running jobs' sort keys (expected end, start, job id) in order, kept on a view from one state to the next
    (:meth:`~envs.sim.view.View.kept`): a start or an end moves a key in or out (bisection) instead of sorting every
    running job again. The order is the same either way: the keys are distinct (the job id). A job that ended and
    started again since (a preempted or failed job's new run) is a new run object, so it counts as moved. New runs
    are found from the end of the running jobs (a dict: a start inserts there), up to the newest run already known;
    a run replaced in its place (a fork's resampled runtime) keeps its key."""

    def __init__(self) -> None:
        self.keys: list[tuple[float, float, int]] = []
        self.runs: dict[int, object] = {}  # job id -> the run object its key was made from

    def order(self, running: Mapping[int, RunningJob]) -> list[tuple[float, float, int]]:
        """The keys of the ``running`` jobs, sorted."""
        runs = self.runs
        came = []
        for job_id, run in reversed(running.items()):  # runs started since come last (the dict's insertion order)
            if runs.get(job_id) is run:
                break
            came.append(job_id)
        gone = [j for j in came if j in runs]  # ended and started again: a new run object
        gone += runs.keys() - running.keys()
        if len(gone) + len(came) <= max(MAX_MOVED_KEYS, len(running) // 8):
            for job_id in gone:
                old = runs.pop(job_id)
                del self.keys[bisect.bisect_left(self.keys, (old.expected_end_s, old.start_time_s, job_id))]
            for job_id in came:
                run = runs[job_id] = running[job_id]
                bisect.insort(self.keys, (run.expected_end_s, run.start_time_s, job_id))
        else:
            self.runs = dict(running)
            self.keys = sorted((r.expected_end_s, r.start_time_s, j) for j, r in running.items())
        return self.keys


MAX_MOVED_KEYS = 64
"""Up to this many starts and ends (or an eighth of the running jobs) since the last state are moved one by one;
more are sorted afresh."""


def expected_ends(view: View) -> np.ndarray:
    """The running jobs (:class:`~envs.sim.state.RunningJob`, an object array) in order of expected end, then start
    time, then job id; memoized on the view per state of the holdings (the view keeps an :class:`_EndOrder` from one
    state to the next)."""
    def compute() -> np.ndarray:
        running = view.running
        keys = view.kept(_EndOrder, _EndOrder).order(running)
        return np.fromiter((running[key[2]] for key in keys), dtype=object, count=len(keys))
    return view.memoized(("expected_ends",), compute)


class _Releases:
    """The free resources at ``now`` and after each expected end, stepped in time order in place (:meth:`step`):
    the arrays of :data:`Arrays`, the fully free GPUs (mask, per node and in all) and the time."""

    def __init__(self, view: View) -> None:
        self.view, self.cluster, self.now = view, view.cluster, view.time_s
        self.free = view.gpu_free_milli.copy()
        self.cpu = view.node_free_cpu_milli.copy()
        self.ram = view.node_free_ram_mib.copy()
        self.mem = view.gpu_free_mem_mib.copy()
        self.used = view.gpu_mig_used.copy()
        self.whole = self.free == MILLI_PER_GPU
        self.node_free_gpus = np.bincount(self.cluster.gpu_node[self.whole], minlength=self.cluster.n_nodes)
        self.free_gpus = int(self.node_free_gpus.sum())
        self.time_s = self.now
        self._ends = expected_ends(view)
        self._next = 0

    @property
    def arrays(self) -> Arrays:
        return self.free, self.cpu, self.ram, self.mem, self.used

    def state(self) -> ResourceState:
        """The current step as a state (sharing the arrays: it is valid until the next step)."""
        return ResourceState._of(self.view, self.free, self.whole, self.node_free_gpus, self.free_gpus, self.cpu,
                                 self.ram, self.time_s, self.mem, self.used, {})

    def step(self) -> bool:
        """Advance to the next expected end (every job ending then gives its holdings back); False after the last."""
        ends, i = self._ends, self._next
        if i == len(ends):
            return False
        c, view, floor = self.cluster, self.view, self.now + OVERDUE_END_S
        free, mem, used, whole = self.free, self.mem, self.used, self.whole
        t = max(ends[i].expected_end_s, floor)
        while i < len(ends) and max(ends[i].expected_end_s, floor) == t:
            job, index = ends[i].job, ends[i].gpus.index
            free[index] += job.gpu_milli
            mask = 0
            if job.mig_profile:
                g, mask = view.mig_slices[job.job_id]
                used[g] &= ~mask & ALL_SLICES
            mem[index] += held_memory_mib(c, job, index, mask)
            became = free[index] == MILLI_PER_GPU
            change = became.astype(np.int64) - whole[index]
            whole[index] = became
            nodes = c.gpu_node[index]
            np.add.at(self.node_free_gpus, nodes, change)
            self.free_gpus += int(change.sum())
            add_node_holdings(c, job, nodes, self.cpu, self.ram, +1)
            i += 1
        self.time_s, self._next = t, i
        return True


def _releases(view: View) -> Iterator[tuple[float, Arrays, int]]:
    """(time, arrays, fully free GPUs) at ``now`` and after each expected end, in time order. The arrays are
    updated in place from one step to the next: copy to keep them."""
    steps = _Releases(view)
    yield steps.time_s, steps.arrays, steps.free_gpus
    while steps.step():
        yield steps.time_s, steps.arrays, steps.free_gpus


def earliest_start(view: View, job: Job, rule: PlacementRule) -> tuple[float, np.ndarray, ResourceState] | None:
    """(time, GPUs, state) of the first instant, now or at an expected end, at which ``rule`` places ``job``.

    Resources only come back over time, so this streams through the expected ends without building a profile.
    None when the job does not fit even once every running job has ended.
    """
    need = 0 if job.is_fractional else job.n_gpus
    steps = _Releases(view)
    while True:
        if steps.free_gpus >= need:
            state = steps.state()
            gpus = rule(state, job)
            if gpus is not None:
                return steps.time_s, gpus, state
        if not steps.step():
            return None


class AvailabilityProfile:
    """Free resources as a step function of future time, from expected ends and added reservations."""

    def __init__(self, view: View) -> None:
        self._view = view
        self.times: list[float] = []
        self._arrays: list[Arrays] = []
        self._whole_free: list[int] = []  # fully free GPUs per breakpoint: a cheap necessary test before placing
        self._mig_holds: dict[tuple[int, float], int] = {}  # (job id, start [s]) -> slices a reservation holds
        for t, arrays, whole in _releases(view):
            self.times.append(t)
            self._arrays.append(tuple(a.copy() for a in arrays))
            self._whole_free.append(whole)

    def state(self, i: int) -> ResourceState:
        """The free resources from ``times[i]`` until the next breakpoint."""
        free, cpu, ram, mem, used = self._arrays[i]
        return ResourceState(self._view, free, cpu, ram, self.times[i], mem, used, {})

    def _window(self, i: int, end_s: float) -> Arrays:
        """The resources free throughout [times[i], end_s): the element-wise minimum over the breakpoints (the
        union of the MIG occupancy masks). A GPU shared in full mode at one breakpoint and holding MIG slices at
        another can take neither kind of job for the whole window: it counts as holding every slice."""
        j = bisect.bisect_left(self.times, end_s)
        arrays = self._arrays[i:max(j, i + 1)]
        if len(arrays) == 1:
            return arrays[0]
        low = [a.copy() for a in arrays[0][:4]]
        for a in arrays[1:]:
            for k in range(4):
                np.minimum(low[k], a[k], out=low[k])
        if not (self._view.mig_slices or self._mig_holds):  # no slice held now or reserved: occupancy all zero
            return (*low, arrays[0][4])
        used = np.bitwise_or.reduce([a[4] for a in arrays])
        shared_full = np.logical_or.reduce([(a[0] < MILLI_PER_GPU) & (a[4] == 0) for a in arrays])
        used = np.where(shared_full & (used != 0), ALL_SLICES, used).astype(used.dtype)
        return (*low, used)

    def _window_state(self, i: int, end_s: float) -> ResourceState:
        free, cpu, ram, mem, used = self._window(i, end_s)
        return ResourceState(self._view, free, cpu, ram, self.times[i], mem, used, {})

    def earliest_start(self, job: Job, rule: PlacementRule,
                       duration_s: float | None = None) -> tuple[float, np.ndarray, ResourceState] | None:
        """(time, GPUs, state) of the earliest breakpoint at which ``rule`` places ``job`` for ``duration_s``.

        Without a duration only the instant matters (resources only come back later, unless reservations were
        added). None when the job does not fit even once everything has ended.
        """
        short = self._short_of(job)
        for i, t in enumerate(self.times):
            found = self._placed(i, job, rule, duration_s, short)
            if found is not None:
                return t, *found
        return None

    def fits_at(self, start_s: float, job: Job, rule: PlacementRule, duration_s: float) -> np.ndarray | None:
        """The GPUs ``rule`` gives ``job`` for [start_s, start_s + duration_s) at breakpoint ``start_s`` (as
        :meth:`earliest_start` tries it there), or None."""
        i = bisect.bisect_left(self.times, start_s)
        if i == len(self.times) or self.times[i] != start_s:
            raise ValueError(f"{start_s} s is not a breakpoint of the profile")
        found = self._placed(i, job, rule, duration_s, self._short_of(job))
        return None if found is None else found[0]

    def _short_of(self, job: Job) -> list[int]:
        """The breakpoints with fewer whole GPUs free than ``job`` needs (none for a share), ascending."""
        whole = 0 if job.is_fractional else job.n_gpus
        return np.flatnonzero(np.asarray(self._whole_free) < whole).tolist() if whole else []

    def _placed(self, i: int, job: Job, rule: PlacementRule, duration_s: float | None,
                short: list[int]) -> tuple[np.ndarray, ResourceState] | None:
        """(GPUs, state) of ``job`` placed by ``rule`` from breakpoint ``i`` for ``duration_s``, or None; ``short``:
        :meth:`_short_of` the job (a breakpoint of the window among them: it cannot fit)."""
        t = self.times[i]
        if short:
            j = i + 1 if duration_s is None else max(bisect.bisect_left(self.times, t + duration_s), i + 1)
            k = bisect.bisect_left(short, i)
            if k < len(short) and short[k] < j:  # a breakpoint of [i, j) has too few whole GPUs free
                return None
        state = self.state(i) if duration_s is None else self._window_state(i, t + duration_s)
        gpus = rule(state, job)
        return None if gpus is None else (gpus, state)

    def reserve(self, job: Job, gpus: np.ndarray, start_s: float, duration_s: float, sign: int = 1) -> None:
        """Hold ``gpus`` (and the job's CPU and RAM) for ``job`` during [start_s, start_s + duration_s); with
        ``sign=-1``, give such a hold back."""
        self._breakpoint(start_s)
        end_s = start_s + duration_s
        self._breakpoint(end_s)
        c = self._view.cluster
        cpu_held, ram_held = node_holdings(c, job, gpus)
        first, last = bisect.bisect_left(self.times, start_s), bisect.bisect_left(self.times, end_s)
        mask = 0
        if job.mig_profile:
            g = int(np.asarray(gpus).reshape(-1)[0])
            if sign > 0:
                used = int(self._window(first, end_s)[4][g]) if last > first else 0
                mask = mig_mask(c, job, g, used) or (~used & ALL_SLICES)
                self._mig_holds[(job.job_id, start_s)] = mask
            else:
                mask = self._mig_holds.pop((job.job_id, start_s), 0)
        mem_held = held_memory_mib(c, job, gpus, mask)
        nodes = np.flatnonzero(cpu_held | ram_held)  # the nodes whose CPU or RAM the hold changes
        cpu_held, ram_held = cpu_held[nodes], ram_held[nodes]
        for i in range(first, last):
            free, cpu, ram, mem, used = self._arrays[i]
            before = int(np.count_nonzero(free[gpus] == MILLI_PER_GPU))
            free[gpus] -= sign * job.gpu_milli
            cpu[nodes] -= sign * cpu_held
            ram[nodes] -= sign * ram_held
            mem[gpus] -= sign * mem_held
            if mask:
                used[g] = used[g] | mask if sign > 0 else used[g] & (~mask & ALL_SLICES)
            self._whole_free[i] += int(np.count_nonzero(free[gpus] == MILLI_PER_GPU)) - before  # only gpus changed

    def _breakpoint(self, t: float) -> None:
        i = bisect.bisect_left(self.times, t)
        if i < len(self.times) and self.times[i] == t:
            return
        source = self._arrays[i - 1]  # t > now: the state in force just before t continues
        self.times.insert(i, t)
        self._arrays.insert(i, tuple(a.copy() for a in source))
        self._whole_free.insert(i, self._whole_free[i - 1])


def easy_backfill(view: View, head: Job, others: Iterable[Job],
                  rule: PlacementRule) -> tuple[float | None, Job | None, np.ndarray | None]:
    """EASY backfilling for a blocked ``head``: (its reserved start, a job to start now, that job's GPUs).

    The head is reserved at its earliest start by requested wall times; the first of ``others`` (in the caller's
    order) that fits now and does not delay that reservation is returned: it ends by its requested time no later
    than the reservation, or the head still fits at the reservation with that job's GPUs taken. (None, None, None)
    when the head can never start; (start, None, None) when no job can be backfilled now.
    """
    found = earliest_start(view, head, rule)
    if found is None:
        return None, None, None
    shadow_s, _, state = found
    keeps_head: dict[tuple, bool] = {}  # (what `without` reads of a job, its GPUs) -> the head still fits
    for job in others:
        gpus = rule(view, job)
        if gpus is None:
            continue
        if view.time_s + job.runtime_estimate_s <= shadow_s:
            return shadow_s, job, gpus
        key = (job.gpu_milli, job.gpu_mem_gib, job.mig_profile, job.cpu_milli_per_gpu, job.ram_mib_per_gpu,
               gpus.dtype.str, gpus.tobytes())
        fits = keeps_head.get(key)
        if fits is None:
            fits = keeps_head[key] = rule(state.without(job, gpus), head) is not None
        if fits:
            return shadow_s, job, gpus
    return shadow_s, None, None
