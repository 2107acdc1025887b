"""The GPUs a job holds, stored compactly: a range when contiguous, else a read-only index array."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np


class GpuSet(Sequence[int]):
    """Ascending global GPU indices of one allocation.

    Behaves as an immutable sequence of ints that compares equal to any sequence with the same indices
    (``GpuSet(range(0, 4)) == (0, 1, 2, 3)``). Large SWF jobs hold thousands of processors, so the indices are
    kept as a ``range`` or a numpy array rather than a tuple of Python ints.
    """

    __slots__ = ("_idx",)

    def __init__(self, indices: range | np.ndarray) -> None:
        self._idx = indices  # never handed out writable: readers get copies, read-only views or Python ints

    @classmethod
    def of(cls, selector: slice | np.ndarray) -> GpuSet:
        """From the simulator's selector: a slice (contiguous range) or an ascending index array."""
        if isinstance(selector, slice):
            return cls(range(selector.start, selector.stop))
        return cls(selector)

    @property
    def index(self) -> slice | np.ndarray:
        """A numpy index for per-GPU arrays: a slice when contiguous, else the index array (do not modify it)."""
        if isinstance(self._idx, range):
            return slice(self._idx.start, self._idx.stop)
        view = self._idx.view()
        view.setflags(write=False)
        return view

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        if isinstance(self._idx, range):
            return np.arange(self._idx.start, self._idx.stop, dtype=dtype)
        return np.array(self._idx, dtype=dtype)

    def __len__(self) -> int:
        return len(self._idx)

    def __getitem__(self, i: Any) -> Any:
        item = self._idx[i]
        return int(item) if np.ndim(item) == 0 else GpuSet(item)

    def __iter__(self) -> Iterator[int]:
        return iter(self._idx) if isinstance(self._idx, range) else iter(self._idx.tolist())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, (GpuSet, tuple, list, range, np.ndarray)):
            return NotImplemented
        return len(self) == len(other) and bool(np.array_equal(np.asarray(self), np.asarray(other)))

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        if isinstance(self._idx, range) and len(self._idx) > 8:
            return f"GpuSet({self._idx.start}..{self._idx.stop - 1})"
        return f"GpuSet({list(self)})"

