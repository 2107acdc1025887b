"""Learned policies: the permutation-equivariant PPO network, trained models as policies of the common protocol,
and the heuristic-selection env with its training recipes. ``import agents`` registers
``gpusched/HeuristicSelect-v0`` (:mod:`agents.selection_env`)."""

from agents.adapter import ModelPolicy, load
from agents.selection_env import register_selection_env

register_selection_env()

__all__ = ["ModelPolicy", "load", "register_selection_env"]
