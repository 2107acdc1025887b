"""GPU models: memory and relative throughput.

Speed factors are relative to the reference type ``A100-40GB`` (speed 1.0). The default figures are
illustrative (rough training-throughput ratios from public benchmarks), not measurements; override them per
cluster preset under ``gpu_types:``.
"""

from __future__ import annotations

from dataclasses import dataclass

from envs.core.errors import ConfigError


@dataclass(frozen=True, slots=True)
class GPUType:
    """One GPU model."""

    name: str
    memory_gib: float  # GPU memory [GiB]
    speed: float  # throughput relative to the reference type [dimensionless, > 0]

    def __post_init__(self) -> None:
        if not self.name:
            raise ConfigError("gpu_types: a GPU type needs a non-empty name")
        if not self.memory_gib > 0:
            raise ConfigError(f"gpu_types.{self.name}.memory_gib: must be > 0, got {self.memory_gib}")
        if not self.speed > 0:
            raise ConfigError(f"gpu_types.{self.name}.speed: must be > 0, got {self.speed}")


DEFAULT_GPU_TYPES: dict[str, GPUType] = {
    t.name: t
    for t in (
        GPUType("P100", 16.0, 0.3),
        GPUType("T4", 16.0, 0.25),
        GPUType("V100", 16.0, 0.5),
        GPUType("V100M16", 16.0, 0.5),
        GPUType("V100M32", 32.0, 0.5),
        GPUType("A10", 24.0, 0.45),
        GPUType("A100-40GB", 40.0, 1.0),
        GPUType("A100-80GB", 80.0, 1.05),
        GPUType("H100", 80.0, 2.0),
        # Alibaba openb's undisclosed models G1-G3: placeholders between T4 and A100.
        GPUType("G1", 24.0, 0.5),
        GPUType("G2", 24.0, 0.6),
        GPUType("G3", 32.0, 0.7),
        # The processor of an SWF machine: one "GPU-equivalent" per processor.
        GPUType("proc", 1.0, 1.0),
    )
}
"""The built-in GPU type table, by name."""
