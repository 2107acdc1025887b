"""N GPU clusters stepping in lockstep as tensors on one device: the batched counterpart of GPUClusterEnv.

Each cluster replays one workload of a pool (:class:`~envs.vec.pool.WorkloadPool`), with the env's actions (start
visible job k with placement rule p, or Wait), masks, observations and reward terms, inside the supported subset
(:data:`~envs.vec.pool.SUPPORTED`). A step applies one action per cluster, then advances every cluster that has no
choice (no visible job fits, or it waited) to its own next instant, one instant per tensor pass, until all have a
choice or ``max_passes`` passes are done: a cluster still without a choice then shows a mask with Wait alone, and
its Wait is the advance the event env would have made on its own, so the job log is the event env's all the same.

State, per cluster: the clock, each node's free GPUs as bits, each GPU's end time and expected end (start +
requested time; +inf when free), the queue as a window of the first K pending jobs (job indices in queue order)
followed by the arrived jobs behind it, and the integrals of the reward terms. Only jobs in the window can start,
so the pending jobs are always the window followed by the contiguous run of arrived jobs after it. A cluster whose
episode ends is reset at once to the next workload of the pool (cluster i plays workloads i, i + 1, i + 2, ...
modulo the pool's size), and ``done`` says so.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from envs.core.cluster import MILLI_PER_GPU
from envs.core.errors import ActionRefused, ConfigError
from envs.core.job import RefusalReason
from envs.gymenv.config import EnvConfig
from envs.gymenv.episodes import EpisodeSource
from envs.gymenv.observation import ObservationEncoder
from envs.placement import PLACEMENT_RULES
from envs.vec.layout import ClusterLayout, lookup
from envs.vec.placement import Plan, VecPlacement, pick
from envs.vec.pool import WorkloadPool, check_config
from envs.workload.table import Workload

DAY_S = 86400.0


MAX_NUM_ENVS = 65_536
"""The most clusters one batched env steps (each holds its own copy of the cluster state; 10⁸ asked for 16 GB and
more before failing)."""


class VecClusterEnv:
    """``num_envs`` clusters of ``config`` in lockstep on ``device``; ``workloads`` is the pool's size (episodes
    drawn from the config's workload source, seeded by ``seed``) or the workloads themselves."""

    def __init__(self, config: EnvConfig, num_envs: int, device: str | torch.device = "cpu", seed: int = 0,
                 workloads: int | Sequence[Workload] = 64, max_passes: int = 64, record: bool = False) -> None:
        check_config(config)
        if not 1 <= num_envs <= MAX_NUM_ENVS or max_passes < 1:
            raise ConfigError(f"batched engine: num_envs must be in 1..{MAX_NUM_ENVS:,} and max_passes >= 1, got "
                              f"{num_envs}, {max_passes}")
        self.config, self.num_envs, self.max_passes = config, num_envs, max_passes
        self.device = torch.device(device)
        source = EpisodeSource(config)
        self.cluster, self.runtime = source.cluster, source.runtime
        if isinstance(workloads, int):
            if workloads < 1:
                raise ConfigError(f"batched engine: workloads must be >= 1, got {workloads}")
            rng = np.random.default_rng(seed)
            workloads = [source.sample(rng).workload for _ in range(workloads)]
        rules = [PLACEMENT_RULES[name] for name in config.placement_rules]
        self.encoder = ObservationEncoder(self.cluster, config, self.runtime, rules)
        self.observation_space = self.encoder.space
        self.n_actions = config.n_actions
        self.layout = ClusterLayout(self.cluster, self.device)
        self.pool = WorkloadPool(workloads, self.cluster, config, self.runtime, self.encoder, self.device)
        self.placement = VecPlacement(self.layout, self.pool, config.placement_rules)
        self._constants()
        self.record = record
        self.logs: list[list[dict[int, tuple[float, float, tuple[int, ...]]]]] = [[] for _ in range(num_envs)]
        """With ``record``: per cluster, the job log of each episode so far (the last one in progress): job id ->
        (start [s], end [s], GPUs)."""
        self._allocate()

    # ---- setup ---------------------------------------------------------------------------------------------------
    def _constants(self) -> None:
        enc, dev, c, model = self.encoder, self.device, self.cluster, self.runtime
        t = lambda a, dtype=torch.float64: torch.as_tensor(np.array(a), dtype=dtype, device=dev)  # noqa: E731
        self._membership = t(enc._membership)  # (groups, nodes)
        self._node_group = t(enc.node_group, torch.int64)
        self._group_gpus, self._group_nodes = t(enc.group_gpus), t(enc.group_nodes)
        self._group_cpu, self._group_node_size = t(enc.group_cpu), t(enc.group_node_size)
        self._static_groups = torch.stack([t(enc.group_speed), t(enc.group_gpus / c.n_gpus)], -1)
        self._node_cpu = t(c.node_cpu_milli)
        self._cpu_used_per_gpu = t(np.where(c.cpu_modelled, self.pool.cpu_milli_per_gpu, 0))
        self._alpha = t([0.0, model.a_pcie, model.a_net, model.a_xrack])
        self._max_alpha, self._max_speed = enc.max_alpha, enc.max_speed
        self._slots = torch.arange(self.config.slots, device=dev)

    def _allocate(self) -> None:
        n, lay, k, dev = self.num_envs, self.layout, self.config.slots, self.device
        f64 = dict(dtype=torch.float64, device=dev)
        i64 = dict(dtype=torch.int64, device=dev)
        self.workload = torch.zeros(n, **i64)  # (N,) pool index of each cluster's workload
        self.episodes = torch.zeros(n, **i64)  # (N,) episodes each cluster has finished
        self.now = torch.zeros(n, **f64)  # (N,) clock [s]
        self.pattern = torch.zeros(n, lay.n_nodes, **i64)  # (N, nodes) free GPUs as bits
        self.gpu_end = torch.full((n, lay.n_nodes, lay.width), math.inf, **f64)  # [s] end of the job on each GPU
        self.gpu_expected = torch.full_like(self.gpu_end, math.inf)  # [s] start + requested time of that job
        self.lead = torch.zeros(n, lay.n_nodes, lay.width, dtype=torch.bool, device=dev)  # a job's lowest GPU
        self.node_end = torch.full((n, lay.n_nodes), math.inf, **f64)  # [s] earliest end on each node
        self.busy = torch.zeros(n, **i64)  # (N,) allocated GPUs
        self.running = torch.zeros(n, **i64)  # (N,) running jobs
        self.arrived = torch.zeros(n, **i64)  # (N,) jobs arrived so far (queue order)
        self.rejects_seen = torch.zeros(n, **i64)  # (N,) rejected jobs whose arrival has passed
        self.window = torch.full((n, k), -1, **i64)  # (N, K) the visible jobs, -1: empty slot
        self.count = torch.zeros(n, **i64)  # (N,) jobs in the window
        self.next_job = torch.zeros(n, **i64)  # (N,) first arrived job behind the window
        self.pending_s = torch.zeros(n, **f64)  # (N,) ∫ pending jobs dt [job-s]
        self.busy_s = torch.zeros(n, **f64)  # (N,) ∫ allocated GPUs dt [GPU-s]
        self.returns = torch.zeros(n, **f64)  # (N,) reward summed over the episode
        self._plan: Plan | None = None
        self._mask = torch.zeros(self.num_envs, self.n_actions, dtype=torch.bool, device=self.device)

    # ---- API -------------------------------------------------------------------------------------------------------
    def reset(self) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        """Start every cluster on its first workload; the observations and masks of their first decision points."""
        self.episodes.zero_()
        self.logs = [[] for _ in range(self.num_envs)]
        self._reset(torch.ones(self.num_envs, dtype=torch.bool, device=self.device))
        return self._observe()

    def _checked(self, actions: Any) -> torch.Tensor:
        """``actions`` as int64 on the device, refused as the event env refuses them: a ``TypeError`` for anything
        but an integer tensor of one action per cluster, an :class:`ActionRefused` naming the first cluster whose
        action is out of range or masked (nothing is applied then)."""
        if not isinstance(actions, torch.Tensor) or actions.dtype.is_floating_point or actions.dtype == torch.bool \
                or actions.is_complex() or tuple(actions.shape) != (self.num_envs,):
            raise TypeError(f"actions: one integer per cluster, a tensor of shape ({self.num_envs},), got "
                            f"{type(actions).__name__} {getattr(actions, 'dtype', '')} "
                            f"{tuple(getattr(actions, 'shape', ()))}")
        actions = actions.to(self.device, torch.int64)
        in_range = (actions >= 0) & (actions < self.n_actions)
        if not bool(in_range.all()):
            i = int((~in_range).nonzero()[0])
            raise ActionRefused(RefusalReason.UNKNOWN_JOB, f"cluster {i}: action {int(actions[i])} is outside "
                                f"0..{self.n_actions - 1}")
        legal = self._mask.gather(1, actions[:, None])[:, 0]
        if not bool(legal.all()):
            i = int((~legal).nonzero()[0])
            raise ActionRefused(RefusalReason.NOT_PENDING, f"cluster {i}: action {int(actions[i])} is masked")
        return actions

    def step(self, actions: torch.Tensor) -> tuple[dict[str, torch.Tensor], torch.Tensor, torch.Tensor,
                                                   torch.Tensor, dict[str, torch.Tensor]]:
        """Apply one action per cluster (each legal under the last mask); see the module docstring."""
        if self._plan is None:
            raise RuntimeError("call reset() before step()")
        actions = self._checked(actions)
        rules = len(self.config.placement_rules)
        start = actions < self.config.n_starts
        slot = torch.where(start, actions // rules, 0)
        before = self.pending_s.clone(), self.busy_s.clone()
        self._start(start, slot, actions % rules)
        self._skip(force=~start)
        c, scale = self.config, self.config.wait_scale_s
        reward = (-c.reward_weights["wait"] * (self.pending_s - before[0]) / scale
                  + c.reward_weights["utilization"] * (self.busy_s - before[1]) / (self.cluster.n_gpus * scale))
        self.returns += reward
        done = self._done()
        info = self._episode_info(done)
        if bool(done.any()):
            self.episodes += done
            self._reset(done)
        obs, mask = self._observe()
        return obs, mask, reward.float(), done, info

    # ---- dynamics ------------------------------------------------------------------------------------------------
    def _job(self, table: torch.Tensor, job: torch.Tensor) -> torch.Tensor:
        """``table[workload, job]`` per cluster, for a (W, M + 1) table and job indices (N,) or (N, K)."""
        width = table.shape[1]
        flat = self.workload.view(-1, *([1] * (job.dim() - 1))) * width + job.clamp(min=0)
        return lookup(table.reshape(-1, *table.shape[2:]), flat)

    def _pending(self) -> torch.Tensor:
        return self.count + self.arrived - self.next_job

    def _done(self) -> torch.Tensor:
        return (self.arrived >= self.pool.n_jobs[self.workload]) & (self._pending() == 0) & (self.running == 0)

    def _start(self, start: torch.Tensor, slot: torch.Tensor, rule: torch.Tensor) -> None:
        """Start the job in ``slot`` with ``rule`` in the clusters of ``start`` (N,) bool."""
        if not bool(start.any()):
            return
        pool, lay, model = self.pool, self.layout, self.runtime
        job = self.window.gather(1, slot[:, None]).squeeze(1)
        klass = self._job(pool.job_class, job)
        take = self.placement.take(self._plan, self.pattern, klass, rule)
        take = torch.where(start[:, None], take, 0)
        speed = pick(self._plan.speed, klass, rule) if model.use_speed else torch.ones_like(self.now)
        level = pick(self._plan.level, klass, rule)
        factor = self._topology_factor(self._job(pool.comm, job), level)
        end = self.now + self._job(pool.runtime_s, job) / speed * factor
        expected = self.now + self._job(pool.estimate_s, job)
        # the GPUs taken, node by node: only the (cluster, node) pairs that give some
        pairs = take.view(-1).nonzero().squeeze(1)
        cluster = pairs // lay.n_nodes
        bits = (take.view(-1).index_select(0, pairs)[:, None] & lay.bit) != 0  # (pairs, width)
        first_node = (take != 0).to(torch.int8).argmax(1)  # the job's lowest GPU is on its first node
        lowest = take.view(-1).index_select(0, pairs)
        lowest = (lowest & -lowest)[:, None] & lay.bit
        lead = (lowest != 0) & (pairs % lay.n_nodes == first_node.index_select(0, cluster))[:, None]
        self._write(pairs, bits, end.index_select(0, cluster), expected.index_select(0, cluster), lead)
        self.pattern &= ~take
        n = self._job(pool.n_gpus, job)
        self.busy += torch.where(start, n, 0)
        self.running += start.long()
        if self.record:
            self._record(start, job, end, take)
        # the started job leaves its slot; the slots behind it move up one, and the window refills
        shifted = self.window.gather(1, (self._slots[None, :] + (self._slots[None, :] >= slot[:, None])).clamp(
            max=self.config.slots - 1))
        shifted[:, -1] = -1
        self.window = torch.where(start[:, None], shifted, self.window)
        self.count -= start.long()
        self._fill()

    def _write(self, pairs: torch.Tensor, gpus: torch.Tensor, end: torch.Tensor | float,
               expected: torch.Tensor | float, lead: torch.Tensor, release: bool = False) -> None:
        """Set the end, expected end and lead flag of ``gpus`` (pairs, width) bool on the (cluster, node) ``pairs``
        (flat indices), and those nodes' earliest end; ``end`` and ``expected`` are per pair [s] (+inf: free)."""
        width = self.layout.width
        as_column = lambda v: v[:, None] if isinstance(v, torch.Tensor) else v  # noqa: E731
        ends = torch.where(gpus, as_column(end), self.gpu_end.view(-1, width).index_select(0, pairs))
        self.gpu_end.view(-1, width).index_copy_(0, pairs, ends)
        expect = self.gpu_expected.view(-1, width).index_select(0, pairs)
        self.gpu_expected.view(-1, width).index_copy_(0, pairs, torch.where(gpus, as_column(expected), expect))
        leads = self.lead.view(-1, width).index_select(0, pairs)
        self.lead.view(-1, width).index_copy_(0, pairs, (leads & ~gpus) if release else (leads | lead))
        self.node_end.view(-1).index_copy_(0, pairs, ends.amin(-1))

    def _fill(self) -> None:
        """Move arrived jobs behind the window into its empty slots, in queue order."""
        k = self.config.slots
        take = torch.minimum(k - self.count, self.arrived - self.next_job)
        offset = self._slots[None, :] - self.count[:, None]
        fill = (offset >= 0) & (offset < take[:, None])
        self.window = torch.where(fill, self.next_job[:, None] + offset, self.window)
        self.count += take
        self.next_job += take

    def _advance(self, active: torch.Tensor) -> None:
        """Move the ``active`` clusters to their next instant and apply its completions, then its arrivals."""
        pool = self.pool
        arrivals_left = self.arrived < pool.n_jobs[self.workload]
        t_arrival = torch.where(arrivals_left, self._job(pool.submit, self.arrived), math.inf)
        t = torch.minimum(t_arrival, self.node_end.amin(1))
        if pool.rejected.any():  # rejected arrivals are instants too, as in the event simulator
            t_reject = self._job(pool.reject_submit, self.rejects_seen)
            t = torch.minimum(t, t_reject)
            seen = active & (t_reject == t) & torch.isfinite(t_reject)
            self.rejects_seen = torch.where(seen, self._job(pool.reject_group_end, self.rejects_seen) + 1,
                                            self.rejects_seen)
        t = torch.where(active, t, self.now)
        dt = t - self.now
        self.pending_s += self._pending() * dt
        self.busy_s += self.busy * dt
        self.now = t
        pairs = ((self.node_end <= t[:, None]) & active[:, None]).view(-1).nonzero().squeeze(1)
        if pairs.numel():  # the (cluster, node) pairs where some job ends now
            lay = self.layout
            cluster = pairs // lay.n_nodes
            ends = self.gpu_end.view(-1, lay.width).index_select(0, pairs)
            ended = ends <= t.index_select(0, cluster)[:, None]  # (pairs, width)
            self.pattern.view(-1).index_add_(0, pairs, (ended.long() * lay.bit).sum(-1))
            self.busy.index_add_(0, cluster, -ended.sum(-1))
            leads = self.lead.view(-1, lay.width).index_select(0, pairs)
            self.running.index_add_(0, cluster, -(ended & leads).sum(-1))
            self._write(pairs, ended, math.inf, math.inf, torch.zeros_like(ended), release=True)
        arrive = active & (t_arrival == t)
        self.arrived = torch.where(arrive, self._job(pool.group_end, self.arrived) + 1, self.arrived)
        self._fill()

    def _topology_factor(self, comm: torch.Tensor, level: torch.Tensor) -> torch.Tensor:
        """The runtime model's topology factor (>= 1) of jobs with sensitivity ``comm`` on allocations of ``level``
        (envs.core.runtime.RuntimeConfig.topology_factor; alpha is 0 for one island)."""
        if not self.runtime.use_topology:
            return torch.ones_like(comm)
        return 1.0 + comm * lookup(self._alpha, level)

    def _slot_classes(self) -> torch.Tensor:
        """(N, K) the placement class of each slot's job (an empty slot's is meaningless: see _visible_fits)."""
        return self._job(self.pool.job_class, self.window)

    def _visible_fits(self, can_start: torch.Tensor, klass: torch.Tensor) -> torch.Tensor:
        """(N, K) bool: the slot holds a job that fits now (``can_start`` (N, C), ``klass`` from _slot_classes)."""
        return (self.window >= 0) & can_start.gather(1, klass)

    def _skip(self, force: torch.Tensor, among: torch.Tensor | None = None) -> None:
        """Advance the clusters of ``force`` one instant, then every cluster (of ``among``, default all) without a
        choice, instant by instant, until each has a choice or has ended (at most ``max_passes`` passes)."""
        for _ in range(self.max_passes):
            stuck = ~self._visible_fits(self.placement.can_start(self.pattern), self._slot_classes()).any(1)
            stuck &= ~self._done()
            if among is not None:
                stuck &= among
            active = force | stuck
            if not bool(active.any()):
                return
            self._advance(active)
            force = torch.zeros_like(force)

    def _reset(self, clusters: torch.Tensor) -> None:
        """Start the next workload of ``clusters`` (N,) bool and advance them to their first decision point."""
        pool, lay = self.pool, self.layout
        index = torch.arange(self.num_envs, device=self.device)
        workload = (index + self.episodes) % pool.n_workloads
        self.workload = torch.where(clusters, workload, self.workload)
        m = clusters[:, None]
        self.now = torch.where(clusters, pool.submit[self.workload, 0], self.now)
        if pool.rejected.any():  # rejected jobs submitted before the first queued one never make an instant
            before = torch.searchsorted(pool.reject_submit.index_select(0, self.workload), self.now[:, None]).squeeze(1)
            self.rejects_seen = torch.where(clusters, before, self.rejects_seen)
        self.pattern = torch.where(m, lay.full[None, :], self.pattern)
        self.gpu_end.masked_fill_(m[:, :, None], math.inf)
        self.gpu_expected.masked_fill_(m[:, :, None], math.inf)
        self.lead.masked_fill_(m[:, :, None], False)
        self.node_end.masked_fill_(m, math.inf)
        self.window.masked_fill_(m, -1)
        for tensor in (self.busy, self.running, self.arrived, self.count, self.next_job, self.pending_s, self.busy_s,
                       self.returns):
            tensor.masked_fill_(clusters, 0)
        if self.record:
            for i in clusters.nonzero().flatten().tolist():
                self.logs[i].append({})
        self._skip(force=clusters, among=clusters)  # the others' rewards of this step are counted already

    def _episode_info(self, done: torch.Tensor) -> dict[str, torch.Tensor]:
        """Per cluster (NaN where the episode goes on): its return, mean wait [s], utilization and jobs."""
        jobs = self.pool.n_jobs[self.workload].double()
        span = (self.now - self.pool.submit[self.workload, 0]).clamp(min=1e-9)
        nan = torch.full_like(self.now, math.nan)
        return {"episode_return": torch.where(done, self.returns, nan),
                "mean_wait_s": torch.where(done, self.pending_s / jobs, nan),
                "utilization": torch.where(done, self.busy_s / (self.cluster.n_gpus * span), nan),
                "jobs": torch.where(done, jobs, nan)}

    def _record(self, start: torch.Tensor, job: torch.Tensor, end: torch.Tensor, take: torch.Tensor) -> None:
        ids = self.pool.job_id
        for i in start.nonzero().flatten().tolist():
            job_id = int(ids[int(self.workload[i]), int(job[i])])
            gpus = tuple(self.layout.gpu_ids(take[i].cpu().numpy()).tolist())
            self.logs[i][-1][job_id] = (float(self.now[i]), float(end[i]), gpus)

    # ---- observations --------------------------------------------------------------------------------------------
    def _observe(self) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        """Plan every class, then the observations and masks of the current decision points."""
        self._plan = plan = self.placement.plan(self.pattern)
        c = self.config
        klass = self._slot_classes()
        present = self.window >= 0
        fits = self._visible_fits(plan.can_start, klass)
        rules = len(c.placement_rules)
        mask = torch.zeros(self.num_envs, c.n_actions, dtype=torch.bool, device=self.device)
        mask[:, :c.n_starts] = fits[:, :, None].expand(-1, -1, rules).reshape(self.num_envs, -1)
        events_left = (self.running > 0) | (self.arrived < self.pool.n_jobs[self.workload])
        mask[:, -1] = events_left & ~(c.work_conserving & fits.any(1))
        obs = {"cluster": self._cluster_features(), "global": self._global_features(),
               "jobs": self._job_features(klass, present, fits), "placements": self._placement_features(klass, fits)}
        self._mask = mask  # what the next step's actions are checked against
        return obs, mask

    def _job_features(self, klass: torch.Tensor, present: torch.Tensor, fits: torch.Tensor) -> torch.Tensor:
        c = self.config
        rows = self._job(self.pool.static, self.window)  # (N, K, F), a fresh tensor
        waited = self.now[:, None] - self._job(self.pool.submit, self.window)
        rows[..., 0] = 1.0
        rows[..., 4] = (torch.log1p(waited.clamp(min=0)) / math.log1p(c.max_wait_obs_s)).clamp(max=1.0).float()
        rows[..., 11] = fits.float()
        return rows * present[..., None]  # every feature is finite: an empty slot's row becomes 0

    def _placement_features(self, klass: torch.Tensor, fits: torch.Tensor) -> torch.Tensor:
        """(N, K, P, features): the class features of each slot's job, and its topology penalty."""
        plan, model = self._plan, self.runtime
        n_clusters, n_classes, rules = plan.mode.shape
        speed = (plan.speed / self._max_speed).clamp(max=1.0) if model.use_speed else torch.ones_like(plan.speed)
        zeros = torch.zeros_like(speed)
        nodes_per_gpu = plan.n_nodes / self.pool.class_gpus[None, :, None]
        per_class = torch.stack([torch.ones_like(speed), zeros, speed, nodes_per_gpu, zeros, plan.left], -1).float()
        # per slot: row (cluster, class) of the per-class tables (an index_select: 6x faster than gather here)
        rows = (torch.arange(n_clusters, device=self.device)[:, None] * n_classes + klass).reshape(-1)
        out = per_class.reshape(n_clusters * n_classes, -1).index_select(0, rows)
        out = out.view(n_clusters, -1, rules, per_class.shape[-1])
        if model.use_topology:
            level = plan.level.reshape(n_clusters * n_classes, rules).index_select(0, rows).view(n_clusters, -1, rules)
            comm = self._job(self.pool.comm, self.window)[..., None]
            penalty = (self._topology_factor(comm, level) - 1.0) / self._max_alpha
            out[..., 1] = penalty.clamp(max=1.0).float()
        return out * fits[..., None, None]  # every feature is finite: a slot without room gets a row of 0

    def _cluster_features(self) -> torch.Tensor:
        lay = self.layout
        free = lookup(lay.popcount, self.pattern)  # (N, nodes)
        free_f = free.double()
        member_t = self._membership.T
        largest = torch.zeros(self.num_envs, self._membership.shape[0], dtype=torch.int64, device=self.device)
        largest = largest.scatter_reduce(1, self._node_group.expand_as(free), free, reduce="amax", include_self=True)
        cpu = (self._node_cpu - self._cpu_used_per_gpu * (lay.node_size - free)) @ member_t
        cpu = torch.where(self._group_cpu > 0, cpu / self._group_cpu.clamp(min=1.0), 1.0)
        out = torch.cat([torch.stack([free_f @ member_t / self._group_gpus,
                                      (free == lay.node_size).double() @ member_t / self._group_nodes,
                                      largest / self._group_node_size, cpu], -1),
                         self._static_groups.expand(self.num_envs, -1, -1)], -1)
        return out.clamp(0.0, 1.0).float()

    def _global_features(self) -> torch.Tensor:
        c, capacity = self.config, self.cluster.n_gpus * MILLI_PER_GPU
        pending = self._pending().double()
        free_milli = (self.cluster.n_gpus - self.busy).double() * MILLI_PER_GPU
        horizon = self.now + c.ending_soon_obs_s
        ending = (self.gpu_expected <= horizon[:, None, None]).sum((1, 2)).double() * MILLI_PER_GPU
        return torch.stack([
            torch.remainder(self.now, DAY_S) / DAY_S,
            ((pending - c.slots).clamp(min=0.0) / c.max_queue_obs).clamp(max=1.0),
            (pending / c.max_queue_obs).clamp(max=1.0),
            (1.0 - free_milli / capacity).clamp(0.0, 1.0),
            (ending / capacity).clamp(max=1.0),
            (self.running.double() / c.max_queue_obs).clamp(max=1.0),
        ], -1).float()
