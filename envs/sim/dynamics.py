"""The failure and outage events of one run (:class:`~envs.core.dynamics.DynamicsConfig` made into events).

Events are ``(time [s], kind, node, gpu, renew)`` tuples: ``kind`` one of the constants below (at equal times
the simulator applies them in this order, after completions and before arrivals); ``node`` a node index for a node
event; ``gpu`` a global GPU index for a GPU event (-1 for a node event); ``renew`` True for an event of a random
process, which then draws its next event (:meth:`Timeline.follow`).

The random processes draw from one generator seeded with the config's seed, only when one of their own events is
applied, so the sequence of failures and outages depends on the seed alone, never on what the policy does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

import numpy as np

from envs.core.cluster import ClusterSpec
from envs.core.dynamics import MTBF, DynamicsConfig, scheduled_gpus

REPAIR, FAIL, OUTAGE_END, OUTAGE_START, TIMER = range(5)
"""Event kinds, in the order they are applied at one instant: repairs free resources before failures take them,
the scheduler comes back before it goes down again, timers (a policy's wake-up calls) last."""


class Event(NamedTuple):
    """One dynamics event (see the module docstring)."""

    time_s: float
    kind: int
    node: int = -1
    gpu: int = -1
    renew: bool = False


class Timeline:
    """Draws the failure, repair and outage events of one run; the simulator keeps them on its event heap."""

    def __init__(self, config: DynamicsConfig, cluster: ClusterSpec, start_s: float) -> None:
        self.config = config
        self.cluster = cluster
        self.start_s = start_s  # the run's start: scenario times count from here [s]
        self._rng = np.random.default_rng(config.seed)
        f = config.failures
        self._node_mtbf = _per_node(f.node_mtbf_s, cluster)  # [s] per node; inf: never fails
        self._gpu_mtbf = np.repeat(_per_node(f.gpu_mtbf_s, cluster), cluster.node_n_gpus)  # [s] per GPU

    def initial(self) -> list[Event]:
        """The first events: every scheduled failure and outage window, and each random process's first event."""
        c, t0, f, o = self.cluster, self.start_s, self.config.failures, self.config.outages
        events = []
        for s, gpu in zip(f.schedule, scheduled_gpus(self.config, c), strict=True):
            node = s.node if gpu < 0 else -1
            events.append(Event(t0 + s.fail_s, FAIL, node, gpu))
            events.append(Event(t0 + s.fail_s + s.repair_s, REPAIR, node, gpu))
        for start, duration in o.windows:
            events.append(Event(t0 + start, OUTAGE_START))
            events.append(Event(t0 + start + duration, OUTAGE_END))
        for node in np.flatnonzero(np.isfinite(self._node_mtbf)).tolist():
            events.append(Event(t0 + self._rng.exponential(self._node_mtbf[node]), FAIL, node, -1, True))
        for gpu in np.flatnonzero(np.isfinite(self._gpu_mtbf)).tolist():
            events.append(Event(t0 + self._rng.exponential(self._gpu_mtbf[gpu]), FAIL, -1, gpu, True))
        if np.isfinite(o.mtbf_s):
            events.append(Event(t0 + self._rng.exponential(o.mtbf_s), OUTAGE_START, renew=True))
        return events

    def follow(self, event: Event) -> Event | None:
        """The next event of ``event``'s random process (None for a scheduled event or a timer)."""
        if not event.renew:
            return None
        t, kind, f, o = event.time_s, event.kind, self.config.failures, self.config.outages
        if kind == FAIL:
            repair_s = f.mttr_s if f.repair == "fixed" else self._rng.exponential(f.mttr_s)
            return event._replace(time_s=t + repair_s, kind=REPAIR)
        if kind == REPAIR:
            mtbf = self._node_mtbf[event.node] if event.gpu < 0 else self._gpu_mtbf[event.gpu]
            return event._replace(time_s=t + self._rng.exponential(mtbf), kind=FAIL)
        if kind == OUTAGE_START:
            return event._replace(time_s=t + self._rng.exponential(o.mttr_s), kind=OUTAGE_END)
        return event._replace(time_s=t + self._rng.exponential(o.mtbf_s), kind=OUTAGE_START)


def _per_node(mtbf: MTBF, cluster: ClusterSpec) -> np.ndarray:
    """An MTBF per node [s] (inf: never fails) from one value or a mapping by the node's GPU type."""
    if isinstance(mtbf, Mapping):
        return np.array([mtbf.get(n.gpu_type, np.inf) for n in cluster.nodes], dtype=np.float64)
    return np.full(cluster.n_nodes, float(mtbf), dtype=np.float64)
