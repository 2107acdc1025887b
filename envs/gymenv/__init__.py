"""The Gymnasium env over the simulator: its config, where its episodes come from, its observation encoder and its
action layout (the action mask is defined once, in :mod:`envs.gymenv.actions`)."""

from envs.gymenv.config import EnvConfig
from envs.gymenv.env import GPUClusterEnv

__all__ = ["EnvConfig", "GPUClusterEnv"]
