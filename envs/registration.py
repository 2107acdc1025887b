"""Registered env ids under the ``gpusched/`` namespace (registered on ``import envs``).

Variants differ only in kwargs (EnvConfig fields); failures and outages (``scenario=``) apply to any of them. The
trace variants need the trace's path:
``gym.make("gpusched/SWF-v0", workload="swf:../shared/traces/lublin-synthetic/lublin_256.swf")``.
In a process that has not imported ``envs`` (e.g. a ``SubprocVecEnv`` worker), prefix the id with the module:
``gym.make("envs:gpusched/GPUCluster-v0")`` imports it and so registers the ids.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

ENTRY_POINT = "envs.gymenv.env:GPUClusterEnv"
PEER_ENTRY_POINT = "envs.peer.env:PeerSchedEnv"
MAX_EPISODE_STEPS = 20_000  # truncation; an M = 256 episode takes about M starts plus a few hundred waits

VARIANTS: dict[str, dict[str, Any]] = {
    # The default: synthetic workload on the 512-GPU hetero-64 cluster, placement by pack / spread / topology.
    "gpusched/GPUCluster-v0": {},
    # Two 4-GPU nodes, small jobs: for tests and quick learning checks.
    "gpusched/GPUCluster-Tiny-v0": {"cluster": "tiny", "workload": "small", "episode_jobs": 32, "slots": 4},
    # Priority only (P = 1): placement is always pack.
    "gpusched/GPUCluster-PriorityOnly-v0": {"placement_rules": ("pack",)},
    # The agent picks which job to reserve for next; EASY backfilling fills the holes (placement: pack).
    "gpusched/GPUCluster-BackfillAssisted-v0": {"backfill_assist": True, "placement_rules": ("pack",)},
    # R more actions: preempt one of the R most recently started running jobs (it requeues); a "running" key.
    "gpusched/GPUCluster-Preemptive-v0": {"preemption": True},
    # Trace replays (give workload="FORMAT:PATH") on the trace's own cluster (SWF's machine, openb's node list,
    # philly-like for Philly); SWF with the rigid runtime model and first-fit.
    "gpusched/SWF-v0": {"workload": "swf:", "cluster": "auto", "runtime_model": "rigid",
                        "placement_rules": ("firstfit",)},
    "gpusched/Philly-v0": {"workload": "philly:", "cluster": "auto"},
    "gpusched/Openb-v0": {"workload": "openb:", "cluster": "auto"},
}
"""Every registered id and the EnvConfig overrides that define it."""


PEER_ENV_ID = "gpusched/RLSched-v0"
"""RL batch scheduling in the peer compatibility mode (:class:`envs.peer.env.PeerSchedEnv`; give trace=PATH)."""

ENV_IDS = (*VARIANTS, PEER_ENV_ID)
"""Every id :func:`register_envs` registers."""


def register_envs() -> None:
    """Register every variant, and the peer-mode env, with Gymnasium (idempotent)."""
    if PEER_ENV_ID not in gym.registry:
        gym.register(id=PEER_ENV_ID, entry_point=PEER_ENTRY_POINT)
    for env_id, kwargs in VARIANTS.items():
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point=ENTRY_POINT, kwargs={"variant": dict(kwargs)},
                         max_episode_steps=MAX_EPISODE_STEPS)
