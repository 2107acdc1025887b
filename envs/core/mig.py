"""MIG (Multi-Instance GPU) geometry: the GPU-instance profiles of the MIG-capable GPU types and where NVIDIA lets
each one sit on the GPU.

An A100 or H100 has 8 memory slices and 7 compute slices. A GPU instance of a profile ``Ng.Mgb`` takes N compute
slices and a run of memory slices (its *size*) that must start at one of the profile's *positions*. The table is
NVIDIA's, as ``nvidia-smi mig -lgipp`` lists it (NVIDIA Multi-Instance GPU User Guide, "Getting Started with MIG" /
"Supported MIG Profiles"; profile IDs 19, 15, 14, 9, 5, 0)::

    A100-40GB   A100-80GB, H100 (80 GB)   positions           size [memory slices]
    1g.5gb      1g.10gb                   {0,1,2,3,4,5,6}     1
    1g.10gb     1g.20gb                   {0,2,4,6}           2
    2g.10gb     2g.20gb                   {0,2,4}             2
    3g.20gb     3g.40gb                   {0,4}               4
    4g.20gb     4g.40gb                   {0}                 4
    7g.40gb     7g.80gb                   {0}                 8

The media-extension profiles (``+me``) and the H100-94GB / H200 / B200 tables are not modelled. A GPU's MIG
occupancy is an 8-bit mask (bit s set: memory slice s is held); a profile fits at a position when the slices it
would take are all free. Which GPU types are MIG-capable is decided by their name (:data:`MIG_GEOMETRIES`).

A MIG job's GPU share (what utilization and quotas count) is its compute slices over 7, rounded down to milli-GPU:
:func:`share_milli` (142, 285, 428, 571 and 1000 milli-GPU for 1, 2, 3, 4 and 7 slices). Any set of instances that
fits on one GPU holds at most 7 compute slices, so the shares on one GPU never add up to more than 1000.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

import numpy as np

MEMORY_SLICES = 8
"""Memory slices of a MIG-capable GPU: the bits of an occupancy mask."""
COMPUTE_SLICES = 7
"""Compute slices of a MIG-capable GPU; memory slices 0..6 each carry one, slice 7 none."""
ALL_SLICES = (1 << MEMORY_SLICES) - 1
"""The occupancy mask of a GPU whose every memory slice is held."""
K8S_PREFIX = "nvidia.com/mig-"
"""Prefix of the Kubernetes extended-resource name of a MIG profile (``nvidia.com/mig-3g.20gb``)."""

_NAME = re.compile(r"^([1-7])g\.(\d+)gb$")


@dataclass(frozen=True, slots=True)
class MigProfile:
    """One GPU-instance profile of one GPU type."""

    name: str  # canonical short name, e.g. "3g.20gb"
    compute_slices: int  # of the GPU's 7
    size: int  # memory slices it takes, of the GPU's 8
    positions: tuple[int, ...]  # memory slices where it may start, ascending

    @property
    def masks(self) -> tuple[int, ...]:
        """The occupancy mask of the instance at each of its positions."""
        return tuple(((1 << self.size) - 1) << p for p in self.positions)


@dataclass(frozen=True)
class MigGeometry:
    """The MIG profiles of one GPU type, with lookup tables over all 256 occupancy masks."""

    name: str
    profiles: tuple[MigProfile, ...]

    def profile(self, name: str) -> MigProfile | None:
        """The profile called ``name`` (canonical form), or None when this type does not offer it."""
        return next((p for p in self.profiles if p.name == name), None)

    def lowest_position_table(self, name: str) -> np.ndarray:
        """Per occupancy mask (256 entries): the lowest free valid position of profile ``name``, -1 if none."""
        out = np.full(ALL_SLICES + 1, -1, dtype=np.int64)
        profile = self.profile(name)
        if profile is not None:
            for mask in range(ALL_SLICES + 1):
                out[mask] = lowest_position(profile, mask)
        return out

    def mask_table(self, name: str) -> np.ndarray:
        """Per occupancy mask: the occupancy mask of an instance of profile ``name`` at its lowest free valid position
        (where the simulator puts it), 0 if none is free."""
        out = np.zeros(ALL_SLICES + 1, dtype=np.int64)
        profile = self.profile(name)
        if profile is not None:
            for mask in range(ALL_SLICES + 1):
                position = lowest_position(profile, mask)
                out[mask] = slice_mask(profile, position) if position >= 0 else 0
        return out

    def stranded_compute_table(self, name: str) -> np.ndarray:
        """Per occupancy mask: the free compute-bearing slices (0..6) that no free valid position of profile
        ``name`` covers (all free ones when this type does not offer it)."""
        out = np.zeros(ALL_SLICES + 1, dtype=np.int64)
        profile = self.profile(name)
        compute = (1 << COMPUTE_SLICES) - 1
        for mask in range(ALL_SLICES + 1):
            usable = 0
            if profile is not None:
                for m in profile.masks:
                    if not m & mask:
                        usable |= m
            out[mask] = bin(~mask & ~usable & compute).count("1")
        return out

    @cached_property
    def placements_table(self) -> np.ndarray:
        """Per occupancy mask: how many (profile, position) instances could still be created, over all profiles:
        the fragmentation-aware rule's measure of usable geometry."""
        return np.array([sum(not m & mask for p in self.profiles for m in p.masks)
                         for mask in range(ALL_SLICES + 1)], dtype=np.int64)


