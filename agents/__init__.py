"""Learned policies: the permutation-equivariant PPO network, and trained models as policies of the common protocol."""

from agents.adapter import ModelPolicy, load

__all__ = ["ModelPolicy", "load"]
