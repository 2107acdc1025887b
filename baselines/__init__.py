"""Heuristic scheduling policies. For now the minimal one: FIFO order, first-fit placement, no backfilling."""

from baselines.fifo import FifoFirstFit

__all__ = ["FifoFirstFit"]
