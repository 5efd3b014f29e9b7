"""The optional token-vector cache: same outputs as no cache, bounded, least recently used dropped."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from spacy_elmo_mix.bilm import ElmoEmbedder, TokenVectorCache, batch_to_char_ids


@pytest.fixture(scope="module")
def sentences(fixtures_dir):
    lines = (fixtures_dir / "reference" / "sentences_tiny_random.txt").read_text(encoding="utf-8").splitlines()
    return [line.split() for line in lines]


@pytest.mark.parametrize("capacity", [40, 100_000], ids=["evicting", "roomy"])
def test_cached_embedder_equals_uncached(tiny_model_files, tiny_embedder, sentences, capacity, fixtures_dir):
    from test_bilm_reference import fixture_model_atol

    cached = ElmoEmbedder(*tiny_model_files, token_cache_size=capacity)
    expected = list(tiny_embedder.embed_sentences(sentences, batch_size=8))
    # A cached vector was computed in another batch of words (another GEMM grouping of its sums):
    # equal within the float32 bound of the model's depth, not bit for bit.
    atol = fixture_model_atol(fixtures_dir, sentences, expected)
    for _ in range(2):  # the second pass reuses vectors computed in the first
        for ours, theirs in zip(cached.embed_sentences(sentences, batch_size=8), expected):
            np.testing.assert_allclose(ours, theirs, atol=atol, rtol=0)
    cache = cached.model.token_cache
    assert cache.hits > 0 and 0 < len(cache) <= capacity


def test_cache_is_bypassed_when_gradients_are_enabled(tiny_model_files, sentences):
    embedder = ElmoEmbedder(*tiny_model_files, token_cache_size=1000)
    model, cache = embedder.model, embedder.model.token_cache
    char_ids = torch.from_numpy(batch_to_char_ids(sentences[:2]))
    lengths = torch.tensor([len(s) for s in sentences[:2]])
    model.char_cnn.char_embedding.requires_grad_(True)
    assert model(char_ids, lengths).requires_grad
    assert len(cache) == cache.hits == cache.misses == 0


def test_only_missing_words_are_encoded_and_oldest_dropped():
    encoded = []

    def encode(words):
        encoded.append(words[:, 0].tolist())
        return words.float() * 2

    cache = TokenVectorCache(max_words=3)

    def ids(*firsts):
        return torch.tensor([[f, 0] for f in firsts])

    torch.testing.assert_close(cache.vectors(ids(1, 2, 3), encode), ids(1, 2, 3).float() * 2)
    torch.testing.assert_close(cache.vectors(ids(3, 4, 1), encode), ids(3, 4, 1).float() * 2)
    assert encoded == [[1, 2, 3], [4]]  # 2 was the least recently used and is gone
    cache.vectors(ids(2), encode)
    assert encoded[-1] == [2] and (cache.hits, cache.misses, len(cache)) == (2, 5, 3)
    cache.clear()
    assert (cache.hits, cache.misses, len(cache)) == (0, 0, 0)


@pytest.mark.parametrize("size", [-1, 1.5, True])
def test_bad_capacity(tiny_model_files, size):
    with pytest.raises(ValueError, match="positive integer"):
        ElmoEmbedder(*tiny_model_files, token_cache_size=size)
