"""The Gymnasium environment: a GPU cluster's scheduler as an agent that picks (job, placement), a running job to
preempt (with ``preemption``) or Wait."""

from __future__ import annotations

from collections.abc import Mapping
from itertools import islice
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from envs.core.dynamics import DynamicsConfig
from envs.core.errors import ActionRefused, action_index
from envs.core.job import Job, RefusalReason
from envs.core.metrics import summarize
from envs.gymenv.actions import PreemptSlot, action_mask, decode_action
from envs.gymenv.config import REWARD_TERMS, EnvConfig
from envs.gymenv.episodes import EpisodeSource
from envs.gymenv.observation import ObservationEncoder, Placement
from envs.placement import PLACEMENT_RULES, PlacementRule
from envs.sim.profile import easy_backfill
from envs.sim.simulator import Simulator
from envs.sim.state import RunningJob
from envs.sim.view import View
from envs.workload.table import Workload


class GPUClusterEnv(gym.Env):
    """
    ## Description
    A GPU cluster's job queue and state, simulated event by event by :class:`envs.sim.simulator.Simulator`. At every
    decision point (after the arrivals and completions of one instant) the agent starts one of the first K pending
    jobs with one of P placement rules, or waits for the next event. An episode replays one workload window of M
    jobs: a freshly generated synthetic workload, or M consecutive jobs of a trace. Decision points where no start
    (and, with preemption, no preemption) is possible are skipped: the agent is asked only when it has a real
    choice. The agent acts on the visible window only: while none of the first K pending jobs fits, nothing starts
    (a job further back waits too, as in the RL batch schedulers this follows); the backfill-assisted variant is
    the one that lets EASY start such jobs around a reservation the agent chooses.

    ``scenario`` (any variant) adds failures and outages (:mod:`envs.core.dynamics`): a failed GPU has no free
    share and the jobs on it are interrupted (they roll back to their last checkpoint and requeue); while the
    scheduler is down there is no decision point. With ``preemption`` (the Preemptive variant) the agent may also
    preempt one of the R most recently started running jobs: it rolls back to its last checkpoint and goes back to
    its place in the queue (which may be beyond the K visible slots), and the env stays at the same instant, as
    after a start. The agent is asked at every decision point (a job is pending) where some Start or some Preempt
    is legal, so more often than without preemption: also where nothing fits but a preemptible job runs.
    Preempting and restarting at one instant can repeat without time passing: Wait stays legal there (a job runs),
    and ``max_episode_steps`` truncates a policy that never takes it.

    A cluster preset with partitions and quotas (:mod:`envs.core.governance`) governs the env too: rules place a
    job only on its partition's nodes, a Start that a quota refuses now is masked, and the job rows gain a
    ``quota_headroom`` column.

    ## Action Space
    ``Discrete(K·P + R + 1)``, R = ``running_slots`` with ``preemption`` and 0 otherwise: action ``k·P + p`` starts
    the job in visible slot k (queue order: submit time, then id) on the GPUs chosen by placement rule
    ``config.placement_rules[p]``; action ``K·P + r`` preempts the running job in running slot r (running jobs,
    most recently started first, then by job id); action ``K·P + R`` (the last) is Wait. ``action_masks()`` (on
    the env itself) marks the feasible actions: a Start is legal iff its slot holds a job and the rule finds room
    for it now (with ``backfill_assist``, iff its slot holds a job: starting a job that does not fit reserves it at
    its earliest start and lets EASY backfilling start every queued job that does not delay it, then waits for the
    next event), and, with ``mask_aliases``, iff no earlier rule gives that job the same GPUs (two such actions do
    the same thing; in a third of the default env's decisions all rules agree); a Preempt is legal iff its running
    slot holds a job the simulator may preempt now (preemptible, scheduler up); Wait is masked out when no event
    is left (nothing running, no future arrival, nothing to repair), so an episode cannot stall, and, with
    ``work_conserving``, whenever some Start is legal. A masked action changes nothing: the step returns the same
    observation, reward 0 and ``info["refused"]`` with the reason (so random-action checkers run; agents should
    use the mask); so does an integer outside the space. An action that is not one integer (a float, a bool, a
    string, None, an array) raises ``TypeError``.

    ## Observation Space
    A ``Dict`` of float32 arrays in [0, 1]:

    | key | shape | feature | normalization |
    |---|---|---|---|
    | jobs | (K, 12 or 13) | present | 1 if the slot holds a job |
    | | | gpus | log(1 + GPUs) / log(1 + cluster GPUs) |
    | | | gpu_share | milli-GPU per GPU / 1000 (1 for whole GPUs) |
    | | | estimate | log(1 + requested wall time) / log(1 + max_runtime_obs_s), clipped |
    | | | wait | log(1 + now − submit) / log(1 + max_wait_obs_s), clipped |
    | | | gpu_memory | per-GPU memory need / largest GPU memory of the cluster |
    | | | type_constrained | 1 if the job allows only some GPU types |
    | | | comm_sensitivity | c in [0, 1] |
    | | | dataset | log(1 + dataset GiB) / log(1 + max_dataset_obs_gib), clipped |
    | | | priority | priority class / max_priority_obs, clipped |
    | | | preemptible | 1 if preemptible |
    | | | fits_now | 1 if some placement rule can start it now (and its quotas admit it) |
    | | | quota_headroom | GPUs its team may still take now / cluster GPUs, clipped (only with quotas: 13 columns) |
    | placements | (K, P, 6) | can_start | 1 if rule p can start the slot's job now (all 0 otherwise) |
    | | | topology_penalty | (topology factor − 1) / max(a_pcie, a_net, a_xrack) |
    | | | speed | speed factor of the allocation / fastest type of the cluster |
    | | | nodes_per_gpu | nodes used / GPUs used |
    | | | staging | 1 if the dataset must be staged to some node of the allocation |
    | | | free_left_on_nodes | whole GPUs left free on the chosen nodes / their GPUs |
    | | | breaks_nodes | nodes entirely free now that the start leaves partly free / nodes used (planner) |
    | cluster | (groups, 6 or 7) | free_gpus | free GPUs / GPUs of the node group (same type, size, rack) |
    | | | free_nodes | entirely free nodes / nodes of the group |
    | | | largest_free_share | most free GPUs on one node of the group / node size |
    | | | free_cpu | free CPU / CPU of the group (1 if not modelled) |
    | | | speed | speed factor of the group's type / fastest type |
    | | | size | GPUs of the group / GPUs of the cluster |
    | | | health | failed GPUs of the group / its GPUs (only when the scenario has failures: 7 columns) |
    | | | free_within_H | (free GPU share + that of jobs expected to end within H) / group GPUs (planner) |
    | | | partial_nodes | nodes with some but not all GPUs free / nodes of the group (planner) |
    | global | (6,) | time_of_day | (now mod 1 day) / 1 day |
    | | | queue_beyond_window | max(0, pending − K) / max_queue_obs, clipped |
    | | | queue | pending / max_queue_obs, clipped |
    | | | utilization | allocated GPU share / cluster GPUs |
    | | | ending_soon | GPU share of running jobs expected (by requested time) to end within ending_soon_obs_s |
    | | | running | running jobs / max_queue_obs, clipped |
    | | | gangs_C, oldest_C | per gang size class C: pending jobs / max_queue_obs; oldest's wait as ``wait`` (planner) |
    | running | (R, 7) | present | 1 if the running slot holds a job (key present only with ``preemption``) |
    | | | gpus | log(1 + GPUs) / log(1 + cluster GPUs) |
    | | | elapsed | log(1 + now − start of the current run) / log(1 + max_wait_obs_s), clipped |
    | | | attained | log(1 + GPU share × time held over all runs [GPU-s]) / log(1 + max_service_obs_gpu_s), clipped |
    | | | since_checkpoint | share of a checkpoint interval computed since the last checkpoint (1: never checkpoints) |
    | | | priority | priority class / max_priority_obs, clipped |
    | | | preemptible | 1 if preemptible |

    ``since_checkpoint`` is ((now − start of the run − restart overhead, for a restart) mod interval) / interval:
    what a preemption now would lose, as a share of the checkpoint interval (all of the run for a job that never
    checkpoints). Dataset staging, which the view does not show, counts as computing. ``max_service_obs_gpu_s``
    defaults to 64 GPUs for a week.

    The columns marked (planner) appear only with ``planner_features`` (:mod:`envs.gymenv.planner_features`),
    after the others: ``breaks_nodes`` as a 7th placement column, the four horizon columns after the cluster
    columns, ten gang values after the global ones. Expected ends use requested times; H is 15m, 1h or 4h; the gang
    size classes are 1, 2, 3-4, 5-8 and more than 8 GPUs (C = 1, 2, 3to4, 5to8, over8).

    ## Rewards
    A weighted sum of named terms, each reported unweighted in ``info["reward_terms"]`` (weights:
    ``config.reward_weights``). Both are dense and telescope over an episode:
    - ``wait`` = −(Δ ∫ pending jobs dt) / wait_scale_s: its episode sum is −(total wait of the episode's jobs) /
      wait_scale_s (default −1 per job-hour), counting the time a job requeued by a preemption or a failure waits
      again (a job's time pending is its end − submit − time holding GPUs). Weight 1 by default.
    - ``utilization`` = (Δ ∫ allocated GPUs dt) / (cluster GPUs · wait_scale_s): its episode sum is the GPU-time
      held (interrupted runs included) over cluster size. Weight 0 by default.

    ## Starting State
    ``reset(seed=...)`` draws the episode's workload with ``self.np_random`` (a generator seed or a trace window),
    then, when the scenario has failures or outages, the seed of their random draws (so ``reset(seed=s)`` replays
    the same failures), and advances to the first decision point; the cluster is empty and healthy.
    ``reset(options={"workload": w})`` replays the :class:`~envs.workload.table.Workload` ``w`` instead of the drawn
    one (the draw still happens, so the env's random stream does not depend on it).

    ## Episode End
    Terminated when every job of the window has ended (completed, failed past the scenario's retry limit, or
    rejected at submission); ``info`` then carries ``episode_metrics`` (SPEC §7,
    :func:`envs.core.metrics.summarize`). Truncated by ``max_episode_steps`` of the registered id.

    ## Arguments
    ``gym.make("gpusched/GPUCluster-v0", config=EnvConfig(...) | dict, render_mode="ansi", **overrides)``; keyword
    overrides are :class:`envs.gymenv.config.EnvConfig` fields (unknown keys raise ``ConfigError``). Precedence:
    EnvConfig defaults < the registered variant (``variant``) < a ``config`` dict < keyword overrides; an
    ``EnvConfig`` object is complete and replaces the defaults and the variant.

    ## Version History
    - v0: initial version. Failures and outages (``scenario``) and preemption (``preemption``, ``running_slots``:
      the Preemptive variant) came later without bumping any id: with their defaults (``scenario="none"``, no
      preemption) the actions and observations of every existing id are unchanged (``health`` appears only when
      the scenario has failures, ``running`` and the Preempt actions only with preemption). Partitions and quotas
      likewise change nothing on a cluster without them (``quota_headroom`` appears only with quotas).
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi"], "render_fps": 4}

    def __init__(self, config: EnvConfig | Mapping[str, Any] | None = None, render_mode: str | None = None,
                 variant: Mapping[str, Any] | None = None, **overrides: Any) -> None:
        # precedence: EnvConfig defaults < the registered variant's settings < config < keyword overrides;
        # a complete EnvConfig object replaces the defaults and the variant
        if isinstance(config, EnvConfig):
            self.config = config.replace(**overrides)
        else:
            self.config = EnvConfig.from_dict({**(variant or {}), **(config or {}), **overrides})
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']}, got {render_mode!r}")
        self.render_mode = render_mode
        self._source = EpisodeSource(self.config)
        self.cluster = self._source.cluster
        self.runtime = self._source.runtime
        self.workload: Workload | None = None
        self.dynamics: DynamicsConfig | None = None
        self._rules = [PLACEMENT_RULES[name] for name in self.config.placement_rules]
        self._encoder = ObservationEncoder(self.cluster, self.config, self._source.runtime, self._rules)
        self.action_space = spaces.Discrete(self.config.n_actions)
        self.observation_space = self._encoder.space
        self._sim: Simulator | None = None
        self._slot_jobs: list[Job] = []
        self._plans: list[list[Placement]] = []
        self._running: list[RunningJob] = []
        self._mask = np.zeros(self.config.n_actions, dtype=bool)

    # ---- Gymnasium API -----------------------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        unknown = sorted(set(options or {}) - {"workload"})
        if unknown:
            raise TypeError(f"reset(options=...): unknown option(s) {', '.join(map(repr, unknown))} (known: "
                            "'workload')")
        episode = self._source.sample(self.np_random)
        if options and "workload" in options:  # replay a given job table (the draw above still advances the rng)
            if not isinstance(options["workload"], Workload):
                raise TypeError(f"reset(options={{'workload': ...}}): expected a Workload (envs.workload.table), got "
                                f"{type(options['workload']).__name__}")
            episode = episode._replace(workload=options["workload"])
        self.workload = episode.workload  # the episode's job table (e.g. to run a heuristic on the same episode)
        self.dynamics = episode.dynamics  # its failures and outages, with the episode's seed
        self._encoder.start_episode()
        self._sim = Simulator(self.cluster, episode.workload, self._source.runtime, episode.dynamics)
        self._integrals = (self._sim.pending_job_s, self._sim.busy_gpu_s)
        self._skip_to_choice()
        return self._get_obs(), {"time_s": self._sim.time_s, "reward_terms": dict.fromkeys(REWARD_TERMS, 0.0)}

    def step(self, action: int):
        sim = self._require_sim()
        if sim.done:  # Gymnasium: after terminated, step's behaviour is undefined; here it is an error
            raise RuntimeError("step() after the episode ended (terminated=True): call reset() first")
        action = action_index(action, self.action_space)
        try:
            self._apply(action)
        except ActionRefused as refused:  # a masked action: nothing happens, and info says why
            info = {"time_s": sim.time_s, "reward_terms": dict.fromkeys(REWARD_TERMS, 0.0), "refused": str(refused)}
            return self._get_obs(), 0.0, False, False, info
        self._skip_to_choice()
        terms = self._reward_terms()
        reward = sum(self.config.reward_weights[name] * value for name, value in terms.items())
        terminated = sim.done
        info: dict[str, Any] = {"time_s": sim.time_s, "reward_terms": terms}
        if terminated:
            info["episode_metrics"] = summarize(sim.log())
        return self._get_obs(), float(reward), terminated, False, info

    def _apply(self, action: int) -> None:
        """Carry out ``action``; raises ActionRefused for an action the mask forbids."""
        sim = self._require_sim()
        if not 0 <= action < self.config.n_actions:
            raise ActionRefused(RefusalReason.UNKNOWN_JOB, f"action {action} is outside 0..{self.config.n_actions - 1}")
        start = decode_action(self.config, action)
        if start is None:
            if not self._mask[-1]:
                raise ActionRefused(RefusalReason.NOT_PENDING,
                                    "Wait is masked: no event is left, or a start is legal (work-conserving env)")
            sim.wait()
            return
        if isinstance(start, PreemptSlot):
            if start.slot >= len(self._running):
                raise ActionRefused(RefusalReason.NOT_RUNNING, f"action {action}: running slot {start.slot} holds "
                                                               "no job")
            sim.preempt(self._running[start.slot].job.job_id)  # refused (and nothing changes) when not preemptible
            return
        slot, rule = start
        if slot >= len(self._slot_jobs):
            raise ActionRefused(RefusalReason.UNKNOWN_JOB, f"action {action}: slot {slot} holds no job")
        job, gpus = self._slot_jobs[slot], self._plans[slot][rule]
        if gpus is None and self.config.backfill_assist:
            self._reserve_and_backfill(job, self._rules[rule])
            return
        if gpus is None:
            raise ActionRefused(RefusalReason.GPU_BUSY, f"action {action}: rule {self.config.placement_rules[rule]!r} "
                                                        f"finds no room for job {job.job_id} now")
        sim.start(job.job_id, gpus)

    def action_masks(self) -> np.ndarray:
        """Boolean mask of the legal actions at the current decision point (see the class docstring)."""
        return self._mask.copy()

    @property
    def view(self) -> View:
        """The simulator's read-only view of the current decision point (what a heuristic policy reads)."""
        return self._require_sim().view

    @property
    def visible_jobs(self) -> tuple[Job, ...]:
        """The jobs in the K slots at the current decision point (slot order)."""
        return tuple(self._slot_jobs)

    @property
    def running_jobs(self) -> tuple[RunningJob, ...]:
        """The jobs in the R running slots at the current decision point (slot order; empty without preemption)."""
        return tuple(self._running)

    def render(self) -> str | None:
        if self.render_mode != "ansi" or self._sim is None:
            return None
        return self._render_text()

    # ---- helpers ---------------------------------------------------------------------------------------------
    def _require_sim(self) -> Simulator:
        if self._sim is None:
            raise RuntimeError("call reset() before step()")
        return self._sim

    def _skip_to_choice(self) -> None:
        """Plan the visible jobs; advance until a job is pending and some start (or, with preemption, some
        preemption) is possible, or the episode is done."""
        sim = self._sim
        assert sim is not None
        config = self.config
        while True:
            view = sim.view
            self._slot_jobs = self._encoder.visible(view)
            self._plans = self._encoder.plan(view, self._slot_jobs)
            self._running = self._encoder.running(view)
            self._mask = action_mask(config, self._plans, sim.events_left, sim.done, self._running, sim.view)
            can_start = any(plan[0] is not None for plan in self._plans)
            can_preempt = bool(self._slot_jobs) and bool(self._mask[config.n_starts:config.n_actions - 1].any())
            if can_start or can_preempt or sim.done or self._backfill_possible():
                break
            sim.wait()

    def _backfill_possible(self) -> bool:
        """Backfill-assisted mode: some job behind the visible window fits now (reserving a visible job would let
        EASY start it), so the agent has a choice even though no visible job fits."""
        if not self.config.backfill_assist or not self._slot_jobs:
            return False
        view, rule = self._require_sim().view, self._rules[0]
        return any(rule(view, job) is not None for job in islice(view.pending.values(), self.config.slots, None))

    def _reserve_and_backfill(self, head: Job, rule: PlacementRule) -> None:
        """Backfill-assisted mode: reserve ``head``, start every job EASY allows in queue order, then wait."""
        sim = self._require_sim()
        while True:
            others = [job for job in sim.view.pending.values() if job.job_id != head.job_id]
            _, job, gpus = easy_backfill(sim.view, head, others, rule)
            if job is None:
                break
            sim.start(job.job_id, gpus)
        sim.wait()

    def _reward_terms(self) -> dict[str, float]:
        sim = self._require_sim()
        pending_job_s, busy_gpu_s = sim.pending_job_s, sim.busy_gpu_s
        last_pending, last_busy = self._integrals
        self._integrals = (pending_job_s, busy_gpu_s)
        scale = self.config.wait_scale_s
        return {
            "wait": -(pending_job_s - last_pending) / scale,
            "utilization": (busy_gpu_s - last_busy) / (self.cluster.n_gpus * scale),
        }

    def _get_obs(self) -> dict[str, np.ndarray]:
        sim = self._require_sim()
        return self._encoder.encode(sim.view, self._slot_jobs, self._plans)

    def _render_text(self) -> str:
        sim = self._require_sim()
        view, c = sim.view, self.cluster
        lines = [f"t={view.time_s:,.0f}s  pending={len(view.pending)}  running={len(view.running)}  "
                 f"free GPUs={view.free_gpus}/{c.n_gpus}"]
        for slot, job in enumerate(self._slot_jobs):
            fits = "".join("+" if g is not None else "." for g in self._plans[slot])
            lines.append(f"  slot {slot:2d}: job {job.job_id:>6} {job.gpu_share:g} GPU  "
                         f"wait {view.time_s - job.submit_time_s:,.0f}s  rules [{fits}]")
        for slot, run in enumerate(self._running):
            lines.append(f"  running {slot:2d}: job {run.job.job_id:>6} {run.job.gpu_share:g} GPU  "
                         f"since {run.start_time_s:,.0f}s  {'preemptible' if run.job.preemptible else 'fixed'}")
        symbols = np.where(view.gpu_whole_free, ".", np.where(view.gpu_free_milli > 0, "+", "#"))
        shown = min(c.n_nodes, 32)
        for node in range(shown):
            first, last = c.node_first_gpu[node], c.node_first_gpu[node + 1]
            spec = c.nodes[node]
            lines.append(f"  {spec.name:>14} {spec.gpu_type:>9} r{spec.rack} [{''.join(symbols[first:last])}]")
        if shown < c.n_nodes:
            lines.append(f"  ... {c.n_nodes - shown} more nodes")
        return "\n".join(lines)
