"""Heuristic scheduling policies: orders × backfilling × placement rules, named ``ORDER[+BACKFILL][/PLACEMENT]``.

``baselines.make("sjf+easy/topology")`` builds one; ``python -m baselines`` lists every part. ``rls:`` names are
the peer-compatible policies of the RL batch-scheduling literature (see :mod:`baselines.rls`).
"""

from baselines.backfill import Scheduler
from baselines.registry import catalogue, make, parse


def FifoFirstFit() -> Scheduler:
    """The minimal policy: FIFO order, first-fit placement, no backfilling (= ``make("fifo")``)."""
    return make("fifo")


__all__ = ["FifoFirstFit", "Scheduler", "catalogue", "make", "parse"]
