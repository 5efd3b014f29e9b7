"""Model fingerprints and token-sequence keys of the layer cache."""

from __future__ import annotations

import hashlib
import json
import struct
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:
    import torch

FINGERPRINT_VERSION = b"spacy-elmo-mix layer cache fingerprint v1"
KEY_BYTES = 16


def model_fingerprint(model: "torch.nn.Module", extra: str = "") -> str:
    """Hex blake2b digest of a model's options and every parameter and buffer in its state_dict.

    model: the biLM (any ``torch.nn.Module``; its ``options.to_json_dict()`` is included when present).
    extra: anything else that changes the outputs and is not in the weights; two different
        ``extra`` strings give two different fingerprints. A biLM's compute precision is included
        by itself when it is not float32 (``compute_dtype``, see ``BiLM.set_compute_dtype``), so
        bfloat16 layers never answer for float32 ones; float32 fingerprints are unchanged by it.

    Tensors are hashed in sorted name order with their dtype and shape, so one changed weight (or a
    renamed or reshaped tensor) changes the fingerprint. Tensors are hashed in parallel threads
    (hashlib releases the GIL), still a noticeable time for a published-size model
    (docs/benchmarks.md, section "Findings"); compute it once.
    """
    import torch

    state = model.state_dict()
    names = sorted(state)
    tensors = [state[name].detach().to("cpu").contiguous().reshape(-1).view(torch.uint8) for name in names]
    with ThreadPoolExecutor() as pool:
        tensor_digests = list(pool.map(_bytes_digest, tensors))
    digest = hashlib.blake2b(FINGERPRINT_VERSION, digest_size=20)
    compute_dtype = getattr(model, "compute_dtype", torch.float32)
    if compute_dtype != torch.float32:
        extra = f"{extra}|compute_dtype={compute_dtype}"
    _update_field(digest, extra.encode("utf-8"))
    options = getattr(model, "options", None)
    if options is not None and hasattr(options, "to_json_dict"):
        _update_field(digest, json.dumps(options.to_json_dict(), sort_keys=True).encode("utf-8"))
    for name, tensor_digest in zip(names, tensor_digests):
        _update_field(digest, f"{name}|{state[name].dtype}|{tuple(state[name].shape)}".encode("utf-8"))
        _update_field(digest, tensor_digest)
    return digest.hexdigest()


def sequence_key(tokens: Sequence[str], fingerprint: str) -> bytes:
    """16-byte blake2b key of a model fingerprint and an exact token sequence.

    tokens: the sentence's token strings; every token is length-prefixed, so no choice of token text
        can make two different sequences collide by concatenation.
    fingerprint: the model's :func:`model_fingerprint`.
    """
    digest = hashlib.blake2b(fingerprint.encode("ascii"), digest_size=KEY_BYTES)
    digest.update(struct.pack("<Q", len(tokens)))
    for token in tokens:
        _update_field(digest, token.encode("utf-8", "surrogatepass"))
    return digest.digest()


def _bytes_digest(tensor: "torch.Tensor") -> bytes:
    """blake2b of a flat uint8 CPU tensor's bytes."""
    return hashlib.blake2b(tensor.numpy().data, digest_size=32).digest()


def _update_field(digest, data) -> None:
    digest.update(struct.pack("<Q", len(data)))
    digest.update(data)
