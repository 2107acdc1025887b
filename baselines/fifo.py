"""The minimal policy: FIFO order, first-fit placement, no backfilling.

The oldest pending job (queue order: submit time, then job id) starts as soon as first-fit finds room for it;
while it does not fit, nothing else starts (head-of-line blocking).
"""

from __future__ import annotations

from envs.placement import first_fit
from envs.policy import WAIT, Action, Start
from envs.view import View


class FifoFirstFit:
    """FIFO + first-fit + no backfilling."""

    name = "fifo"

    def reset(self) -> None:
        """Stateless: nothing to forget."""

    def act(self, view: View) -> Action:
        """Start the head of the queue if it fits now, else wait."""
        if not view.scheduler_up:
            return WAIT
        for job in view.pending.values():
            gpus = first_fit(view, job)
            return WAIT if gpus is None else Start(job.job_id, gpus)
        return WAIT
