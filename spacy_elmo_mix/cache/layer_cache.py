"""A cache of a frozen biLM's ELMo layers, so that no sentence's layers are computed twice.

Typical use (the component and ``python -m spacy_elmo_mix cache`` do this)::

    cache = LayerCache.for_model(embedder.model, directory="cache/elmo")   # or directory=None
    layers = cache.get_or_compute(sentences, top_layer=2, compute=embedder.embed_batch)

Entries are keyed by the exact token sequence and the model's :func:`model_fingerprint`, so a changed
model (or precision, via ``extra``) never gets stale vectors. Only the layers asked for are computed,
stored and read: an entry holding layers ``0..k`` serves any ``top_layer <= k``; a request for more
layers is a miss, and storing more layers later replaces the entry.

Two tiers: an LRU in memory under a byte budget, and an optional directory shared between runs and
processes (see :mod:`spacy_elmo_mix.cache.disk` for the format and its safety rules). Both keep the
stored form: layer 0 (the token vector written twice) once, in float16 by default (relative rounding
<= 4.9e-4) or float32 (exact), so a sentence gets the same vectors from either tier. About
``n_tokens * (w / 2 + k * w) * 2`` bytes per entry in float16: 5,120 bytes per token for the published
model (``w = 1024``, ``k = 2``). Requires deterministic layers: a frozen biLM in eval mode, a zero
initial state per sentence (as :class:`~spacy_elmo_mix.bilm.ElmoEmbedder` does).

A full disk does not stop training: the write is rolled back, a :class:`LayerCacheWarning` is issued
once, :attr:`LayerCache.disk_error` says what happened, and new entries stay in memory only.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, List, Optional, Sequence, Union, cast

import numpy as np

from .disk import DiskTier, LayerCacheWarning, NewEntry
from .keys import model_fingerprint, sequence_key
from .memory import MemoryTier
from .payload import cache_dtype, decode, encode

if TYPE_CHECKING:
    from ..bilm.modules import BiLM

__all__ = ["CacheStats", "LayerCache", "LayerCacheWarning", "model_fingerprint"]

DEFAULT_MEMORY_BYTES = 512 * 2**20
Tokens = Sequence[str]


@dataclass(frozen=True)
class CacheStats:
    """Counters of one :class:`LayerCache` since it was created.

    hits, misses: sentences found / not found by ``get``/``get_many``/``get_or_compute``.
    memory_hits, disk_hits: how the hits were served.
    disk_writes: entries this process appended to the disk tier.
    corrupt_entries: damaged disk entries found (each reported and treated as a miss).
    memory_bytes, memory_entries: current size of the in-memory tier.
    disk_entries: entries in the disk tier as far as this process knows (0 without a directory).
    """

    hits: int = 0
    misses: int = 0
    memory_hits: int = 0
    disk_hits: int = 0
    disk_writes: int = 0
    corrupt_entries: int = 0
    memory_bytes: int = 0
    memory_entries: int = 0
    disk_entries: int = 0

    @property
    def hit_rate(self) -> float:
        """Fraction of looked-up sentences that were found (0.0 before any lookup)."""
        total = self.hits + self.misses
        return self.hits / total if total else 0.0

    def __str__(self) -> str:
        return (
            f"{self.hits} hits ({self.memory_hits} memory, {self.disk_hits} disk), {self.misses} misses, "
            f"{self.memory_entries} entries / {self.memory_bytes / 2**20:.1f} MiB in memory, "
            f"{self.disk_entries} on disk ({self.disk_writes} written, {self.corrupt_entries} damaged)"
        )


class LayerCache:
    """ELMo layers of token sequences for one model, in memory and optionally on disk.

    directory: a cache root shared by any number of models and runs (entries of this model go into
        the subdirectory ``<fingerprint[:32]>-<dtype>``, see :attr:`path`); None keeps memory only.
    fingerprint: :func:`model_fingerprint` of the biLM whose layers are stored.
    n_layers_total: number of ELMo layers of that model (LSTM layers + 1).
    width: ELMo vector width (``2 * projection_dim``; even).
    memory_bytes: byte budget of the in-memory tier (least recently used entries are dropped); 0
        disables it.
    dtype: stored precision, ``"float16"`` (default, half the space) or ``"float32"`` (exact).
    refresh_seconds: after a disk miss, look for entries written by other processes at most this often.

    Not thread-safe: use one instance per thread (any number of processes may share a directory).
    """

    def __init__(
        self,
        directory: Optional[Union[str, Path]],
        fingerprint: str,
        n_layers_total: int,
        width: int,
        memory_bytes: int = DEFAULT_MEMORY_BYTES,
        dtype: str = "float16",
        refresh_seconds: float = 1.0,
    ):
        if not fingerprint or not all(c in "0123456789abcdef" for c in fingerprint):
            raise ValueError(f"fingerprint must be a lower-case hex string (model_fingerprint), got {fingerprint!r}")
        if n_layers_total < 1 or width < 2 or width % 2:
            raise ValueError(f"need n_layers_total >= 1 and an even width >= 2, got {n_layers_total} and {width}")
        self.fingerprint, self.n_layers_total, self.width = fingerprint, n_layers_total, width
        self.dtype = cache_dtype(dtype)
        self._memory = MemoryTier(memory_bytes)
        self.path = None if directory is None else Path(directory) / f"{fingerprint[:32]}-{dtype}"
        self._disk = None
        if self.path is not None:
            self._disk = DiskTier(self.path, width, n_layers_total, dtype, refresh_seconds=refresh_seconds)
        self._counts = dict(hits=0, misses=0, memory_hits=0, disk_hits=0, disk_writes=0)

    @classmethod
    def for_model(
        cls, model: "BiLM", directory: Optional[Union[str, Path]] = None, extra: str = "", **kwargs
    ) -> "LayerCache":
        """A cache for a :class:`~spacy_elmo_mix.bilm.BiLM` (fingerprint and sizes taken from it).

        extra: passed to :func:`model_fingerprint` (e.g. the compute precision).
        kwargs: ``memory_bytes``, ``dtype``, ``refresh_seconds``.
        """
        options = model.options
        return cls(directory, model_fingerprint(model, extra), options.n_output_layers, options.output_dim, **kwargs)

    # ----------------------------------------------------------------------------------- lookups
    def get(self, tokens: Tokens, top_layer: Optional[int] = None) -> Optional[np.ndarray]:
        """Float32 layers ``[top_layer + 1, len(tokens), width]`` of ``tokens``, or None when not cached.

        top_layer: highest layer wanted (None: all layers).
        """
        return self.get_many([tokens], top_layer)[0]

    def get_many(self, sentences: Sequence[Tokens], top_layer: Optional[int] = None) -> List[Optional[np.ndarray]]:
        """:meth:`get` for each sentence, in order."""
        n_layers = self._n_layers(top_layer)
        return [self._lookup(_tokens(s), n_layers) for s in sentences]

    def _lookup(self, tokens: List[str], n_layers: int) -> Optional[np.ndarray]:
        key = sequence_key(tokens, self.fingerprint)
        flat = self._memory.get(key, n_layers)
        tier = "memory_hits"
        if flat is None and self._disk is not None:
            flat, tier = self._disk.get(key, n_layers), "disk_hits"
            if flat is not None:
                self._memory.put(key, n_layers, flat)
        if flat is None:
            self._counts["misses"] += 1
            return None
        self._counts["hits"] += 1
        self._counts[tier] += 1
        return decode(flat, len(tokens), n_layers, self.width)

    # ----------------------------------------------------------------------------------- storing
    def put(self, tokens: Tokens, layers: np.ndarray) -> None:
        """Store ``layers`` ``[k + 1, len(tokens), width]`` (ELMo layers ``0..k``) for ``tokens``.

        An entry already holding at least ``k + 1`` layers is kept as it is.
        """
        self.put_many([tokens], [layers])

    def put_many(self, sentences: Sequence[Tokens], layers: Sequence[np.ndarray]) -> None:
        """:meth:`put` for each (sentence, layers) pair; the disk tier is written once for the batch."""
        self._store(sentences, layers)

    def get_or_compute(
        self,
        sentences: Sequence[Tokens],
        top_layer: Optional[int],
        compute: Callable[[List[List[str]]], Sequence[np.ndarray]],
    ) -> List[np.ndarray]:
        """Layers ``0..top_layer`` of every sentence, computing only the missing ones (in one call).

        compute: called with the list of missing sentences, returns their layers (float32 arrays
            ``[>= top_layer + 1, n_tokens, width]``), e.g. ``ElmoEmbedder.embed_batch`` with
            ``top_layer`` bound.
        Computed layers are returned as stored (rounded to float16 in a float16 cache), so a sentence
        gets the same vectors whether it was a hit or a miss.
        """
        n_layers = self._n_layers(top_layer)
        tokenized = [_tokens(s) for s in sentences]
        results = self.get_many(tokenized, top_layer)
        missing = [i for i, found in enumerate(results) if found is None]
        if missing:
            computed = compute([tokenized[i] for i in missing])
            if len(computed) != len(missing) or any(len(layers) < n_layers for layers in computed):
                raise ValueError(
                    f"compute must return {len(missing)} arrays of at least {n_layers} layers, "
                    f"got {[getattr(layers, 'shape', None) for layers in computed]}"
                )
            stored = self._store([tokenized[i] for i in missing], [layers[:n_layers] for layers in computed])
            for i, flat in zip(missing, stored):
                results[i] = decode(flat, len(tokenized[i]), n_layers, self.width)
        return cast(List[np.ndarray], results)  # every None was filled above

    def _store(self, sentences: Sequence[Tokens], layers: Sequence[np.ndarray]) -> List[np.ndarray]:
        if len(sentences) != len(layers):
            raise ValueError(f"{len(sentences)} sentences but {len(layers)} layer arrays")
        entries = []
        for tokens, array in zip(sentences, layers):
            tokens = _tokens(tokens)
            self._check_layers(tokens, array)
            entry = NewEntry(
                sequence_key(tokens, self.fingerprint), len(tokens), array.shape[0], encode(array, self.dtype)
            )
            self._memory.put(entry.key, entry.n_layers, entry.flat)
            entries.append(entry)
        if self._disk is not None:
            self._counts["disk_writes"] += self._disk.put_many(entries)
        return [entry.flat for entry in entries]

    # ----------------------------------------------------------------------------------- state
    @property
    def stats(self) -> CacheStats:
        """A snapshot of the counters and tier sizes."""
        disk = self._disk
        return CacheStats(
            **self._counts,
            corrupt_entries=0 if disk is None else disk.corrupt_entries,
            memory_bytes=self._memory.nbytes,
            memory_entries=len(self._memory),
            disk_entries=0 if disk is None else len(disk),
        )

    @property
    def disk_error(self) -> Optional[str]:
        """Why the disk tier stopped accepting writes (e.g. a full disk), or None."""
        return None if self._disk is None else self._disk.write_error

    def close(self) -> None:
        """Release the memory-mapped shard files; the in-memory tier stays usable."""
        if self._disk is not None:
            self._disk.close()
            self._disk = None

    def __enter__(self) -> "LayerCache":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def _n_layers(self, top_layer: Optional[int]) -> int:
        if top_layer is None:
            return self.n_layers_total
        if isinstance(top_layer, bool) or not isinstance(top_layer, int) or not 0 <= top_layer < self.n_layers_total:
            raise ValueError(f"top_layer must be in 0..{self.n_layers_total - 1} (or None), got {top_layer!r}")
        return top_layer + 1

    def _check_layers(self, tokens: List[str], layers: np.ndarray) -> None:
        shape: Any = getattr(layers, "shape", None)
        if (
            not isinstance(layers, np.ndarray)
            or layers.ndim != 3
            or not 1 <= shape[0] <= self.n_layers_total
            or shape[1:] != (len(tokens), self.width)
        ):
            raise ValueError(
                f"layers must be a numpy array [k + 1 <= {self.n_layers_total}, {len(tokens)} tokens, "
                f"{self.width}], got {type(layers).__name__} {shape}"
            )


def _tokens(sentence: Tokens) -> List[str]:
    if isinstance(sentence, str):
        raise TypeError(f"a sentence must be a list of tokens, not the str {sentence[:40]!r}")
    return list(sentence)
