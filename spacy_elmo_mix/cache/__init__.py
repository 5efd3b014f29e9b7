"""Building blocks of :class:`spacy_elmo_mix.layer_cache.LayerCache`.

keys: model fingerprints and token-sequence keys. payload: the compact byte layout of one entry
(layer 0 stored once, float16 or float32). memory: the in-memory LRU tier. index: the per-shard index
files. disk: the shared on-disk tier (append-only shards, memory-mapped reads, a writer lock).
"""
