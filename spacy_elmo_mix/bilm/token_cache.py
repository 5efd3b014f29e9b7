"""An exact, bounded cache of the char-CNN's token vectors (layer 0), keyed by a word's character ids.

A word's token vector depends only on its characters, so a frozen biLM can compute it once and reuse
it in later batches (what AllenNLP and this package measured it to save: docs/benchmarks.md, section
"Findings"). Reused vectors
are the ones computed earlier; computed afresh in another batch they may differ in the last float32
bit (GEMM grouping).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Callable, Dict

import torch
from torch import Tensor


class TokenVectorCache:
    """Least-recently-used cache of token vectors.

    max_words: the most words kept; the least recently used are dropped first.
    Valid only while the biLM's weights do not change: call :meth:`clear` after changing them.
    """

    def __init__(self, max_words: int):
        if isinstance(max_words, bool) or not isinstance(max_words, int) or max_words < 1:
            raise ValueError(f"max_words must be a positive integer, got {max_words!r}")
        self.max_words = max_words
        self.hits = 0
        self.misses = 0
        self._vectors: "OrderedDict[bytes, Tensor]" = OrderedDict()

    def __len__(self) -> int:
        return len(self._vectors)

    def clear(self) -> None:
        """Forget every vector and reset the hit and miss counts."""
        self._vectors.clear()
        self.hits = self.misses = 0

    def vectors(self, words: Tensor, encode: Callable[[Tensor], Tensor]) -> Tensor:
        """Token vectors ``[n_words, dim]`` of ``[n_words, max_chars]`` character ids.

        encode: computes the vectors of the words not in the cache (called at most once, on those rows).
        """
        if len(words) == 0:
            return encode(words)
        keys = [row.tobytes() for row in words.cpu().numpy()]
        missing = [k for k, key in enumerate(keys) if key not in self._vectors]
        fresh: Dict[bytes, Tensor] = {}
        if missing:
            computed = encode(words[missing])
            fresh = {keys[k]: vector.clone() for k, vector in zip(missing, computed)}
        rows = [fresh[key] if key in fresh else self._vectors[key] for key in keys]
        self.misses += len(missing)
        self.hits += len(keys) - len(missing)
        self._remember(keys, fresh)
        return torch.stack(rows)

    def _remember(self, keys, fresh: Dict[bytes, Tensor]) -> None:
        """Mark ``keys`` as just used, add the ``fresh`` vectors, then drop the oldest beyond capacity."""
        for key in keys:
            if key in self._vectors:
                self._vectors.move_to_end(key)
        self._vectors.update(fresh)
        while len(self._vectors) > self.max_words:
            self._vectors.popitem(last=False)
