"""A cluster as the fixed tensors the batched engine reads: nodes, their GPUs as bits, NVLink islands, racks and the
observation's node groups.

The engine keeps each node's free GPUs as one integer whose bit ``s`` is set when the node's GPU ``s`` is free, so
that every per-node question of the placement rules is a table lookup on a (clusters, nodes) tensor: how many GPUs
are free (:attr:`ClusterLayout.popcount`), which are the lowest ``n`` free ones (:attr:`ClusterLayout.lowest`), and
whether those lie in one NVLink island (:attr:`ClusterLayout.one_island`). Tables cover nodes of up to
:data:`MAX_NODE_GPUS` GPUs.
"""

from __future__ import annotations

import numpy as np
import torch

from envs.core.cluster import ClusterSpec
from envs.core.errors import ConfigError

MAX_NODE_GPUS = 16
"""The most GPUs a node may have in the batched engine (its bit tables have 2**16 rows)."""


def _lowest_bits(patterns: np.ndarray, width: int) -> np.ndarray:
    """``out[p, n]``: the lowest ``n`` set bits of pattern ``p`` (all of them when it has fewer), n = 0..width."""
    out = np.zeros((patterns.size, width + 1), dtype=np.int64)
    rest = patterns.copy()
    taken = np.zeros_like(rest)
    for n in range(1, width + 1):
        low = rest & -rest
        taken |= low
        rest ^= low
        out[:, n] = taken
    return out


def lookup(table: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``table[index]`` for a table indexed on its first dimension and an index of any shape (an index_select on
    the flattened index: many times faster on CPU than advanced indexing with a multi-dimensional index)."""
    return table.index_select(0, index.reshape(-1)).view(*index.shape, *table.shape[1:])


class ClusterLayout:
    """The static tensors of one cluster on one device (see the module docstring)."""

    def __init__(self, cluster: ClusterSpec, device: torch.device) -> None:
        if not cluster.islands_contiguous:
            raise ConfigError(f"cluster {cluster.name!r}: the batched engine needs NVLink islands of consecutive "
                              "GPU indices")
        sizes = cluster.node_n_gpus
        width = int(sizes.max())
        if width > MAX_NODE_GPUS:
            raise ConfigError(f"cluster {cluster.name!r}: a node has {width} GPUs; the batched engine supports at "
                              f"most {MAX_NODE_GPUS} per node")
        self.cluster, self.device = cluster, device
        self.n_nodes, self.width, self.n_gpus = cluster.n_nodes, width, cluster.n_gpus
        patterns = np.arange(1 << width, dtype=np.int64)
        lowest = _lowest_bits(patterns, width)
        popcount = np.array([bin(p).count("1") for p in range(1 << width)], dtype=np.int64)
        # islands: per node, its islands as bit masks of local GPU indices (cluster-wide ids in node order)
        first = cluster.node_first_gpu
        island_of_gpu = cluster.gpu_island
        island_node, island_mask = [], []
        for node in range(cluster.n_nodes):
            local = island_of_gpu[first[node]:first[node + 1]]
            for island in np.unique(local):
                island_node.append(node)
                island_mask.append(int(sum(1 << int(s) for s in np.flatnonzero(local == island))))
        # one_island[shape, pattern, n]: the lowest n free GPUs of a node of that island shape lie in one island
        node_local_island = [tuple(island_of_gpu[first[n]:first[n + 1]] - island_of_gpu[first[n]])
                             for n in range(cluster.n_nodes)]
        shapes = list(dict.fromkeys(node_local_island))
        one_island = np.zeros((len(shapes), 1 << width, width + 1), dtype=bool)
        for i, shape in enumerate(shapes):
            local_island = np.array(shape + (-1,) * (width - len(shape)))
            for n in range(1, width + 1):
                taken = lowest[:, n]
                lo = _bit_index(taken & -taken)
                hi = _bit_index(_highest_bit(taken))
                one_island[i, :, n] = (taken != 0) & (local_island[lo] == local_island[hi])
        node_shape = np.array([shapes.index(s) for s in node_local_island], dtype=np.int64)
        racks, node_rack = np.unique(cluster.node_rack, return_inverse=True)
        t = lambda a, dtype=None: torch.as_tensor(np.array(a), dtype=dtype, device=device)  # noqa: E731
        self.popcount = t(popcount)  # (2**width,) free GPUs of a pattern
        self.lowest = t(lowest.reshape(-1))  # (2**width · (width + 1),) the lowest n set bits of a pattern, flat
        self.one_island = t(one_island.reshape(-1))  # (shapes · 2**width · (width + 1),) flat
        self.node_shape = t(node_shape)  # (nodes,) island shape of each node
        self.node_size = t(sizes)  # (nodes,) GPUs per node
        self.full = t((1 << sizes.astype(np.int64)) - 1)  # (nodes,) the pattern of an entirely free node
        self.node_speed = t(cluster.node_speed, torch.float64)  # (nodes,) speed factor of each node's type
        self.node_type = t(cluster.node_type_index)  # (nodes,) index of each node's GPU type
        self.type_speed = t(cluster.type_speed, torch.float64)  # (types,) speed factor of each type
        self.n_types = len(cluster.type_names)
        self.node_rack = t(node_rack.reshape(-1))  # (nodes,) rack index among the sorted distinct racks
        self.n_racks = int(racks.size)
        self.island_node = t(island_node)  # (islands,) node of each island
        self.island_mask = t(island_mask)  # (islands,) the island's GPUs as bits of its node's pattern
        self.n_islands = len(island_node)
        self.largest_island = int(max(bin(m).count("1") for m in island_mask))
        self.split_nodes = self.n_islands > cluster.n_nodes  # some node has more than one island
        self.bit = t(1 << np.arange(width, dtype=np.int64))  # (width,) the bit of each local GPU index
        self.gpu_valid = t(np.arange(width)[None, :] < sizes[:, None])  # (nodes, width) real GPUs (not padding)
        self.node_first_gpu = cluster.node_first_gpu
        self.node_index = t(np.arange(cluster.n_nodes))

    def lookup_one_island(self, patterns: torch.Tensor, nodes: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
        """Whether the lowest ``n`` free GPUs of ``nodes`` (whose free bits are ``patterns``) lie in one island."""
        per_shape = (1 << self.width) * (self.width + 1)
        return lookup(self.one_island, lookup(self.node_shape, nodes) * per_shape + patterns * (self.width + 1) + n)

    def lowest_bits(self, patterns: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
        """The lowest ``n`` set bits of each of ``patterns`` (all of them when fewer)."""
        return lookup(self.lowest, patterns * (self.width + 1) + n)

    def gpu_ids(self, patterns: np.ndarray) -> np.ndarray:
        """The global GPU indices of per-node bit ``patterns`` (shape (nodes,)), ascending."""
        ids = [self.node_first_gpu[node] + s for node in np.flatnonzero(patterns)
               for s in range(self.width) if patterns[node] >> s & 1]
        return np.array(ids, dtype=np.int64)


def _bit_index(single_bits: np.ndarray) -> np.ndarray:
    """The index of the one set bit of each value (0 for 0)."""
    return np.where(single_bits > 0, np.log2(np.maximum(single_bits, 1)).round().astype(np.int64), 0)


def _highest_bit(values: np.ndarray) -> np.ndarray:
    """The highest set bit of each value, as a value (0 for 0)."""
    out = values.copy()
    for shift in (1, 2, 4, 8, 16):
        out |= out >> shift
    return out - (out >> 1)
