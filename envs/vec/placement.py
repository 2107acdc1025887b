"""The placement rules pack, spread and topology (envs.placement.basic) on N clusters at once, per placement class.

Every rule of :mod:`envs.placement.basic` reduces, for a whole-GPU job without binding CPU, to questions about
each node's usable free GPUs U (free GPUs of eligible nodes): the node with the smallest U >= n (lowest index on
ties), the node with the largest U, the island with the smallest free count >= n, and the gang rule (nodes by
descending U, lowest index on ties, all their GPUs until n is reached), inside the rack with the smallest usable
sum >= n or across racks. U takes at most ``width + 1`` values, so "the lowest node holding each value" is one
scatter over nodes, and the answer for every GPU count follows by a suffix minimum over values: no tensor here is
larger than (clusters, eligible sets, GPU counts, nodes). GPUs inside a node are its lowest free ones, as in the
event simulator; :meth:`VecPlacement.take` turns a chosen (class, rule) into the bits each node gives.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from envs.core.joblog import TopologyLevel
from envs.vec.layout import ClusterLayout
from envs.vec.pool import WorkloadPool

ONE_ISLAND, ONE_NODE, ONE_RACK, RACKS = (int(level) for level in TopologyLevel)
"""The topology levels as plain integers (tensor values)."""
SINGLE, ISLAND, GANG = 0, 1, 2
"""Plan modes: one node (``where`` is the node), one island (``where`` is the island), a gang (``where`` is the
rack it stays in, or -1 across racks)."""


class Plan(NamedTuple):
    """What each rule gives each placement class now, per cluster: shapes (N, C) and (N, C, P)."""

    can_start: torch.Tensor  # (N, C) bool: the class fits now (every rule is complete, so by any rule)
    mode: torch.Tensor  # (N, C, P) int64: SINGLE, ISLAND or GANG
    where: torch.Tensor  # (N, C, P) int64: node, island or rack (-1: across racks), by mode
    n_nodes: torch.Tensor  # (N, C, P) float64: nodes of the allocation
    speed: torch.Tensor  # (N, C, P) float64: speed factor of the slowest node
    level: torch.Tensor  # (N, C, P) int64: TopologyLevel of the allocation
    left: torch.Tensor  # (N, C, P) float64: whole GPUs left free on the chosen nodes / their GPUs
    order: torch.Tensor  # (N, E, nodes) nodes by descending U (ties: lowest index), per eligible set
    usable: torch.Tensor  # (N, E, nodes) U per eligible set


class VecPlacement:
    """The rules ``rules`` (names among pack, spread, topology) for one cluster layout and workload pool."""

    def __init__(self, layout: ClusterLayout, pool: WorkloadPool, rules: tuple[str, ...]) -> None:
        self.layout, self.pool, self.rules = layout, pool, rules
        dev = layout.device
        self.values = torch.arange(layout.width + 1, device=dev)
        self.island_values = torch.arange(layout.largest_island + 1, device=dev)
        self.island_index = torch.arange(layout.n_islands, device=dev)
        self.island_eligible = pool.eligible[:, layout.island_node]  # (E, islands)
        self.c_gpus, self.c_elig, self.c_size = pool.class_gpus, pool.class_eligible, pool.class_size

    def plan(self, pattern: torch.Tensor) -> Plan:
        """Every rule's allocation for every class, given the free bits ``pattern`` (N, nodes)."""
        lay, pool = self.layout, self.pool
        n_clusters, n_nodes = pattern.shape
        free = lay.popcount[pattern]  # (N, nodes)
        usable = free[:, None, :] * pool.eligible[None]  # (N, E, nodes)
        n, e = self.c_gpus, self.c_elig  # (C,)
        can_start = usable.sum(-1)[:, e] >= n
        # pack: the node with the smallest U >= n
        first = _first_with_value(usable, lay.node_index, lay.width + 1)  # (N, E, V)
        pack_value = _smallest_at_least(first, n_nodes, e, n.clamp(max=lay.width))  # (N, C)
        single = (pack_value <= lay.width) & (n <= lay.width)
        pack_node = _at(first, e, pack_value.clamp(max=lay.width)).clamp(max=n_nodes - 1)
        # spread: the node with the largest U
        most, most_node = usable.max(-1)  # first maximal index on ties
        spread_ok = most[:, e] >= n
        spread_node = most_node[:, e]
        # the gang rule, per eligible set: nodes by descending U, ties by index
        key = (lay.width - usable) * n_nodes + lay.node_index
        order = key.argsort(-1)
        s_usable = usable.gather(-1, order)
        s_cum = s_usable.cumsum(-1)
        s_speed, s_rack, s_size = lay.node_speed[order], lay.node_rack[order], lay.node_size[order]
        sizes = pool.sizes.expand(n_clusters, pool.eligible.shape[0], -1).contiguous()
        last = torch.searchsorted(s_cum, sizes).clamp(max=n_nodes - 1)  # (N, E, Z)
        last_c = _at(last, e, self.c_size)  # (N, C)
        g_nodes = (last_c + 1).double()
        g_speed = _at(s_speed.cummin(-1).values, e, last_c)
        same_rack = _at(s_rack.cummin(-1).values, e, last_c) == _at(s_rack.cummax(-1).values, e, last_c)
        g_level = torch.where(same_rack, ONE_RACK, RACKS)
        g_left = (_at(s_cum, e, last_c) - n).double() / _at(s_size.cumsum(-1), e, last_c).double()
        # one node: its features
        pack_level = self._node_level(pattern, pack_node)

        def single_features(node: torch.Tensor, level: torch.Tensor) -> tuple[torch.Tensor, ...]:
            left = (free.gather(1, node) - n).double() / lay.node_size[node].double()
            return lay.node_speed[node], level, left

        rows = []
        for rule in self.rules:
            if rule == "pack" or rule == "spread":
                node, ok = (pack_node, single) if rule == "pack" else (spread_node, spread_ok)
                level = pack_level if rule == "pack" else self._node_level(pattern, node)
                speed, lev, left = single_features(node, level)
                rows.append((torch.where(ok, SINGLE, GANG), torch.where(ok, node, -1),
                             torch.where(ok, 1.0, g_nodes), torch.where(ok, speed, g_speed),
                             torch.where(ok, lev, g_level), torch.where(ok, left, g_left)))
            else:
                rows.append(self._topology(pattern, free, usable, single, pack_node, pack_level,
                                           (g_nodes, g_speed, g_level, g_left),
                                           (s_usable, s_rack, s_speed, s_size), single_features))
        mode, where, n_nodes_t, speed, level, left = (torch.stack(parts, -1) for parts in zip(*rows, strict=True))
        return Plan(can_start, mode, where, n_nodes_t, speed, level, left.clamp(min=0.0), order, usable)

    def _node_level(self, pattern: torch.Tensor, node: torch.Tensor) -> torch.Tensor:
        """(N, C) the topology level of each class's lowest free GPUs on ``node`` (N, C): one island or one node."""
        n = self.c_gpus.clamp(max=self.layout.width).expand_as(node)
        one = self.layout.lookup_one_island(pattern.gather(1, node), node, n)
        return torch.where((self.c_gpus == 1) | one, ONE_ISLAND, ONE_NODE)

    def _topology(self, pattern, free, usable, single, pack_node, pack_level, gang, sorted_nodes, single_features):
        """The topology rule's plan: one island, else one node (pack), else one rack (gang in it), else a gang."""
        lay, pool = self.layout, self.pool
        n, e = self.c_gpus, self.c_elig
        g_nodes, g_speed, g_level, g_left = gang
        mode = torch.where(single, SINGLE, GANG)
        where = torch.where(single, pack_node, -1)
        speed_n, _, left_n = single_features(pack_node, pack_level)
        nodes = torch.where(single, 1.0, g_nodes)
        speed = torch.where(single, speed_n, g_speed)
        level = torch.where(single, pack_level, g_level)
        left = torch.where(single, left_n, g_left)
        if lay.n_racks > 1:  # step 3: the rack with the fewest usable GPUs that holds the job, the gang inside it
            s_usable, s_rack, s_speed, s_size = sorted_nodes
            n_clusters, n_elig, n_nodes = usable.shape
            rack_usable = torch.zeros(n_clusters, n_elig, lay.n_racks, dtype=usable.dtype, device=usable.device)
            rack_usable.scatter_add_(-1, lay.node_rack.expand_as(usable), usable)  # (N, E, R)
            sizes = pool.sizes  # (Z,)
            holds = rack_usable[:, :, None, :] >= sizes[:, None]  # (N, E, Z, R)
            rack = torch.where(holds, rack_usable[:, :, None, :], torch.iinfo(torch.int64).max).argmin(-1)
            rack_ok = holds.gather(-1, rack[..., None]).squeeze(-1)  # (N, E, Z)
            inside = s_rack[:, :, None, :] == rack[..., None]  # (N, E, Z, nodes)
            r_cum = (s_usable[:, :, None, :] * inside).cumsum(-1)
            r_last = torch.searchsorted(r_cum, sizes.expand(n_clusters, n_elig, -1)[..., None].contiguous())
            r_last = r_last.clamp(max=n_nodes - 1)
            pick = lambda a: _at(a.gather(-1, r_last).squeeze(-1), e, self.c_size)  # noqa: E731
            r_nodes = pick(inside.cumsum(-1)).double()
            r_speed = pick(torch.where(inside, s_speed[:, :, None, :], torch.inf).cummin(-1).values)
            r_left = (pick(r_cum) - n).double() / pick((s_size[:, :, None, :] * inside).cumsum(-1)).double()
            use = ~single & _at(rack_ok, e, self.c_size)
            rack_c = _at(rack, e, self.c_size)
            mode = torch.where(use, GANG, mode)
            where = torch.where(use, rack_c, where)
            nodes = torch.where(use, r_nodes, nodes)
            speed = torch.where(use, r_speed, speed)
            level = torch.where(use, ONE_RACK, level)
            left = torch.where(use, r_left, left)
        if lay.split_nodes:  # step 1: the island with the fewest free GPUs that holds the job
            island_free = lay.popcount[pattern[:, lay.island_node] & lay.island_mask]  # (N, I)
            island_usable = island_free[:, None, :] * self.island_eligible[None]  # (N, E, I)
            first = _first_with_value(island_usable, self.island_index, lay.largest_island + 1)
            value = _smallest_at_least(first, lay.n_islands, e, n.clamp(max=lay.largest_island))
            use = single & (n <= lay.largest_island) & (value <= lay.largest_island)
            island = _at(first, e, value.clamp(max=lay.largest_island))
            island_node = lay.island_node[island.clamp(max=lay.n_islands - 1)]
            speed_i, _, left_i = single_features(island_node, pack_level)
            mode = torch.where(use, ISLAND, mode)
            where = torch.where(use, island, where)
            speed = torch.where(use, speed_i, speed)
            level = torch.where(use, ONE_ISLAND, level)
            left = torch.where(use, left_i, left)
        return mode, where, nodes, speed, level, left

    def take(self, plan: Plan, pattern: torch.Tensor, klass: torch.Tensor, rule: torch.Tensor) -> torch.Tensor:
        """The free bits each node gives (N, nodes) when each cluster starts a job of class ``klass`` (N,) with
        rule index ``rule`` (N,), as planned in ``plan`` for the free bits ``pattern``."""
        lay = self.layout
        mode, where = pick(plan.mode, klass, rule), pick(plan.where, klass, rule)
        n = self.c_gpus[klass]  # (N,)
        e = self.c_elig[klass]
        nodes = lay.node_index[None, :]
        # one node, or one island of a node: the lowest n free GPUs there
        target = torch.where(mode == ISLAND, lay.island_node[where.clamp(min=0, max=lay.n_islands - 1)], where)
        allowed = torch.where((mode == ISLAND)[:, None] & (nodes == target[:, None]),
                              lay.island_mask[where.clamp(min=0, max=lay.n_islands - 1)][:, None], lay.full[None, :])
        counts = torch.where(nodes == target[:, None], n[:, None], 0)
        # a gang (in one rack, or across racks): in gang order, each node gives min(U, what is still missing)
        order = plan.order.gather(1, e[:, None, None].expand(-1, 1, lay.n_nodes)).squeeze(1)  # (N, nodes)
        s_usable = plan.usable.gather(1, e[:, None, None].expand(-1, 1, lay.n_nodes)).squeeze(1).gather(1, order)
        s_usable = torch.where((where[:, None] < 0) | (lay.node_rack[order] == where[:, None]), s_usable, 0)
        before = s_usable.cumsum(-1) - s_usable
        s_counts = torch.minimum((n[:, None] - before).clamp(min=0), s_usable)
        gang_counts = torch.zeros_like(s_counts).scatter_(1, order, s_counts)
        counts = torch.where((mode == GANG)[:, None], gang_counts, counts)
        allowed = torch.where((mode == GANG)[:, None], lay.full[None, :], allowed)
        return lay.lowest[pattern & allowed, counts]


