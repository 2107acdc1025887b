"""The env's observation: what the agent sees of the queue, the candidate placements and the cluster.

Every array is float32 in [0, 1]. ``jobs`` has one row per visible slot (the first K pending jobs in queue order),
``placements`` one row per (slot, placement rule), ``cluster`` one row per node group (nodes of the same GPU type,
size and rack), ``global`` a few scalars; with ``preemption``, ``running`` has one row per running slot (the R most
recently started running jobs, then by job id). The cluster rows gain a ``health`` column only when the scenario
has failures, so a static env's observation is what it always was. The feature names below are the column order;
the env's docstring documents each one's normalization.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from itertools import islice

import numpy as np
from gymnasium import spaces

from envs.core.cluster import MILLI_PER_GPU, ClusterSpec
from envs.core.job import Job
from envs.core.runtime import RuntimeConfig, allocation_speed, topology_level
from envs.gymenv.config import EnvConfig
from envs.gymenv.planner_features import (
    BREAK_FEATURE,
    GANG_FEATURES,
    HORIZON_FEATURES,
    breaks_nodes,
    gang_values,
    horizon_columns,
)
from envs.placement.basic import shape_key
from envs.sim.state import RunningJob
from envs.sim.view import PlacementRule, View

JOB_FEATURES = ("present", "gpus", "gpu_share", "estimate", "wait", "gpu_memory", "type_constrained",
                "comm_sensitivity", "dataset", "priority", "preemptible", "fits_now")
PLACEMENT_FEATURES = ("can_start", "topology_penalty", "speed", "nodes_per_gpu", "staging", "free_left_on_nodes")
GROUP_FEATURES = ("free_gpus", "free_nodes", "largest_free_share", "free_cpu", "speed", "size")
HEALTH_FEATURE = "health"
"""The cluster column appended after GROUP_FEATURES when the scenario has failures."""
QUOTA_FEATURE = "quota_headroom"
"""The job column appended after JOB_FEATURES when the cluster has quotas."""
GLOBAL_FEATURES = ("time_of_day", "queue_beyond_window", "queue", "utilization", "ending_soon", "running")
RUNNING_FEATURES = ("present", "gpus", "elapsed", "attained", "since_checkpoint", "priority", "preemptible")

Placement = np.ndarray | None
"""What a placement rule gives for one job: its GPUs, or None when it does not fit now."""


class ObservationEncoder:
    """Builds observations (and the placements behind them) for one cluster and env config."""

    def __init__(self, cluster: ClusterSpec, config: EnvConfig, runtime: RuntimeConfig,
                 rules: Sequence[PlacementRule]) -> None:
        self.cluster, self.config, self.runtime, self.rules = cluster, config, runtime, list(rules)
        keys = [(n.gpu_type, n.n_gpus, n.rack) for n in cluster.nodes]
        order = {k: i for i, k in enumerate(dict.fromkeys(keys))}
        self.node_group = np.array([order[k] for k in keys])
        self.n_groups = len(order)
        self._by_group = np.argsort(self.node_group, kind="stable")  # nodes sorted by group, for reduceat
        self._group_starts = np.searchsorted(self.node_group[self._by_group], np.arange(self.n_groups))
        self._membership = (self.node_group[None, :] == np.arange(self.n_groups)[:, None]).astype(np.float64)
        self.group_gpus = np.bincount(self.node_group, weights=cluster.node_n_gpus).astype(np.float64)
        self.group_nodes = np.bincount(self.node_group).astype(np.float64)
        self.group_cpu = np.bincount(self.node_group, weights=cluster.node_cpu_milli).astype(np.float64)
        node_speed = cluster.type_speed[cluster.node_type_index]
        self.max_speed = float(cluster.type_speed.max())
        self.group_speed = (np.bincount(self.node_group, weights=node_speed) / self.group_nodes) / self.max_speed
        self.group_node_size = np.bincount(self.node_group, weights=cluster.node_n_gpus) / self.group_nodes
        self.max_alpha = max(runtime.a_pcie, runtime.a_net, runtime.a_xrack, 1e-9)
        self.max_memory = float(cluster.type_memory_gib.max())
        self._log_gpus = math.log1p(cluster.n_gpus)
        self._static: dict[int, np.ndarray] = {}
        self.group_features = GROUP_FEATURES + ((HEALTH_FEATURE,) if config.dynamics.failures.active else ())
        """The cluster columns: GROUP_FEATURES, then ``health`` when the scenario has failures."""
        self.job_features = JOB_FEATURES + ((QUOTA_FEATURE,) if cluster.governance.quotas.active else ())
        """The job columns: JOB_FEATURES, then ``quota_headroom`` when the cluster has quotas."""
        planner = config.planner_features
        self.group_features += HORIZON_FEATURES if planner else ()
        self.placement_columns = PLACEMENT_FEATURES + ((BREAK_FEATURE,) if planner else ())
        """The placement columns: PLACEMENT_FEATURES, then ``breaks_nodes`` with ``planner_features``."""
        self.global_columns = GLOBAL_FEATURES + (GANG_FEATURES if planner else ())
        """The global values: GLOBAL_FEATURES, then the gang classes with ``planner_features``."""
        k, p = config.slots, len(self.rules)
        boxes = {
            "jobs": spaces.Box(0.0, 1.0, (k, len(self.job_features)), np.float32),
            "placements": spaces.Box(0.0, 1.0, (k, p, len(self.placement_columns)), np.float32),
            "cluster": spaces.Box(0.0, 1.0, (self.n_groups, len(self.group_features)), np.float32),
            "global": spaces.Box(0.0, 1.0, (len(self.global_columns),), np.float32),
        }
        if config.preemption:
            boxes["running"] = spaces.Box(0.0, 1.0, (config.running_slots, len(RUNNING_FEATURES)), np.float32)
        self.space = spaces.Dict(boxes)

    # ---- per episode -----------------------------------------------------------------------------------------
    def start_episode(self) -> None:
        """Forget the cached per-job features of the previous episode."""
        self._static = {}

    def static_features(self, job: Job) -> np.ndarray:
        """The features of ``job`` that do not change while it waits (computed once, cached)."""
        row = self._static.get(job.job_id)
        if row is None:
            c = self.config
            row = np.zeros(len(self.job_features), dtype=np.float32)
            row[1] = math.log1p(job.n_gpus) / self._log_gpus
            row[2] = job.gpu_milli / MILLI_PER_GPU
            row[3] = min(1.0, math.log1p(job.runtime_estimate_s) / math.log1p(c.max_runtime_obs_s))
            row[5] = min(1.0, job.gpu_mem_gib / self.max_memory)
            row[6] = float(bool(job.gpu_types))
            row[7] = job.comm_sensitivity
            row[8] = min(1.0, math.log1p(job.dataset_gib) / math.log1p(c.max_dataset_obs_gib))
            row[9] = min(1.0, max(0, job.priority) / c.max_priority_obs)
            row[10] = float(job.preemptible)
            self._static[job.job_id] = row
        return row

    # ---- per decision point ----------------------------------------------------------------------------------
    def visible(self, view: View) -> list[Job]:
        """The jobs in the K slots: the first K pending jobs, in queue order."""
        return list(islice(view.pending.values(), self.config.slots))

    def running(self, view: View) -> list[RunningJob]:
        """The jobs in the R running slots (with ``preemption``; none otherwise): the running jobs, most recently
        started first, then by job id."""
        if not self.config.preemption:
            return []
        return heapq.nsmallest(self.config.running_slots, view.running.values(),
                               key=lambda r: (-r.start_time_s, r.job.job_id))

    def plan(self, view: View, slot_jobs: Sequence[Job]) -> list[list[Placement]]:
        """The allocation each rule would give each visible job now (None: it does not fit).

        The rules depend only on a job's resource shape and dataset, so such jobs share one evaluation; rules are
        complete, so when the first finds nothing no other is asked.
        """
        cache: dict[tuple, list[Placement]] = {}
        plans = []
        quotas = view.has_quotas
        for job in slot_jobs:
            if quotas and not view.admits(job):  # a quota refuses it now: no rule may start it
                plans.append([None] * len(self.rules))
                continue
            key = (*shape_key(job), job.dataset_id)  # the dataset matters to the locality rule
            plan = cache.get(key)
            if plan is None:
                first = self.rules[0](view, job) if view.scheduler_up else None
                plan = [first] + ([rule(view, job) for rule in self.rules[1:]] if first is not None else
                                  [None] * (len(self.rules) - 1))
                cache[key] = plan
            plans.append(plan)
        return plans

    def encode(self, view: View, slot_jobs: Sequence[Job],
               plans: Sequence[Sequence[Placement]]) -> dict[str, np.ndarray]:
        """The observation for ``slot_jobs`` (in slot order) and their ``plans``, from the view alone."""
        k, p = self.config.slots, len(self.rules)
        jobs = np.zeros((k, len(self.job_features)), dtype=np.float32)
        placements = np.zeros((k, p, len(self.placement_columns)), dtype=np.float32)
        log_max_wait = math.log1p(self.config.max_wait_obs_s)
        now = view.time_s
        shared: dict[int, tuple] = {}  # per allocation (slots of one shape share them): what does not depend on the job
        for slot, (job, plan) in enumerate(zip(slot_jobs, plans, strict=True)):
            row = jobs[slot]
            row[:] = self.static_features(job)
            row[0] = 1.0
            row[4] = min(1.0, math.log1p(now - job.submit_time_s) / log_max_wait)
            row[11] = float(plan[0] is not None)
            if len(self.job_features) > len(JOB_FEATURES):  # the team's quota headroom, in cluster GPUs
                row[12] = min(1.0, view.quota(job.team).headroom_gpus / self.cluster.n_gpus)
            for rule, gpus in enumerate(plan):
                if gpus is not None:
                    placements[slot, rule] = self.placement_row(view, job, gpus, shared)
        obs = {
            "jobs": jobs,
            "placements": placements,
            "cluster": self.cluster_features(view),
            "global": self.global_features(view),
        }
        if self.config.preemption:
            obs["running"] = self._running_features(view)
        return obs

    def _running_features(self, view: View) -> np.ndarray:
        """One row per running slot (:meth:`running`); the env's docstring gives each feature's normalization."""
        c = self.config
        out = np.zeros((c.running_slots, len(RUNNING_FEATURES)), dtype=np.float32)
        log_max_wait, log_max_service = math.log1p(c.max_wait_obs_s), math.log1p(c.max_service_obs_gpu_s)
        now = view.time_s
        for slot, run in enumerate(self.running(view)):
            job = run.job
            elapsed_s = now - run.start_time_s
            interval_s = job.checkpoint_interval_s
            if interval_s > 0:  # a restart first pays the overhead; staging (not in the view) counts as computing
                overhead_s = c.dynamics.restart_overhead_s if job.job_id in view.history else 0.0
                computing_s = max(0.0, elapsed_s - overhead_s)
                since = (computing_s - job.checkpointed_s(computing_s)) / interval_s
            else:
                since = 1.0  # never checkpoints: everything done in this run would be lost
            out[slot] = (1.0, math.log1p(job.n_gpus) / self._log_gpus,
                         min(1.0, math.log1p(elapsed_s) / log_max_wait),
                         min(1.0, math.log1p(view.attained_gpu_s(job)) / log_max_service),
                         since, min(1.0, max(0, job.priority) / c.max_priority_obs), float(job.preemptible))
        return out

    def placement_row(self, view: View, job: Job, gpus: np.ndarray, shared: dict[int, tuple]) -> list[float]:
        """The placement columns of starting ``job`` on ``gpus`` now (``shared``: what jobs of one shape share)."""
        c, model = self.cluster, self.runtime
        known = shared.get(id(gpus))
        if known is None:
            first_node = int(c.gpu_node[gpus[0]])
            if first_node == c.gpu_node[gpus[-1]]:
                nodes = [first_node]
                free, size = int(view.node_free_gpus[first_node]), int(c.node_n_gpus[first_node])
            else:
                nodes = np.unique(c.gpu_node[gpus]).tolist()
                free, size = int(view.node_free_gpus[nodes].sum()), int(c.node_n_gpus[nodes].sum())
            left = max(0.0, (free - (0 if job.is_fractional else job.n_gpus)) / size)
            known = (nodes, topology_level(c, gpus, nodes), left)
            shared[id(gpus)] = known
        nodes, level, left = known
        penalty = (model.topology_factor(level, job.comm_sensitivity) - 1.0) / self.max_alpha
        speed = allocation_speed(c, job, nodes) / self.max_speed if model.use_speed else 1.0
        staging = float(model.use_staging and job.dataset_gib > 0
                        and not all(view.has_dataset(n, job.dataset_id) for n in nodes))
        row = [1.0, min(1.0, penalty), min(1.0, speed), len(nodes) / job.n_gpus, staging, left]
        if self.config.planner_features:
            row.append(breaks_nodes(view, c, gpus, job.is_fractional))
        return row

    def cluster_features(self, view: View) -> np.ndarray:
        """The ``cluster`` rows: one per node group, :attr:`group_features` columns."""
        free = view.node_free_gpus
        member = self._membership
        out = np.empty((self.n_groups, len(self.group_features)), dtype=np.float32)
        base = len(GROUP_FEATURES)
        out[:, 0] = member @ free / self.group_gpus
        out[:, 1] = member @ (free == self.cluster.node_n_gpus) / self.group_nodes
        out[:, 2] = np.maximum.reduceat(free[self._by_group], self._group_starts) / self.group_node_size
        cpu = member @ view.node_free_cpu_milli
        out[:, 3] = np.divide(cpu, self.group_cpu, out=np.ones(self.n_groups), where=self.group_cpu > 0)
        out[:, 4] = self.group_speed
        out[:, 5] = self.group_gpus / self.cluster.n_gpus
        if HEALTH_FEATURE in self.group_features:  # health: the share of the group's GPUs that are down
            if view.down_gpus:
                up = np.add.reduceat(view.gpu_up, self.cluster.node_first_gpu[:-1], dtype=np.float64)
                out[:, base] = 1.0 - member @ up / self.group_gpus
            else:
                out[:, base] = 0.0
            base += 1
        if self.config.planner_features:
            out[:, base:] = horizon_columns(view, self.node_group, self.n_groups)
        return np.clip(out, 0.0, 1.0, out=out)

    def global_features(self, view: View) -> np.ndarray:
        """The ``global`` values, :attr:`global_columns` of them."""
        c = self.config
        if c.planner_features:
            return np.concatenate([self._base_global(view), gang_values(view, c.max_queue_obs, c.max_wait_obs_s)])
        return self._base_global(view)

    def _base_global(self, view: View) -> np.ndarray:
        c = self.config
        n_pending = len(view.pending)
        capacity = self.cluster.n_gpus * MILLI_PER_GPU
        allocated = 1.0 - float(view.gpu_free_milli.sum()) / capacity
        horizon_s = view.time_s + c.ending_soon_obs_s
        ending = sum(r.job.n_gpus * r.job.gpu_milli for r in view.running.values() if r.expected_end_s <= horizon_s)
        return np.array([
            (view.time_s % 86400.0) / 86400.0,
            min(1.0, max(0, n_pending - c.slots) / c.max_queue_obs),
            min(1.0, n_pending / c.max_queue_obs),
            min(1.0, max(0.0, allocated)),
            min(1.0, ending / capacity),
            min(1.0, len(view.running) / c.max_queue_obs),
        ], dtype=np.float32)
