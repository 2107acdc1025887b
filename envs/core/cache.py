"""Per-node dataset caches with least-recently-used eviction."""

from __future__ import annotations

from collections import OrderedDict


class LRUCache:
    """Datasets held on one node's local disk, evicted least-recently-used first; sizes in GiB."""

    __slots__ = ("_items", "capacity_gib", "used_gib")

    def __init__(self, capacity_gib: float) -> None:
        self.capacity_gib = capacity_gib
        self.used_gib = 0.0
        self._items: OrderedDict[str, float] = OrderedDict()

    def __contains__(self, dataset_id: str) -> bool:
        return dataset_id in self._items

    def touch(self, dataset_id: str, size_gib: float) -> bool:
        """Use ``dataset_id``: True on a hit (made most recent); on a miss, cache it (evicting LRU) and return False.

        A dataset larger than the whole cache is never cached.
        """
        if dataset_id in self._items:
            self._items.move_to_end(dataset_id)
            return True
        if size_gib <= self.capacity_gib:
            while self._items and self.used_gib + size_gib > self.capacity_gib:
                _, evicted = self._items.popitem(last=False)
                self.used_gib -= evicted
            if not self._items:
                self.used_gib = 0.0  # no round-off left behind once empty
            self._items[dataset_id] = size_gib
            self.used_gib += size_gib
        return False

    def datasets(self) -> tuple[str, ...]:
        """Cached dataset ids, least recently used first."""
        return tuple(self._items)
