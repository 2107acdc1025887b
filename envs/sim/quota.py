"""The quota ledger of one run: GPU shares held per team, user and queue, admission checks, reclaim victims, and the
time integrals the metrics report (quota models in :mod:`envs.core.governance`).

Shares are counted in milli-GPU (a job holds ``n_gpus × gpu_milli``), so admission is exact integer arithmetic.

Admission of a start of job j (team q, user u, need r):

- hard limits: ``held[q] + r <= limit[q]`` and ``held_user[u] + r <= limit_user[u]`` where set;
- queues, where team q has one: ``held[q] + r <= nominal[q] + borrowing_limit[q]`` and
  ``held[cohort] + r + reserved[cohort] <= nominal[cohort]`` (the cohort's nominal quotas summed), where
  ``reserved`` is quota freed by a reclaim and held for the job it was reclaimed for, so that no borrower takes it
  first; a start within the queue's own nominal quota does not have to leave the reserved quota free.

Reclaim (Kueue's ``reclaimWithinCohort: Any`` with its victim order): at a decision point, for each queue in
team order whose first pending job (queue order) fits within its own nominal quota but not in the cohort, the
candidates are the running jobs of the cohort's other queues that borrow (held above nominal), lowest priority
first, then most recently started, then highest job id. Candidates are taken in that order, skipping one whose
queue no longer borrows once the ones taken so far are gone, until the job fits; then, as Kueue does, each taken
victim is given back, last taken first, when the job still fits without preempting it. If the job cannot fit even
with every candidate gone, nothing is preempted. A reclaimed job is preempted whether or not it is preemptible: a
job admitted on borrowed quota accepts that it may be reclaimed. Reclaim works on quota, as Kueue's does: it frees
the quota, not particular GPUs, so the job it was made for may still wait for room on its nodes (its partition);
one reclaim is under way per cohort at a time (its quota stays held until that job starts or leaves the queue).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from envs.core.cluster import MILLI_PER_GPU
from envs.core.governance import Quotas
from envs.core.job import Job
from envs.sim.state import RunningJob

UNLIMITED = 1 << 62
"""A cap no usage reaches [milli-GPU]."""


def _milli(gpus: float) -> int:
    return UNLIMITED if gpus == float("inf") else round(gpus * MILLI_PER_GPU)


@dataclass(frozen=True, slots=True)
class TeamQuota:
    """What a team holds and may hold, in GPUs (the view's :meth:`~envs.sim.view.View.quota`)."""

    held_gpus: float  # GPU share held now
    quota_gpus: float  # the most it may hold now: its hard limit or nominal + what it may borrow (inf = none)
    headroom_gpus: float  # quota - held, >= 0 [GPUs]
    nominal_gpus: float  # its queue's nominal quota (its hard limit without a queue; inf = none)


class QuotaLedger:
    """Held shares and quota checks of one run (module docstring). ``refusal`` is the simulator's check; ``take``
    and ``give`` follow every start and end; ``integrate`` accumulates the time integrals."""

    def __init__(self, quotas: Quotas) -> None:
        self.quotas = quotas
        self.team_cap = {t: _milli(g) for t, g in quotas.team_limits.items()}
        self.user_cap = {u: _milli(g) for u, g in quotas.user_limits.items()}
        self.nominal = {t: _milli(q.nominal_gpus) for t, q in quotas.queues.items()}
        self.borrow_cap = {t: _milli(q.borrowing_limit_gpus) for t, q in quotas.queues.items()}
        self.cohort_of = {t: q.cohort or f"\0{t}" for t, q in quotas.queues.items()}  # a lone queue: its own
        self.cohort_nominal: dict[str, int] = {}
        for team, cohort in self.cohort_of.items():
            self.cohort_nominal[cohort] = self.cohort_nominal.get(cohort, 0) + self.nominal[team]
        self.held: dict[str, int] = {}  # per team [milli-GPU]
        self.held_user: dict[str, int] = {}
        self.held_cohort = dict.fromkeys(self.cohort_nominal, 0)
        self.reserved: dict[str, tuple[int, int]] = {}  # cohort -> (job id reclaimed for, milli-GPU held for it)
        self.held_milli_s: dict[str, float] = {}  # ∫ held dt per team [milli-GPU-seconds]
        self.borrowed_milli_s = 0.0  # ∫ Σ over queues of max(0, held - nominal) dt [milli-GPU-seconds]
        self.violations = 0  # starts that left a holding above its quota (the admission check makes it 0)
        self.reclaims = 0  # jobs preempted by reclaim
        self.reclaimed_milli = 0  # Σ of their shares [milli-GPU]
        self.reclaim_lost_gpu_s = 0.0  # work their preemptions rolled back [GPU-seconds]

    # ---- admission ----------------------------------------------------------------------------------------------
    def refusal(self, job: Job) -> str | None:
        """Why starting ``job`` now would exceed a quota (one phrase), or None when it is admitted."""
        need, team = job.n_gpus * job.gpu_milli, job.team
        cap = self.team_cap.get(team)
        if cap is not None and self.held.get(team, 0) + need > cap:
            return f"team {team!r} would hold more than its limit of {cap / MILLI_PER_GPU:g} GPUs"
        cap = self.user_cap.get(job.user)
        if cap is not None and self.held_user.get(job.user, 0) + need > cap:
            return f"user {job.user!r} would hold more than its limit of {cap / MILLI_PER_GPU:g} GPUs"
        nominal = self.nominal.get(team)
        if nominal is None:
            return None
        held = self.held.get(team, 0) + need
        if held > nominal + self.borrow_cap[team]:
            return f"queue {team!r} would borrow more than its borrowing limit"
        cohort = self.cohort_of[team]
        room = self.cohort_nominal[cohort] - self.held_cohort[cohort]
        reserved = self.reserved.get(cohort)
        if reserved is not None and held > nominal and reserved[0] != job.job_id:
            room -= reserved[1]
        if need > room:
            return f"cohort of queue {team!r} has {max(room, 0) / MILLI_PER_GPU:g} GPUs of quota left"
        return None

    def never_admits(self, job: Job) -> bool:
        """True when ``job`` asks for more than a quota allows even on an idle cluster (it is rejected)."""
        need, team = job.n_gpus * job.gpu_milli, job.team
        if need > self.team_cap.get(team, UNLIMITED) or need > self.user_cap.get(job.user, UNLIMITED):
            return True
        nominal = self.nominal.get(team)
        return nominal is not None and need > min(nominal + self.borrow_cap[team],
                                                  self.cohort_nominal[self.cohort_of[team]])

    def change(self, job: Job, sign: int) -> None:
        """A start (sign +1) or an end (sign -1) of ``job``'s hold."""
        delta, team = sign * job.n_gpus * job.gpu_milli, job.team
        self.held[team] = self.held.get(team, 0) + delta
        self.held_user[job.user] = self.held_user.get(job.user, 0) + delta
        cohort = self.cohort_of.get(team)
        if cohort is not None:
            self.held_cohort[cohort] += delta
            reserved = self.reserved.get(cohort)
            if sign > 0 and reserved is not None and reserved[0] == job.job_id:
                del self.reserved[cohort]
        if sign > 0 and self._over(team, job.user):
            self.violations += 1

    def _over(self, team: str, user: str) -> bool:
        """True when ``team``, ``user``, the team's queue or its cohort holds more than its quota."""
        held = self.held.get(team, 0)
        if held > self.team_cap.get(team, UNLIMITED):
            return True
        if self.held_user.get(user, 0) > self.user_cap.get(user, UNLIMITED):
            return True
        nominal = self.nominal.get(team)
        if nominal is None:
            return False
        cohort = self.cohort_of[team]
        return held > nominal + self.borrow_cap[team] or self.held_cohort[cohort] > self.cohort_nominal[cohort]

    def forget_reservations(self, pending: Mapping[int, Job]) -> None:
        """Drop quota held for jobs that are no longer pending."""
        for cohort in [c for c, (job_id, _) in self.reserved.items() if job_id not in pending]:
            del self.reserved[cohort]

    # ---- reclaim ------------------------------------------------------------------------------------------------
    def reclaim_victims(self, pending: Iterable[Job], running: Mapping[int, RunningJob]) -> list[tuple[int, int]]:
        """(job id, job id of the victim) pairs to preempt now (module docstring), in order; the quota they free is
        reserved for their job. Costs one pass over the pending jobs and, for a job that reclaims, the running ones."""
        heads: dict[str, Job] = {}
        for job in pending:
            if job.team in self.nominal and job.team not in heads:
                heads[job.team] = job
                if len(heads) == len(self.nominal):
                    break
        out: list[tuple[int, int]] = []
        for team in sorted(heads):
            job = heads[team]
            need, cohort = job.n_gpus * job.gpu_milli, self.cohort_of[team]
            if (self.held.get(team, 0) + need > self.nominal[team] or cohort in self.reserved
                    or need <= self.cohort_nominal[cohort] - self.held_cohort[cohort]):
                continue
            victims = self._victims(team, need, running)
            if victims:
                self.reserved[cohort] = (job.job_id, need)
                out.extend((job.job_id, v.job.job_id) for v in victims)
        return out

    def _victims(self, team: str, need: int, running: Mapping[int, RunningJob]) -> list[RunningJob]:
        cohort = self.cohort_of[team]
        candidates = sorted(
            (r for r in running.values()
             if r.job.team != team and self.cohort_of.get(r.job.team) == cohort
             and self.held.get(r.job.team, 0) > self.nominal[r.job.team]),
            key=lambda r: (r.job.priority, -r.start_time_s, -r.job.job_id))
        short = need - (self.cohort_nominal[cohort] - self.held_cohort[cohort])
        held = {t: self.held.get(t, 0) for t in self.nominal}
        taken: list[RunningJob] = []
        for r in candidates:
            if short <= 0:
                break
            victim_team, share = r.job.team, r.job.n_gpus * r.job.gpu_milli
            if held[victim_team] <= self.nominal[victim_team]:
                continue  # that queue no longer borrows
            held[victim_team] -= share
            short -= share
            taken.append(r)
        if short > 0:
            return []
        for r in reversed(list(taken)):  # give back what is not needed, last taken first
            share = r.job.n_gpus * r.job.gpu_milli
            if short + share <= 0:
                short += share
                taken.remove(r)
        return taken

    def note_reclaim(self, job: Job, lost_gpu_s: float) -> None:
        """Count a job preempted by reclaim, whose preemption rolled back ``lost_gpu_s`` of work [GPU-seconds]."""
        self.reclaims += 1
        self.reclaimed_milli += job.n_gpus * job.gpu_milli
        self.reclaim_lost_gpu_s += lost_gpu_s

    # ---- reading ------------------------------------------------------------------------------------------------
    def log_fields(self) -> dict[str, object]:
        """The job log's quota fields (:class:`~envs.core.joblog.JobLog`)."""
        return {"quota_violations": self.violations, "borrowed_gpu_s": self.borrowed_milli_s / MILLI_PER_GPU,
                "reclaims": self.reclaims, "reclaimed_gpus": self.reclaimed_milli / MILLI_PER_GPU,
                "reclaim_lost_gpu_s": self.reclaim_lost_gpu_s,
                "team_gpu_s": tuple(sorted((t, v / MILLI_PER_GPU) for t, v in self.held_milli_s.items()))}

    def integrate(self, dt: float) -> None:
        """Accumulate ``dt`` seconds of the current holdings."""
        for team, held in self.held.items():
            self.held_milli_s[team] = self.held_milli_s.get(team, 0.0) + held * dt
        self.borrowed_milli_s += sum(max(0, self.held.get(t, 0) - n) for t, n in self.nominal.items()) * dt

    def team_quota(self, team: str) -> TeamQuota:
        """What ``team`` holds and may hold now [GPUs] (ignoring user limits)."""
        held = self.held.get(team, 0)
        caps = []
        if team in self.team_cap:
            caps.append(self.team_cap[team])
        nominal = self.nominal.get(team)
        if nominal is not None:
            cohort = self.cohort_of[team]
            caps.append(min(nominal + self.borrow_cap[team],
                            held + max(0, self.cohort_nominal[cohort] - self.held_cohort[cohort])))
        cap = min(caps) if caps else UNLIMITED
        nominal = nominal if nominal is not None else self.team_cap.get(team, UNLIMITED)

        def gpus(milli: int) -> float:
            return float("inf") if milli >= UNLIMITED else milli / MILLI_PER_GPU

        return TeamQuota(held / MILLI_PER_GPU, gpus(cap), gpus(max(0, cap - held)) if cap < UNLIMITED
                         else float("inf"), gpus(nominal))
