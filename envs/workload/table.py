"""The common job table every workload source produces, and the utilities that cut and reshape it."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from envs.core.errors import ConfigError
from envs.core.job import Job

LOAD_FACTORS = (1e-3, 1e3)
"""The range of load factors (arrival rates scaled by a factor): at 10⁻³ a day of arrivals spreads over three
years, at 10³ over 90 s; beyond, times leave their bounds or the jobs all arrive at once."""


@dataclass(frozen=True)
class Workload:
    """A job table: jobs sorted by (submit time, job id), plus where they came from.

    ``skipped`` counts the trace records a loader did not turn into jobs, by reason (nothing is dropped
    silently). ``machine_gpus`` is the size of the machine the trace was recorded on, when the trace says
    (SWF ``MaxProcs``), else 0.
    """

    name: str
    jobs: tuple[Job, ...]
    source: str = "generated"  # file path, or "generated"
    skipped: Mapping[str, int] = field(default_factory=dict)
    machine_gpus: int = 0

    def __post_init__(self) -> None:
        keys = [(j.submit_time_s, j.job_id) for j in self.jobs]
        if keys != sorted(keys):
            raise ConfigError(f"workload {self.name!r}: jobs must be sorted by (submit_time_s, job_id)")
        ids = {j.job_id for j in self.jobs}
        if len(ids) != len(self.jobs):
            raise ConfigError(f"workload {self.name!r}: job ids must be unique")

    def __len__(self) -> int:
        return len(self.jobs)

    @classmethod
    def from_jobs(cls, name: str, jobs: list[Job] | tuple[Job, ...], **kwargs: object) -> Workload:
        """A workload of ``jobs`` in any order; sorts them by (submit time, job id)."""
        return cls(name, tuple(sorted(jobs, key=lambda j: (j.submit_time_s, j.job_id))), **kwargs)  # type: ignore[arg-type]

    def _replace(self, jobs: tuple[Job, ...], suffix: str) -> Workload:
        # Re-sort: shifting or scaling submit times can round two distinct times to one float, and the tie must
        # then go to the lower job id (e.g. submits 1e9 + 1 and the next float up, job ids 9 and 2, load x3).
        jobs = tuple(sorted(jobs, key=lambda j: (j.submit_time_s, j.job_id)))
        return dataclasses.replace(self, name=f"{self.name}{suffix}", jobs=jobs)

    def window(self, start: int, n_jobs: int, rebase: bool = True) -> Workload:
        """Jobs ``start .. start + n_jobs - 1`` (in table order); with ``rebase`` the first submits at t = 0."""
        if start < 0 or n_jobs < 1 or start + n_jobs > len(self.jobs):
            raise ConfigError(
                f"workload {self.name!r}: window [{start}, {start + n_jobs}) is outside 0..{len(self.jobs)}"
            )
        jobs = self.jobs[start : start + n_jobs]
        if rebase:
            t0 = jobs[0].submit_time_s
            jobs = tuple(dataclasses.replace(j, submit_time_s=j.submit_time_s - t0) for j in jobs)
        return self._replace(jobs, f"[{start}:{start + n_jobs}]")

    def split_by_time(self, train_fraction: float) -> tuple[Workload, Workload]:
        """(train, test): jobs submitted before / from the time that leaves ``train_fraction`` of the span before it.

        The two parts never overlap: every train job is submitted strictly before every test job.
        """
        if not 0 < train_fraction < 1:
            raise ConfigError(f"train_fraction: must be in (0, 1), got {train_fraction}")
        if not self.jobs:
            raise ConfigError(f"workload {self.name!r}: cannot split an empty workload")
        t0, t1 = self.jobs[0].submit_time_s, self.jobs[-1].submit_time_s
        cut = t0 + train_fraction * (t1 - t0)
        train = tuple(j for j in self.jobs if j.submit_time_s < cut)
        test = tuple(j for j in self.jobs if j.submit_time_s >= cut)
        return self._replace(train, ":train"), self._replace(test, ":test")

    def scale_load(self, factor: float) -> Workload:
        """Divide every inter-arrival time by ``factor`` (2 = twice the arrival rate), keeping the first submit."""
        if not LOAD_FACTORS[0] <= factor <= LOAD_FACTORS[1]:
            raise ConfigError(f"load factor: must be in [{LOAD_FACTORS[0]:g}, {LOAD_FACTORS[1]:g}], got {factor}")
        if not self.jobs:
            return self
        t0 = self.jobs[0].submit_time_s
        jobs = tuple(dataclasses.replace(j, submit_time_s=t0 + (j.submit_time_s - t0) / factor) for j in self.jobs)
        return self._replace(jobs, f"@load{factor:g}")

    def with_estimate_noise(self, rng: np.random.Generator, max_overestimate: float) -> Workload:
        """Replace each requested wall time by runtime × U(1, ``max_overestimate``), drawn from ``rng``.

        The estimate never falls below the runtime, as with wall-time limits users set to avoid being killed.
        """
        if not max_overestimate >= 1:
            raise ConfigError(f"max_overestimate: must be >= 1, got {max_overestimate}")
        factors = rng.uniform(1.0, max_overestimate, size=len(self.jobs))
        jobs = tuple(
            dataclasses.replace(j, runtime_estimate_s=max(j.runtime_s * float(f), 1.0))
            for j, f in zip(self.jobs, factors, strict=True)
        )
        return self._replace(jobs, f"~noise{max_overestimate:g}")

    def offered_load(self, capacity_gpus: int) -> float:
        """GPU-seconds demanded / (``capacity_gpus`` × submit span); 0 when the span is 0."""
        if not self.jobs or capacity_gpus <= 0:
            return 0.0
        span = self.jobs[-1].submit_time_s - self.jobs[0].submit_time_s
        demand = sum(j.gpu_share * j.runtime_s for j in self.jobs)
        return demand / (capacity_gpus * span) if span > 0 else 0.0