def pick(table: torch.Tensor, klass: torch.Tensor, rule: torch.Tensor) -> torch.Tensor:
    """``table[i, klass[i], rule[i]]`` for each cluster i of an (N, C, P) plan table."""
    return table[torch.arange(table.shape[0], device=table.device), klass, rule]


def _first_with_value(values: torch.Tensor, index: torch.Tensor, n_values: int) -> torch.Tensor:
    """``out[..., v]``: the lowest index whose value is v (len(index) when none), for values (..., items)."""
    out = torch.full((*values.shape[:-1], n_values), index.numel(), dtype=torch.int64, device=values.device)
    return out.scatter_reduce(-1, values, index.expand_as(values), reduce="amin", include_self=True)


def _smallest_at_least(first: torch.Tensor, none: int, eligible: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
    """Per class: the smallest value >= n (class's GPU count) that some item holds, in the eligible set of the
    class; ``first.shape[-1]`` when none does. ``first`` (N, E, V) is :func:`_first_with_value`."""
    n_values = first.shape[-1]
    values = torch.arange(n_values, device=first.device)
    present = torch.where(first < none, values, n_values)
    suffix = present.flip(-1).cummin(-1).values.flip(-1)  # (N, E, V): smallest present value >= each v
    return _at(suffix, eligible, n)


def _at(table: torch.Tensor, eligible: torch.Tensor, column: torch.Tensor) -> torch.Tensor:
    """``table[:, eligible[c], column[..., c]]`` for each class c: (N, E, X) -> (N, C)."""
    n_clusters, n_elig, width = table.shape
    flat = table.reshape(n_clusters, n_elig * width)
    index = eligible * width + column
    return flat.gather(1, index.expand(n_clusters, -1) if index.dim() == 1 else index)
