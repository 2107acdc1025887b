"""Fair-share state (Slurm classic): exactly decayed GPU-second usage per account, and the factor F = 2^(-U/S).

Usage of account a at time t, in GPU-seconds (continuous-time exponential decay with half-life h)::

    usage_a(t) = Σ over jobs j of a:  gpu_share_j × ∫ over [start_j, min(end_j, t)] of 2^(-(t - τ) / h) dτ

An interval [s, e] seen at time t >= e contributes ``gpu_share × 2^(-(t-e)/h) × (1 - 2^(-(e-s)/h)) / λ`` with
λ = ln 2 / h (:func:`decayed_gpu_s`); with h = inf (no decay) it is ``gpu_share × (e - s)``. Ended jobs are added
once, from :meth:`View.ended_since`, the moment the tracker first sees their record, and then decay by a common
factor; running jobs are integrated afresh at each decision time from their start. So a job that ran and ended
between two decisions is counted exactly, not sampled. A job is charged from its first start to its end (the
view keeps no history of preempted runs yet).

The fair-share factor of account a (Slurm's classic formula) is ``F_a = 2^(-U_a / S_a)`` where
``U_a = usage_a / Σ_b usage_b`` (0 for everyone while nothing has been used, so F = 1) and ``S_a`` is its
normalized share: ``raw_a / Σ_b raw_b`` over every account that has submitted a job so far plus every account named
in ``shares``, where ``raw_a = shares.get(a, default_share)``. With no ``shares`` every account seen so far has an
equal share. An account is a job's user (``by="user"``) or its team (``by="team"``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from envs.core.errors import ConfigError
from envs.core.job import Job, JobState
from envs.sim.view import View

DAY_S = 86_400.0
DEFAULT_HALF_LIFE_S = 7 * DAY_S  # Slurm's PriorityDecayHalfLife default (7-0) [s]
ACCOUNT_KINDS = ("user", "team")


def decayed_gpu_s(gpu_share: float, start_s: float, end_s: float, now_s: float, half_life_s: float) -> float:
    """``gpu_share × ∫_start^end 2^(-(now - τ)/half_life) dτ`` [GPU-seconds], for start <= end <= now.

    ``half_life_s = inf`` means no decay: ``gpu_share × (end - start)``.
    """
    run_s = end_s - start_s
    if math.isinf(half_life_s):
        return gpu_share * run_s
    rate = math.log(2.0) / half_life_s  # λ [1/s]
    return gpu_share * math.exp(-rate * (now_s - end_s)) * -math.expm1(-rate * run_s) / rate


def account_of(job: Job, by: str) -> str:
    """The account a job is charged to: its user or its team."""
    return job.user if by == "user" else job.team


def _check_by(by: str, where: str) -> None:
    if by not in ACCOUNT_KINDS:
        raise ConfigError(f"{where}: by: must be one of {', '.join(ACCOUNT_KINDS)}, got {by!r}")


def _check_half_life(half_life_s: float, where: str) -> None:
    if not half_life_s > 0:  # also refuses NaN; inf is allowed and means no decay
        raise ConfigError(f"{where}: half_life_s: must be > 0 (inf = no decay), got {half_life_s}")


class DecayedUsage:
    """Exact decayed GPU-seconds per account (module docstring), updated incrementally from a view.

    :meth:`at` costs one pass over the newly ended records, the running jobs and the pending jobs, and is cached
    per decision state (view, time, ended count): asking again at the same state is free.
    """

    def __init__(self, half_life_s: float = DEFAULT_HALF_LIFE_S, by: str = "user") -> None:
        _check_half_life(half_life_s, "DecayedUsage")
        _check_by(by, "DecayedUsage")
        self.half_life_s = float(half_life_s)
        self.by = by
        self.version = 0  # bumped at every fresh computation: consumers cache on it
        self.reset()

    def reset(self) -> None:
        """Forget all usage: the next :meth:`at` starts from the view's first record."""
        self._view: View | None = None  # held, not just its id, so that a new run's view is never mistaken for it
        self._time_s = -math.inf  # time the ended-job usage below is decayed to
        self._seen = 0  # records already added
        self._ended: dict[str, float] = {}  # decayed usage of ended jobs at _time_s; holds every account seen
        self._state: tuple[int, float, int] | None = None
        self._usage: dict[str, float] = {}

    def at(self, view: View) -> dict[str, float]:
        """Usage per account at ``view.time_s`` [GPU-seconds]: every account that has submitted a job so far.

        The returned dict is shared with the tracker's cache: do not modify it.
        """
        state = (id(view), view.time_s, view.n_ended)
        if view is self._view and state == self._state:
            return self._usage
        now, by, half_life = view.time_s, self.by, self.half_life_s
        if view is not self._view or now < self._time_s or view.n_ended < self._seen:
            self.reset()  # another run (or the same simulator reset): start over
            self._view = view
        ended = self._ended
        if ended and now > self._time_s and not math.isinf(half_life):
            decay = 2.0 ** (-(now - self._time_s) / half_life)
            for account in ended:
                ended[account] *= decay
        self._time_s = now
        new = view.ended_since(self._seen)
        self._seen += len(new)
        for record in new:
            account = account_of(record.job, by)
            used = ended.get(account, 0.0)
            if record.state is JobState.COMPLETED:
                used += decayed_gpu_s(record.job.gpu_share, record.start_time_s, record.finish_time_s, now,
                                      half_life)
            ended[account] = used
        usage = dict(ended)
        for running in view.running.values():
            account = account_of(running.job, by)
            usage[account] = usage.get(account, 0.0) + decayed_gpu_s(
                running.job.gpu_share, running.start_time_s, now, now, half_life)
        for job in view.pending.values():
            usage.setdefault(account_of(job, by), 0.0)
        self._state, self._usage = state, usage
        self.version += 1
        return usage


