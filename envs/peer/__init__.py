"""Peer compatibility: the RLScheduler (SchedGym) world reproduced exactly, beside our own simulator.

:mod:`~envs.peer.swf` reads SWF traces by the peer's rules, :mod:`~envs.peer.engine` schedules sequences of them
by the peer's rules and protocol, :mod:`~envs.peer.env` is the Gymnasium env over the engine
(``gpusched/RLSched-v0``), and :mod:`~envs.peer.joblog` turns a schedule into a job log for the metrics.
Only :mod:`~envs.peer.env` imports Gymnasium.
"""
