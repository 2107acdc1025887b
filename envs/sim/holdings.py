"""The free resources of one run and the books kept on them: the one writer of a :class:`~envs.sim.state.SimState`'s
free shares, GPU memory, MIG slices and modes, CPU and RAM, and of the counters the simulator integrates over time.

Whole GPUs are held exclusively; a fractional job holds a share of one GPU and its memory (``Job.gpu_mem_mib``); a MIG
job holds one instance of its profile at the lowest free valid position on its GPU (:mod:`envs.core.mig`), whose
memory is its slices' share of the GPU's. A GPU switches between MIG and full mode only when it is empty, and the
job that switches it pays ``cluster.mig_reconfig_s``.
"""

from __future__ import annotations

import numpy as np

from envs.core.cluster import MILLI_PER_GPU, ClusterSpec
from envs.core.job import Job, RefusalReason
from envs.core.mig import MEMORY_SLICES, MIG_GEOMETRIES, share_milli
from envs.sim.state import SimState

GPUs = np.ndarray | slice
"""Ascending global GPU indices of an allocation: an index array, or a slice for a contiguous range."""


class Holdings:
    """Who holds what of one run's GPUs, CPUs and RAM (module docstring), and the derived counters: allocated and
    failed capacity, and the free share of partly used GPUs [milli-GPU]."""

    def __init__(self, cluster: ClusterSpec, state: SimState) -> None:
        self.cluster, self.state = cluster, state
        self.mig = cluster.has_mig
        self.alloc_milli = 0  # Σ allocated milli-GPU
        self.partial_free_milli = 0  # Σ free milli-GPU on GPUs that are partly in use
        self.down_milli = 0  # Σ capacity of failed GPUs [milli-GPU]

    def refusal(self, job: Job, alloc: GPUs, lo: int, nodes: list[int], counts: list[int]
                ) -> tuple[RefusalReason, str] | None:
        """(reason, detail) when the resources of ascending ``alloc`` (lowest GPU ``lo``; ``nodes`` and their GPU
        ``counts``) cannot take ``job`` now: free share, mode, memory, MIG geometry, CPU and RAM; None when they
        can. Health, types and partitions are the simulator's checks."""
        c, s = self.cluster, self.state
        if job.mig_profile:
            detail = self._mig_refusal(job, lo)
            if detail is not None:
                return RefusalReason.MIG_GEOMETRY, detail
        else:
            if not (s.gpu_whole_free[alloc].all() if job.gpu_milli == MILLI_PER_GPU
                    else s.gpu_free_milli[lo] >= job.gpu_milli):
                return RefusalReason.GPU_BUSY, f"a GPU has less than {job.gpu_milli} milli-GPU free"
            if job.gpu_milli < MILLI_PER_GPU:
                if self.mig and s.gpu_mig_used[lo]:
                    return RefusalReason.GPU_MODE, f"GPU {lo} holds MIG slices"
                need = job.gpu_mem_mib
                if need and s.gpu_free_mem_mib[lo] < need:
                    return (RefusalReason.GPU_MEMORY,
                            f"GPU {lo} has {int(s.gpu_free_mem_mib[lo])} MiB free, the job needs {need}")
        cpu, ram = job.cpu_milli_per_gpu, job.ram_mib_per_gpu
        if cpu or ram:
            for n, k in zip(nodes, counts, strict=True):
                if (c.cpu_modelled[n] and s.node_free_cpu[n] < k * cpu) or (
                        c.ram_modelled[n] and s.node_free_ram[n] < k * ram):
                    return RefusalReason.CPU_RAM, f"node {n} has too little free CPU or RAM"
        return None

    def _mig_refusal(self, job: Job, g: int) -> str | None:
        """Why MIG job ``job`` cannot take an instance on GPU ``g`` now, or None."""
        c, s, profile = self.cluster, self.state, job.mig_profile
        geometry = int(c.gpu_mig_geometry[g])
        if geometry == len(c.mig_types) or MIG_GEOMETRIES[c.mig_types[geometry]].profile(profile) is None:
            return f"GPU {g} ({c.nodes[int(c.gpu_node[g])].gpu_type}) does not offer MIG profile {profile}"
        used = int(s.gpu_mig_used[g])
        if not used and not s.gpu_whole_free[g]:
            return f"GPU {g} is in full mode and not empty"
        if c.mig_table("lowest", profile)[geometry, used] < 0:
            return f"no valid position of {profile} is free on GPU {g} (slices held: {used:08b}, slice 0 rightmost)"
        return None

    def switch_modes(self, job: Job, alloc: GPUs) -> float:
        """Put the (empty) GPUs of ``alloc`` in the mode ``job`` needs; the reconfiguration time it pays [s]."""
        if not self.mig:
            return 0.0
        modes = self.state.gpu_mig_mode
        want = job.is_mig
        if (modes[alloc] == want).all():
            return 0.0
        modes[alloc] = want
        return self.cluster.mig_reconfig_s

    def change(self, job: Job, alloc: GPUs, nodes: list[int], counts: list[int], sign: int) -> None:
        """Take (sign -1) or give back (sign +1) the job's share of ``alloc`` (milli-GPU, memory, MIG slices) and of
        its nodes' CPU and RAM."""
        c, s = self.cluster, self.state
        milli = job.gpu_milli
        size = job.n_gpus
        self.alloc_milli -= sign * milli * size
        s.version += 1
        mem_mib = job.gpu_mem_mib
        if job.mig_profile:  # one GPU; the instance goes to the lowest free valid position of its profile
            g = int(alloc[0])
            if sign < 0:
                mask = int(c.mig_table("mask", job.mig_profile)[c.gpu_mig_geometry[g], s.gpu_mig_used[g]])
                s.mig_slices[job.job_id] = (g, mask)
                s.gpu_mig_used[g] |= mask
            else:
                mask = s.mig_slices.pop(job.job_id)[1]
                s.gpu_mig_used[g] &= ~mask & 0xFF
            mem_mib = int(c.gpu_memory_mib[g]) * mask.bit_count() // MEMORY_SLICES
        if milli == MILLI_PER_GPU:  # whole GPUs are held exclusively: they go from all free to none and back
            s.gpu_free_milli[alloc] = 0 if sign < 0 else MILLI_PER_GPU
            s.gpu_whole_free[alloc] = sign > 0
            s.gpu_free_mem_mib[alloc] = 0 if sign < 0 else c.gpu_memory_mib[alloc]
            s.free_gpus += sign * size
            if len(nodes) == 1:
                s.node_free_gpus[nodes[0]] += sign * size
            else:
                s.node_free_gpus[nodes] += sign * np.array(counts)
        else:
            g = int(alloc[0])  # a fractional job holds one GPU, given as an index array
            before = int(s.gpu_free_milli[g])
            after = before + sign * milli
            s.gpu_free_milli[g] = after
            if mem_mib:
                s.gpu_free_mem_mib[g] += sign * mem_mib
            self.partial_free_milli += _partial(after) - _partial(before)
            if before == MILLI_PER_GPU or after == MILLI_PER_GPU:
                s.gpu_whole_free[g] = after == MILLI_PER_GPU
                s.node_free_gpus[nodes[0]] += sign
                s.free_gpus += sign
        cpu, ram = job.cpu_milli_per_gpu, job.ram_mib_per_gpu
        if cpu or ram:
            for n, k in zip(nodes, counts, strict=True):
                if c.cpu_modelled[n]:
                    s.node_free_cpu[n] += sign * cpu * k
                if c.ram_modelled[n]:
                    s.node_free_ram[n] += sign * ram * k

    def set_capacity(self, gpus: np.ndarray, up: bool) -> None:
        """Take entirely free ``gpus`` out of the pool (``up`` False) or put them back (True)."""
        if gpus.size == 0:
            return
        s, sign = self.state, 1 if up else -1
        s.gpu_up[gpus] = up
        s.gpu_free_milli[gpus] = MILLI_PER_GPU if up else 0
        s.gpu_whole_free[gpus] = up
        s.gpu_free_mem_mib[gpus] = self.cluster.gpu_memory_mib[gpus] if up else 0
        np.add.at(s.node_free_gpus, self.cluster.gpu_node[gpus], sign)
        s.free_gpus += sign * gpus.size
        s.down_gpus -= sign * gpus.size
        self.down_milli -= sign * MILLI_PER_GPU * gpus.size
        s.version += 1

    def fragmented_milli(self, smallest: tuple[int, int, str]) -> float:
        """Idle milli-GPU that cannot host the smallest pending request ``smallest`` = (GPUs, share, MIG profile).

        For a fractional request of m milli-GPU: the free share of every GPU with less than m free. For n whole
        GPUs: every partly used GPU's free share, plus the free GPUs of each node holding fewer than min(n, node
        size) free GPUs (a node smaller than the job can join a gang only when it is entirely free). Types, CPU and
        health are not considered: this is the cluster-shape measure of SPEC §7.

        MIG (requests ordered by (GPUs, share, profile name)): a GPU holding MIG slices can host only MIG jobs, and a
        partly used GPU in full mode only ordinary ones. For a smallest request of profile P: the free share of every
        partly used full-mode GPU, plus on every GPU holding slices its free compute slices that no free valid
        position of P covers (``share_milli(k)`` for k slices; all of them where its type lacks P). For an ordinary
        request, a GPU holding slices counts with all its free share.
        """
        n, milli, profile = smallest
        if self.mig and (profile or self.state.mig_slices):
            return self._fragmented_mig(n, milli, profile)
        if milli < MILLI_PER_GPU:
            free = self.state.gpu_free_milli
            return float(free[(free > 0) & (free < milli)].sum())
        free_gpus = self.state.node_free_gpus
        stranded = free_gpus < np.minimum(n, self.cluster.node_n_gpus)
        return self.partial_free_milli + MILLI_PER_GPU * float(free_gpus[stranded].sum())

    def _fragmented_mig(self, n: int, milli: int, profile: str) -> float:
        c, s = self.cluster, self.state
        free, used = s.gpu_free_milli, s.gpu_mig_used
        sliced = used != 0
        if profile:
            total = int(free[(free > 0) & (free < MILLI_PER_GPU) & ~sliced].sum())
            gpus = sliced.nonzero()[0]
            if gpus.size:
                stranded = c.mig_table("stranded", profile)[c.gpu_mig_geometry[gpus], used[gpus]]
                total += int(share_milli(stranded).sum())
            return float(total)
        if milli < MILLI_PER_GPU:
            return float(free[(free > 0) & (free < milli) & ~sliced].sum() + free[sliced].sum())
        free_gpus = s.node_free_gpus
        stranded_nodes = free_gpus < np.minimum(n, c.node_n_gpus)
        return self.partial_free_milli + MILLI_PER_GPU * float(free_gpus[stranded_nodes].sum())


def _partial(free_milli: int) -> int:
    """The free share that counts as a fragment: free milli-GPU of a GPU that is partly in use."""
    return free_milli if 0 < free_milli < MILLI_PER_GPU else 0
