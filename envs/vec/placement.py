"""The placement rules pack, spread and topology (envs.placement.basic) on N clusters at once, per placement class.

Every rule of :mod:`envs.placement.basic` reduces, for a whole-GPU job without binding CPU, to questions about
each node's usable free GPUs U (free GPUs of eligible nodes): the node with the smallest U >= n (lowest index on
ties), the node with the largest U, the island with the smallest free count >= n, and the gang rule (nodes by
descending U, lowest index on ties, all their GPUs until n is reached), inside the rack with the smallest usable
sum >= n or across racks. U takes at most ``width + 1`` values, so "the lowest node holding each value" is one
scatter over nodes, and the answer for every GPU count follows from values alone. A gang takes every node with U
above some level u and, at level u, the lowest-indexed nodes until n is reached: u comes from a histogram of U,
and the last node from one cumulative count over nodes, with no sort. No tensor here is larger than (clusters,
eligible sets, GPU counts, nodes). GPUs inside a node are its lowest free ones, as in the event simulator;
:meth:`VecPlacement.take` turns a chosen (class, rule) into the bits each node gives.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from envs.core.joblog import TopologyLevel
from envs.vec.layout import ClusterLayout, lookup
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
    cut_level: torch.Tensor  # (N, C, P) int64: a gang's level u (it takes every node of its group with U > u)
    cut_node: torch.Tensor  # (N, C, P) int64: a gang's last node (at level u; those before it at u are taken)
    rest: torch.Tensor  # (N, C, P) int64: the GPUs a gang's last node gives
    usable: torch.Tensor  # (N, E, nodes) U per eligible set


class _Gang(NamedTuple):
    """The gang rule inside one group of nodes per class (N, C): whether the group holds the class, the
    allocation's features, and where it cuts."""

    ok: torch.Tensor  # bool: the group's usable GPUs add up to the class's
    nodes: torch.Tensor  # float64: nodes taken
    speed: torch.Tensor  # float64: the slowest type's speed factor
    level: torch.Tensor  # int64: ONE_RACK or RACKS
    left: torch.Tensor  # float64: free GPUs left on the nodes taken / their GPUs
    cut_level: torch.Tensor  # int64
    cut_node: torch.Tensor  # int64
    rest: torch.Tensor  # int64


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
        self.all_nodes = torch.zeros(layout.n_nodes, dtype=torch.int64, device=dev)  # one group: the cluster
        self.n_sizes = pool.sizes.numel()
        self.class_row = pool.class_eligible * self.n_sizes + pool.class_size  # (C,) the class's (E, Z) row
        self.rack_int = layout.node_rack.int()

    def plan(self, pattern: torch.Tensor) -> Plan:
        """Every rule's allocation for every class, given the free bits ``pattern`` (N, nodes)."""
        lay, pool = self.layout, self.pool
        n, e = self.c_gpus, self.c_elig  # (C,) GPUs and eligible set of each class
        free = lookup(lay.popcount, pattern)  # (N, nodes)
        usable = free[:, None, :] * pool.eligible[None]  # (N, E, nodes)
        can_start = self._fits(usable)
        # pack: the lowest node with the smallest U >= n
        first = _first_with_value(usable, lay.node_index, lay.width + 1)  # (N, E, V)
        pack_value = _smallest_at_least(first, lay.n_nodes, e, n)  # (N, C); V when no node holds n
        single = pack_value <= lay.width
        pack_node = _at(first, e, pack_value.clamp(max=lay.width)).clamp(max=lay.n_nodes - 1)
        pack_level = self._node_level(pattern, pack_node)
        # spread: the lowest node with the largest U
        most, most_node = usable.max(-1)  # first maximal index on ties
        spread_ok = most.index_select(1, e) >= n
        spread_node = most_node.index_select(1, e)
        zeros = torch.zeros(usable.shape[0], usable.shape[1], pool.sizes.numel(), dtype=torch.int64,
                            device=usable.device)
        gang = self._gang(usable, self.all_nodes, 1, zeros, can_start & ~single)
        rows = []
        for rule in self.rules:
            if rule == "topology":
                rows.append(self._topology(pattern, free, usable, single, pack_node, pack_level, gang))
                continue
            node, ok = (pack_node, single) if rule == "pack" else (spread_node, spread_ok)
            level = pack_level if rule == "pack" else self._node_level(pattern, node)
            rows.append(self._one_node(free, node, level, ok, gang))
        columns = (torch.stack(parts, -1) for parts in zip(*rows, strict=True))
        mode, where, n_nodes, speed, level, left, cut_level, cut_node, rest = columns
        return Plan(can_start, mode, where, n_nodes, speed, level, left.clamp(min=0.0), cut_level, cut_node, rest,
                    usable)

    def can_start(self, pattern: torch.Tensor) -> torch.Tensor:
        """(N, C) bool: whether each class fits now, given the free bits ``pattern`` (the rules are complete, so
        by any rule); what :meth:`plan` gives as ``can_start``, without the rest of the plan."""
        return self._fits(lookup(self.layout.popcount, pattern)[:, None, :] * self.pool.eligible[None])

    def _fits(self, usable: torch.Tensor) -> torch.Tensor:
        """(N, C) bool from the usable free GPUs per eligible set and node (N, E, nodes)."""
        return usable.sum(-1).index_select(1, self.c_elig) >= self.c_gpus

    def _node_features(self, free: torch.Tensor, node: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(speed, GPUs left free / node size) of each class's allocation on one ``node`` (N, C)."""
        lay = self.layout
        return lookup(lay.node_speed, node), (free.gather(1, node) - self.c_gpus).double() / lookup(lay.node_size, node)

    def _one_node(self, free: torch.Tensor, node: torch.Tensor, level: torch.Tensor, ok: torch.Tensor,
                  gang: _Gang) -> tuple[torch.Tensor, ...]:
        """A plan row: ``node`` (N, C) with its ``level`` where ``ok``, else ``gang``."""
        speed, left = self._node_features(free, node)
        return (torch.where(ok, SINGLE, GANG), torch.where(ok, node, -1), torch.where(ok, 1.0, gang.nodes),
                torch.where(ok, speed, gang.speed), torch.where(ok, level, gang.level),
                torch.where(ok, left, gang.left), gang.cut_level, gang.cut_node, gang.rest)

    def _node_level(self, pattern: torch.Tensor, node: torch.Tensor) -> torch.Tensor:
        """(N, C) the topology level of each class's lowest free GPUs on ``node`` (N, C): one island or one node."""
        n = self.c_gpus.clamp(max=self.layout.width).expand_as(node)
        one = self.layout.lookup_one_island(pattern.gather(1, node), node, n)
        return torch.where((self.c_gpus == 1) | one, ONE_ISLAND, ONE_NODE)

    def _gang(self, usable: torch.Tensor, group: torch.Tensor, n_groups: int, chosen: torch.Tensor,
              needed: torch.Tensor) -> _Gang:
        """The gang rule for every class inside one group of nodes: ``group`` (nodes,) is each node's group and
        ``chosen`` (N, E, Z) the group each (eligible set, GPU count) uses. It takes every node of the group with U
        above the level u, then the nodes at level u by index until n is reached (the last gives the rest). The
        allocation's features are computed for the classes of ``needed`` (N, C) only (elsewhere they are unused)."""
        lay = self.layout
        n_clusters, n_elig, n_nodes = usable.shape
        n_values, sizes = lay.width + 1, self.pool.sizes
        # usable GPUs per (group, level), summed over the levels >= v (with a zero level past the top)
        per_level = torch.zeros(n_clusters, n_elig, n_groups * n_values, dtype=torch.int64, device=usable.device)
        per_level.scatter_add_(-1, group * n_values + usable, usable)
        top = per_level.view(n_clusters, n_elig, n_groups, n_values).flip(-1).cumsum(-1).flip(-1)
        top = torch.nn.functional.pad(top, (0, 1)).gather(2, chosen[..., None].expand(-1, -1, -1, n_values + 1))
        # the level u: the largest v >= 1 whose nodes and those above it hold n (0: the group cannot)
        reach = (top[..., :n_values] >= sizes[:, None]) & (self.values >= 1)  # (N, E, Z, V)
        u = torch.where(reach, self.values.int(), 0).amax(-1).long()  # int32: int64 amax is slow on CPU
        above = top.gather(-1, (u + 1)[..., None]).squeeze(-1)
        step = u.clamp(min=1)
        taken = (sizes - above + step - 1) // step  # nodes taken at level u
        rest = sizes - above - (taken - 1) * step
        # the rows (cluster, eligible set, GPU count) some needed class reads: their nodes, one row each
        wanted = torch.zeros(n_clusters, n_elig * self.n_sizes, dtype=torch.int32, device=usable.device)
        wanted.index_add_(1, self.class_row, needed.int())
        rows = wanted.view(-1).nonzero().squeeze(1)
        row_usable = usable.view(n_clusters * n_elig, n_nodes).index_select(0, rows // self.n_sizes)
        row_u = u.view(-1).index_select(0, rows)[:, None]
        in_group = group == chosen.view(-1).index_select(0, rows)[:, None]  # (rows, nodes)
        at_level = in_group & (row_usable == row_u)
        cut = (at_level.int().cumsum(-1) < taken.view(-1).index_select(0, rows)[:, None]).sum(-1)
        taken_nodes = in_group & ((row_usable > row_u) | (at_level & (lay.node_index <= cut[:, None])))
        features = torch.stack([
            torch.where(taken_nodes, lay.node_speed, torch.inf).amin(-1),
            torch.where(taken_nodes, lay.node_size, 0).sum(-1).double(),
            taken_nodes.sum(-1).double(),
            (torch.where(taken_nodes, self.rack_int, lay.n_racks).amin(-1)
             == torch.where(taken_nodes, self.rack_int, -1).amax(-1)).double(),
            cut.double(),
        ], -1)  # (rows, 5): slowest speed, GPUs, nodes, one rack, last node
        table = torch.ones(n_clusters * n_elig * self.n_sizes, 5, dtype=torch.float64, device=usable.device)
        table = table.index_copy_(0, rows, features).view(n_clusters, n_elig * self.n_sizes, 5)
        per_row = table.index_select(1, self.class_row)  # (N, C, 5)
        e, z, n = self.c_elig, self.c_size, self.c_gpus
        u_c, above_c, taken_c = _at(u, e, z), _at(above, e, z), _at(taken, e, z)
        left = (above_c + taken_c * u_c.clamp(min=1) - n).double() / per_row[..., 1]
        level = torch.where(per_row[..., 3] > 0, ONE_RACK, RACKS)
        return _Gang(u_c > 0, per_row[..., 2], per_row[..., 0], level, left, u_c, per_row[..., 4].long(),
                     _at(rest, e, z))

    def _topology(self, pattern: torch.Tensor, free: torch.Tensor, usable: torch.Tensor, single: torch.Tensor,
                  pack_node: torch.Tensor, pack_level: torch.Tensor, gang: _Gang) -> tuple[torch.Tensor, ...]:
        """The topology rule's plan: one island, else one node (pack), else one rack (gang in it), else a gang."""
        lay, pool = self.layout, self.pool
        n, e = self.c_gpus, self.c_elig
        if lay.n_racks > 1:  # step 3: the rack with the fewest usable GPUs that holds the job, the gang inside it
            rack_usable = torch.zeros(usable.shape[0], usable.shape[1], lay.n_racks, dtype=torch.int64,
                                      device=usable.device)
            rack_usable.scatter_add_(-1, lay.node_rack.expand_as(usable), usable)  # (N, E, R)
            holds = rack_usable[:, :, None, :] >= pool.sizes[:, None]  # (N, E, Z, R)
            rack = torch.where(holds, rack_usable[:, :, None, :].int(), torch.iinfo(torch.int32).max).argmin(-1)
            rack_ok = _at(holds.gather(-1, rack[..., None]).squeeze(-1), e, self.c_size)
            use = ~single & rack_ok
            in_rack = self._gang(usable, lay.node_rack, lay.n_racks, rack, use)
            gang = _Gang(*(torch.where(use, a, b) for a, b in zip(in_rack, gang, strict=True)))
            where = torch.where(use, _at(rack, e, self.c_size), -1)
        else:
            where = torch.full_like(pack_node, -1)
        row = list(self._one_node(free, pack_node, pack_level, single, gang))
        row[1] = torch.where(single, pack_node, where)
        if lay.split_nodes:  # step 1: the island with the fewest free GPUs that holds the job
            island_free = lookup(lay.popcount, pattern.index_select(1, lay.island_node) & lay.island_mask)  # (N, I)
            island_usable = island_free[:, None, :] * self.island_eligible[None]  # (N, E, I)
            first = _first_with_value(island_usable, self.island_index, lay.largest_island + 1)
            value = _smallest_at_least(first, lay.n_islands, e, n)
            use = single & (value <= lay.largest_island)
            island = _at(first, e, value.clamp(max=lay.largest_island)).clamp(max=lay.n_islands - 1)
            speed, left = self._node_features(free, lookup(lay.island_node, island))
            for column, value_i in ((0, ISLAND), (1, island), (3, speed), (4, ONE_ISLAND), (5, left)):
                row[column] = torch.where(use, value_i, row[column])
        return tuple(row)

    def take(self, plan: Plan, pattern: torch.Tensor, klass: torch.Tensor, rule: torch.Tensor) -> torch.Tensor:
        """The free bits each node gives (N, nodes) when each cluster starts a job of class ``klass`` (N,) with
        rule index ``rule`` (N,), as planned in ``plan`` for the free bits ``pattern``."""
        lay = self.layout
        mode, where = pick(plan.mode, klass, rule), pick(plan.where, klass, rule)
        n = self.c_gpus.index_select(0, klass)  # (N,)
        nodes = lay.node_index[None, :]
        # one node, or one island of a node: the lowest n free GPUs there
        island = where.clamp(min=0, max=lay.n_islands - 1)
        target = torch.where(mode == ISLAND, lookup(lay.island_node, island), where)
        allowed = torch.where((mode == ISLAND)[:, None] & (nodes == target[:, None]),
                              lookup(lay.island_mask, island)[:, None], lay.full[None, :])
        counts = torch.where(nodes == target[:, None], n[:, None], 0)
        # a gang: every node of its group (a rack, or all) above its level u, those at u up to its last node
        n_clusters, n_elig, _ = plan.usable.shape
        rows = torch.arange(n_clusters, device=klass.device) * n_elig + self.c_elig.index_select(0, klass)
        usable = plan.usable.reshape(n_clusters * n_elig, -1).index_select(0, rows)
        u, cut, rest = (pick(t, klass, rule)[:, None] for t in (plan.cut_level, plan.cut_node, plan.rest))
        in_group = (where[:, None] < 0) | (lay.node_rack[None, :] == where[:, None])
        chosen = in_group & ((usable > u) | ((usable == u) & (nodes <= cut)))
        gang_counts = torch.where(nodes == cut, rest, torch.where(chosen, usable, 0))
        counts = torch.where((mode == GANG)[:, None], gang_counts, counts)
        allowed = torch.where((mode == GANG)[:, None], lay.full[None, :], allowed)
        return lay.lowest_bits(pattern & allowed, counts)


def pick(table: torch.Tensor, klass: torch.Tensor, rule: torch.Tensor) -> torch.Tensor:
    """``table[i, klass[i], rule[i]]`` for each cluster i of an (N, C, P) plan table."""
    return table[torch.arange(table.shape[0], device=table.device), klass, rule]


def _first_with_value(values: torch.Tensor, index: torch.Tensor, n_values: int) -> torch.Tensor:
    """``out[..., v]``: the lowest index whose value is v (len(index) when none), for values (..., items)."""
    out = torch.full((*values.shape[:-1], n_values), index.numel(), dtype=torch.int64, device=values.device)
    return out.scatter_reduce(-1, values, index.expand_as(values), reduce="amin", include_self=True)


def _smallest_at_least(first: torch.Tensor, none: int, eligible: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
    """Per class c (N, C): the smallest value >= n[c] that some item of the class's eligible set holds, or
    ``first.shape[-1]`` when none does; ``first`` (N, E, V) is :func:`_first_with_value` (``none``: no item)."""
    n_values = first.shape[-1]
    values = torch.arange(n_values, device=first.device)
    held = (first.index_select(1, eligible) < none) & (values >= n[:, None])  # (N, C, V)
    return torch.where(held, values.int(), n_values).amin(-1).long()  # int32: torch's int64 amin is slow on CPU


def _at(table: torch.Tensor, eligible: torch.Tensor, column: torch.Tensor) -> torch.Tensor:
    """``table[:, eligible[c], column[..., c]]`` for each class c: (N, E, X) -> (N, C)."""
    n_clusters, n_elig, width = table.shape
    flat = table.reshape(n_clusters, n_elig * width)
    index = eligible * width + column
    return flat.gather(1, index.expand(n_clusters, -1) if index.dim() == 1 else index)
