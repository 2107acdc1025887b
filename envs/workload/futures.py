"""Resampled futures: what a planner may assume about the jobs it does not know yet, learnt from training streams.

A :class:`FutureModel` holds job streams of the same workload that the evaluation never tests on (a synthetic
workload's training seeds, or a trace's training windows) and draws from them:

- **arrivals** (:meth:`FutureModel.arrivals`): a splice of the training streams, re-timed to start now. It picks a
  stream and a job in it at random, keeps that job's gap to its predecessor as the time to the first arrival, and
  the stream's own inter-arrival times after it; at a stream's end it goes on from a random point of another. A
  Poisson arrival process is memoryless, so for the synthetic generator this is a draw anew from the generator;
  for a trace it keeps the trace's burstiness.
- **runtimes** (:meth:`FutureModel.runtime_s`): a known job's base runtime, as its request (the wall-time
  estimate) times a ratio runtime/request drawn from the training jobs, among the ratios that agree with what is
  known (a running job has run at least its elapsed time).

Every draw comes from the generator passed in. Nothing here reads the evaluated run's own future.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from envs.core.errors import ConfigError
from envs.core.job import Job
from envs.workload.table import Workload


class FutureModel:
    """Draws futures from training job streams (module docstring)."""

    def __init__(self, streams: Sequence[Workload]) -> None:
        self.streams: tuple[tuple[Job, ...], ...] = tuple(
            tuple(sorted(w.jobs, key=lambda j: (j.submit_time_s, j.job_id))) for w in streams if len(w.jobs) >= 2)
        if not self.streams:
            raise ConfigError("future model: needs at least one training stream of two jobs or more")
        self._submits = [np.array([j.submit_time_s for j in s]) for s in self.streams]
        ratios = [j.runtime_s / j.runtime_estimate_s for s in self.streams for j in s if j.runtime_estimate_s > 0]
        self._ratios = np.sort(np.array(ratios if ratios else [1.0]))  # runtime / request of the training jobs

    def arrivals(self, now_s: float, count: int, until_s: float, first_id: int,
                 rng: np.random.Generator) -> tuple[Job, ...]:
        """At most ``count`` jobs arriving after ``now_s`` [s] and no later than ``until_s`` [s] (``inf`` for no
        limit), numbered from ``first_id``: a splice of the training streams (module docstring)."""
        jobs: list[Job] = []
        t = now_s
        while len(jobs) < count:  # every pass adds at least one job, or returns
            s = int(rng.integers(len(self.streams)))
            stream, submits = self.streams[s], self._submits[s]
            i = int(rng.integers(1, len(stream)))
            offset = t + (submits[i] - submits[i - 1]) - submits[i]  # new submit = old submit + offset
            take = min(count - len(jobs), len(stream) - i)
            for k in range(i, i + take):
                submit = float(submits[k] + offset)
                if submit > until_s:
                    return tuple(jobs)
                jobs.append(dataclasses.replace(stream[k], job_id=first_id + len(jobs), submit_time_s=submit))
            t = jobs[-1].submit_time_s
        return tuple(jobs)

    def runtime_s(self, job: Job, at_least_s: float, rng: np.random.Generator) -> float:
        """A base runtime [s] for ``job`` given only its request and that it runs at least ``at_least_s`` [s]:
        request × a training ratio runtime/request drawn among those that give at least ``at_least_s``;
        ``at_least_s`` itself when none does."""
        request = job.runtime_estimate_s
        if request <= 0:
            return max(at_least_s, 0.0)
        first = int(np.searchsorted(self._ratios, at_least_s / request, side="left"))
        if first >= self._ratios.size:
            return at_least_s
        return max(float(request * self._ratios[int(rng.integers(first, self._ratios.size))]), at_least_s)
