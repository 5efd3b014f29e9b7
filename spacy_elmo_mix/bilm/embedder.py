"""``ElmoEmbedder``: the AllenNLP-style public API for computing ELMo layers of token lists."""

from __future__ import annotations

from typing import Iterable, Iterator, List, Optional, Sequence

import numpy as np
import torch

from ..errors import ElmoInputError, ElmoInputTypeError
from .chars import batch_to_char_ids
from .loading import PathOrUrl, load_bilm
from .precision import resolve_compute_dtype
from .token_cache import TokenVectorCache


class ElmoEmbedder:
    """Compute ELMo layers for tokenized sentences with a frozen biLM.

    options_file, weight_file: paths or http(s)/s3 URLs of the bilm-tf/AllenNLP files.
    device: torch device to run on (``"cpu"``, ``"cuda"``, ``"cuda:1"``...).
    token_cache_size: keep the token vectors (layer 0) of up to this many distinct words, least
        recently used dropped first, and reuse them in later batches instead of running the char-CNN
        again (``4 * projection_dim`` bytes a word; 0: no cache).
    dtype: ``"float32"`` (exact, default), ``"bfloat16"``: convolutions and matrix products in
        bfloat16 (for CPUs with bf16 units and GPUs; see ``BiLM.set_compute_dtype``; warns once where
        the hardware has no native bfloat16), or ``"auto"``: bfloat16 only where it is native,
        float32 elsewhere (see ``bilm.precision``).

    Every sentence starts from a zero LSTM state, so a sentence gets the same vectors in any batch
    (AllenNLP's ``ElmoEmbedder`` carried state between batches).
    """

    def __init__(
        self,
        options_file: PathOrUrl,
        weight_file: PathOrUrl,
        device: str = "cpu",
        token_cache_size: int = 0,
        dtype: str = "float32",
    ):
        self.device = torch.device(device)
        compute_dtype = resolve_compute_dtype(dtype, self.device)
        self.model = load_bilm(options_file, weight_file).to(self.device).eval()
        self.model.set_compute_dtype(compute_dtype)
        for p in self.model.parameters():
            p.requires_grad_(False)
        if token_cache_size:
            self.model.token_cache = TokenVectorCache(token_cache_size)

    @property
    def n_layers(self) -> int:
        """Number of ELMo layers (token layer plus LSTM layers)."""
        return self.model.n_output_layers

    def embed_batch(self, batch: Sequence[Sequence[str]], top_layer: Optional[int] = None) -> List[np.ndarray]:
        """One float32 array ``[top_layer + 1, n_tokens, 2 * projection_dim]`` per sentence.

        top_layer: return layers ``0..top_layer`` only; LSTM layers above it are not computed.
        """
        batch = [_check_sentence(s, i) for i, s in enumerate(batch)]
        top = self.model.check_top_layer(top_layer)
        if not batch:
            return []
        max_chars = self.model.options.char_cnn.max_characters_per_token
        char_ids = torch.from_numpy(batch_to_char_ids(batch, max_chars)).to(self.device)
        lengths = torch.tensor([len(s) for s in batch], dtype=torch.int64)
        with torch.inference_mode():
            layers = self.model(char_ids, lengths, top_layer=top).cpu().numpy()
        return [np.ascontiguousarray(layers[:, i, : len(s)]) for i, s in enumerate(batch)]

    def embed_sentence(self, sentence: Sequence[str], top_layer: Optional[int] = None) -> np.ndarray:
        """ELMo layers of one sentence: ``[top_layer + 1, n_tokens, 2 * projection_dim]``."""
        return self.embed_batch([sentence], top_layer=top_layer)[0]

    def embed_sentences(
        self,
        sentences: Iterable[Sequence[str]],
        batch_size: int = 64,
        top_layer: Optional[int] = None,
        sort_batches: int = 8,
    ) -> Iterator[np.ndarray]:
        """Yield one array per sentence, in input order, computing ``batch_size`` at a time.

        sort_batches: read ``sort_batches * batch_size`` sentences at a time and batch them by length
            (see :func:`length_batches`), so that each LSTM step multiplies more active sentences;
            1 batches the stream in input order. Vectors do not depend on the batching beyond float32
            rounding; the larger the value, the later the first array is yielded.
        """
        for name, value in (("batch_size", batch_size), ("sort_batches", sort_batches)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ElmoInputError(f"{name} must be a positive integer, got {value!r}")
        window: List[Sequence[str]] = []
        for index, sentence in enumerate(sentences):
            window.append(_check_sentence(sentence, index))
            if len(window) == batch_size * sort_batches:
                yield from self._embed_window(window, batch_size, top_layer)
                window = []
        if window:
            yield from self._embed_window(window, batch_size, top_layer)

    def _embed_window(self, window: List[Sequence[str]], batch_size: int, top_layer: Optional[int]) -> List[np.ndarray]:
        """The arrays of ``window``'s sentences in its order, computed in batches of similar length."""
        arrays: List[np.ndarray] = [np.empty(0)] * len(window)
        for indices in length_batches([len(s) for s in window], batch_size):
            for i, layers in zip(indices, self.embed_batch([window[i] for i in indices], top_layer=top_layer)):
                arrays[i] = layers
        return arrays


def length_batches(lengths: Sequence[int], batch_size: int) -> List[List[int]]:
    """Positions ``0..len(lengths) - 1`` in batches of ``batch_size``, longest sentences first.

    lengths: tokens per sentence; batch_size: sentences per batch (the last batch may be smaller).
    Sentences of similar length share a batch, so fewer LSTM steps run with only a few sentences
    still active (the biLM does no work on padding, but a step's matrix product is faster per row
    the more rows it has). Ties keep their input order.
    """
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


def _check_sentence(sentence: Sequence[str], index: int) -> List[str]:
    if isinstance(sentence, str):
        raise ElmoInputTypeError(f"sentence {index} is a str; pass a list of tokens (e.g. text.split())")
    try:
        tokens = list(sentence)
    except TypeError:
        raise ElmoInputTypeError(
            f"sentence {index} is {type(sentence).__name__} {sentence!r}, expected a list of str tokens"
        ) from None
    for j, token in enumerate(tokens):
        if not isinstance(token, str):
            raise ElmoInputTypeError(f"sentence {index}, token {j} is {type(token).__name__} {token!r}, expected str")
    return tokens