class FairShare:
    """Slurm classic fair-share factors F = 2^(-U/S) per account (module docstring), cached per decision state.

    Arguments: ``half_life_s`` — decay half-life of usage [s] (Slurm PriorityDecayHalfLife; inf = no decay);
    ``by`` — ``"user"`` or ``"team"``; ``shares`` — raw shares per account (normalized over the known accounts);
    ``default_share`` — raw share of an account not in ``shares``.
    """

    def __init__(self, half_life_s: float = DEFAULT_HALF_LIFE_S, by: str = "user",
                 shares: Mapping[str, float] | None = None, default_share: float = 1.0) -> None:
        self.usage = DecayedUsage(half_life_s, by)
        self.shares = dict(shares or {})
        named = [(f"shares[{account!r}]", share) for account, share in self.shares.items()]
        for key, share in [*named, ("default_share", default_share)]:
            if not (math.isfinite(share) and share > 0):
                raise ConfigError(f"FairShare: {key}: must be finite and > 0, got {share}")
        self.default_share = float(default_share)
        self._version = -1  # usage version the factors below were computed from
        self._factors: dict[str, float] = {}

    @property
    def by(self) -> str:
        """What an account is: ``"user"`` or ``"team"``."""
        return self.usage.by

    def reset(self) -> None:
        """Forget all usage."""
        self.usage.reset()
        self._version = -1

    def account(self, job: Job) -> str:
        """The account ``job`` is charged to."""
        return account_of(job, self.usage.by)

    def factors(self, view: View) -> dict[str, float]:
        """F in (0, 1] per account seen so far, at ``view.time_s``. Shared with the cache: do not modify it."""
        usage = self.usage.at(view)
        if self.usage.version == self._version:
            return self._factors
        raw = {account: self.default_share for account in usage}
        raw.update(self.shares)
        total_raw = sum(raw.values())
        total_usage = sum(usage.values())
        if total_usage > 0:
            factors = {a: 2.0 ** (-(u / total_usage) / (raw[a] / total_raw)) for a, u in usage.items()}
        else:
            factors = dict.fromkeys(usage, 1.0)
        self._version, self._factors = self.usage.version, factors
        return factors