def lowest_position(profile: MigProfile, mask: int) -> int:
    """The lowest valid position of ``profile`` whose slices are free in occupancy ``mask``; -1 when none is."""
    return next((p for p, m in zip(profile.positions, profile.masks, strict=True) if not m & mask), -1)


def valid_positions(profile: MigProfile, mask: int) -> tuple[int, ...]:
    """Every valid position of ``profile`` whose slices are free in occupancy ``mask``."""
    return tuple(p for p, m in zip(profile.positions, profile.masks, strict=True) if not m & mask)


def slice_mask(profile: MigProfile, position: int) -> int:
    """The occupancy mask of an instance of ``profile`` at ``position``."""
    return ((1 << profile.size) - 1) << position


def normalize_profile(name: str) -> str:
    """The canonical short name of a MIG profile: ``3g.20gb`` from ``3g.20gb``, ``nvidia.com/mig-3g.20gb`` (the
    Kubernetes resource), ``mig-3g.20gb`` or ``MIG 3g.20gb`` (nvidia-smi); raises ValueError for anything else."""
    text = name.strip().lower()
    for prefix in (K8S_PREFIX, "mig-", "mig "):
        if text.startswith(prefix):
            text = text[len(prefix):].strip()
            break
    if not _NAME.match(text):
        raise ValueError(f"{name!r} is not a MIG profile name (like '3g.20gb' or 'nvidia.com/mig-3g.20gb')")
    return text


def compute_slices_of(name: str) -> int:
    """Compute slices of the canonical profile ``name`` (the N of ``Ng.Mgb``)."""
    return int(name.split("g.", 1)[0])


def share_milli(compute_slices: int) -> int:
    """GPU share of ``compute_slices`` compute slices [milli-GPU]: 1000 × slices / 7, rounded down."""
    return 1000 * compute_slices // COMPUTE_SLICES


def _geometry(name: str, gb: tuple[int, int, int, int, int, int]) -> MigGeometry:
    """The A100/H100 layout with the memory figures of ``name``'s profile names (1g, 1g double, 2g, 3g, 4g, 7g)."""
    layout = ((1, 1, tuple(range(7))), (1, 2, (0, 2, 4, 6)), (2, 2, (0, 2, 4)), (3, 4, (0, 4)), (4, 4, (0,)),
              (7, 8, (0,)))
    return MigGeometry(name, tuple(MigProfile(f"{g}g.{m}gb", g, size, positions)
                                   for (g, size, positions), m in zip(layout, gb, strict=True)))


MIG_GEOMETRIES: dict[str, MigGeometry] = {
    "A100-40GB": _geometry("A100-40GB", (5, 10, 10, 20, 20, 40)),
    "A100-80GB": _geometry("A100-80GB", (10, 20, 20, 40, 40, 80)),
    "H100": _geometry("H100", (10, 20, 20, 40, 40, 80)),
}
"""The MIG geometry of each MIG-capable GPU type, by the type's name in the GPU-type table."""

FREE_SLICES = np.array([MEMORY_SLICES - bin(mask).count("1") for mask in range(ALL_SLICES + 1)], dtype=np.int64)
"""Free memory slices of each occupancy mask (index by the mask)."""

DEFAULT_MIG_RECONFIG_S = 30.0
"""Default cost of switching a GPU between MIG mode and full mode [s]: NVIDIA documents that enabling or disabling
MIG mode needs a GPU reset (and the instances must then be created); the figure is illustrative, not measured."""
