"""The compact layout of one cache entry: what is stored for ``layers[0..k]`` of one sentence.

ELMo's layer 0 is the context-free token vector written twice (``[v, v]``), so only its first half
is stored. An entry of ``n`` tokens with layers ``0..k`` of width ``w`` is one flat array of the
cache's dtype made of ``k + 1`` blocks, in order:

    block 0: layer 0, first half     [n, w / 2]
    block j: layer j (1 <= j <= k)   [n, w]

Layers ``0..t`` are therefore a prefix of the entry, so a request for fewer layers reads fewer bytes.
"""

from __future__ import annotations

from typing import Dict, List

import numpy as np

DTYPES: Dict[str, np.dtype] = {"float16": np.dtype(np.float16), "float32": np.dtype(np.float32)}
FLOAT16_MAX = float(np.finfo(np.float16).max)


def cache_dtype(name: str) -> np.dtype:
    """The numpy dtype of a cache dtype name (``"float16"`` or ``"float32"``)."""
    if name not in DTYPES:
        raise ValueError(f"cache dtype must be one of {sorted(DTYPES)}, got {name!r}")
    return DTYPES[name]


def block_sizes(n_tokens: int, n_layers: int, width: int) -> List[int]:
    """Number of values in each stored block of an entry with layers ``0..n_layers - 1``."""
    return [n_tokens * width // 2] + [n_tokens * width] * (n_layers - 1)


def encode(layers: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Flat stored form of ``layers`` ``[k + 1, n_tokens, width]`` (layer 0 must be ``[v, v]``).

    dtype: the storage dtype; float16 values beyond its range raise instead of becoming inf.
    """
    half = layers.shape[2] // 2
    if not np.array_equal(layers[0, :, :half], layers[0, :, half:]):
        raise ValueError("layer 0 is not an ELMo token layer (its two halves differ); the cache stores it once")
    if dtype == np.float16 and layers.size and float(np.abs(layers).max()) > FLOAT16_MAX:
        raise ValueError("layer values exceed the float16 range; use a float32 cache")
    flat = np.empty(sum(block_sizes(layers.shape[1], layers.shape[0], layers.shape[2])), dtype=dtype)
    first = layers.shape[1] * half
    flat[:first] = layers[0, :, :half].reshape(-1)
    flat[first:] = layers[1:].reshape(-1)
    return flat


def decode(flat: np.ndarray, n_tokens: int, n_layers: int, width: int) -> np.ndarray:
    """Float32 layers ``[n_layers, n_tokens, width]`` from (a prefix of) a stored entry.

    flat: at least the first ``n_layers`` blocks of an entry written by :func:`encode`.
    """
    half = width // 2
    first = n_tokens * half
    out = np.empty((n_layers, n_tokens, width), dtype=np.float32)
    token_vectors = flat[:first].reshape(n_tokens, half)
    out[0, :, :half] = token_vectors
    out[0, :, half:] = token_vectors
    rest = (n_layers - 1) * n_tokens * width
    out[1:] = flat[first : first + rest].reshape(n_layers - 1, n_tokens, width)
    return out
