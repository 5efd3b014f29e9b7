"""The in-memory tier of the layer cache: stored entries in least-recently-used order under a byte budget."""

from __future__ import annotations

from collections import OrderedDict
from typing import Optional, Tuple

import numpy as np


class MemoryTier:
    """An LRU map ``key -> (n_layers, flat entry)`` holding at most ``budget_bytes`` of entry data.

    budget_bytes: the most bytes of entry arrays kept; 0 keeps nothing. An entry larger than the
        whole budget is not kept.
    """

    def __init__(self, budget_bytes: int):
        if budget_bytes < 0:
            raise ValueError(f"memory_bytes must be >= 0, got {budget_bytes}")
        self.budget_bytes = budget_bytes
        self.nbytes = 0
        self._entries: "OrderedDict[bytes, Tuple[int, np.ndarray]]" = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: bytes, n_layers: int) -> Optional[np.ndarray]:
        """The flat entry of ``key`` if it holds at least ``n_layers`` layers (and mark it recently used)."""
        found = self._entries.get(key)
        if found is None or found[0] < n_layers:
            return None
        self._entries.move_to_end(key)
        return found[1]

    def layers_of(self, key: bytes) -> int:
        """How many layers the entry of ``key`` holds (0 when absent); does not change the LRU order."""
        found = self._entries.get(key)
        return 0 if found is None else found[0]

    def put(self, key: bytes, n_layers: int, flat: np.ndarray) -> None:
        """Keep ``flat`` (layers ``0..n_layers - 1``) unless an entry with as many layers is already kept."""
        if not self.budget_bytes or flat.nbytes > self.budget_bytes or self.layers_of(key) >= n_layers:
            return
        self._remove(key)
        self._entries[key] = (n_layers, flat)
        self.nbytes += flat.nbytes
        while self.nbytes > self.budget_bytes:
            self._remove(next(iter(self._entries)))

    def _remove(self, key: bytes) -> None:
        found = self._entries.pop(key, None)
        if found is not None:
            self.nbytes -= found[1].nbytes
