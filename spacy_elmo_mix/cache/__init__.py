"""The layer cache: :class:`LayerCache` (``layer_cache``) and its building blocks.

keys: model fingerprints and token-sequence keys. payload: the compact byte layout of one entry
(layer 0 stored once, float16 or float32). memory: the in-memory LRU tier. index: the per-shard index
files. disk: the shared on-disk tier (append-only shards, memory-mapped reads, a writer lock).
"""

from .layer_cache import DEFAULT_MEMORY_BYTES, CacheStats, LayerCache, LayerCacheWarning, model_fingerprint

__all__ = ["DEFAULT_MEMORY_BYTES", "CacheStats", "LayerCache", "LayerCacheWarning", "model_fingerprint"]
