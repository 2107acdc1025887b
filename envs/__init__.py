"""gpusched's simulated world, in layers that import only downwards:

- :mod:`envs.core`: the world's nouns (errors, GPU types, clusters and presets, jobs, allocations, caches, the
  runtime model, the job log, metrics);
- :mod:`envs.workload`: the job table, the synthetic generator, the trace loaders and the inspector;
- :mod:`envs.scenario`: spec strings (``swf:PATH``, preset names, ``auto``) into a cluster, a workload and a
  runtime model;
- :mod:`envs.sim`: the event engine (simulator, state, view, policy protocol, availability profile, ``simulate``);
- :mod:`envs.placement`: the placement rules and their registry;
- :mod:`envs.gymenv`: the Gymnasium env over the simulator; :mod:`envs.peer`: the RLScheduler-compatible engine
  and its env.

``import envs`` registers the ``gpusched/`` env ids with Gymnasium (string entry points: no env module is
imported until an env is made) and imports nothing else.
"""

from envs.registration import register_envs

register_envs()

__all__ = ["register_envs"]
