"""The batched engine: N GPU clusters as tensors on one device (CPU or CUDA), stepping in lockstep with the
actions, masks, observations and rewards of :class:`~envs.gymenv.env.GPUClusterEnv`, exact inside the supported
subset (:data:`SUPPORTED`)."""

from envs.vec.env import VecClusterEnv
from envs.vec.pool import SUPPORTED

__all__ = ["SUPPORTED", "VecClusterEnv"]
