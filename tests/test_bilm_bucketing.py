"""``embed_sentences(sort_batches=...)`` and ``length_batches``: batches of similar length, input order kept."""

from __future__ import annotations

import numpy as np
import pytest

from spacy_elmo_mix.bilm import ElmoEmbedder
from spacy_elmo_mix.bilm.embedder import length_batches

# Float32 GEMMs group sums differently for different numbers of rows (as in test_bilm_batching).
BATCH_TOLERANCE = dict(atol=1e-5, rtol=0)


@pytest.fixture(scope="module")
def corpus(fixtures_dir):
    """45 sentences of 1-44 tokens in a shuffled length order."""
    lines = (fixtures_dir / "reference" / "sentences_fixture_model.txt").read_text(encoding="utf-8").splitlines()
    words = " ".join(lines).split()
    return [words[i : i + 1 + (17 * i) % 44] for i in range(45)]


def test_length_batches_longest_first_ties_in_order():
    assert length_batches([3, 9, 1, 9, 5], 2) == [[1, 3], [4, 0], [2]]
    assert length_batches([], 4) == []


def test_sorted_windows_equal_input_order_batching(tiny_embedder, corpus, monkeypatch):
    plain = list(tiny_embedder.embed_sentences(corpus, batch_size=4, sort_batches=1))
    batches = []
    original = ElmoEmbedder.embed_batch

    def spy(self, batch, top_layer=None):
        batches.append([len(s) for s in batch])
        return original(self, batch, top_layer=top_layer)

    monkeypatch.setattr(ElmoEmbedder, "embed_batch", spy)
    sorted_ = list(tiny_embedder.embed_sentences(iter(corpus), batch_size=4, sort_batches=5))
    # Windows of 20 sentences, each cut into batches of 4 by decreasing length.
    assert [len(b) for b in batches] == [4] * 10 + [4, 1]
    for window in (batches[:5], batches[5:10], batches[10:]):
        flat = [n for b in window for n in b]
        assert flat == sorted(flat, reverse=True)
    assert [a.shape for a in sorted_] == [a.shape for a in plain] == [(3, len(s), 32) for s in corpus]
    for a, b in zip(sorted_, plain):
        np.testing.assert_allclose(a, b, **BATCH_TOLERANCE)


@pytest.mark.parametrize("value", [0, -1, 1.5, True, "8"])
def test_bad_sort_batches(tiny_embedder, value):
    with pytest.raises(ValueError, match="sort_batches must be a positive integer"):
        list(tiny_embedder.embed_sentences([["a"]], sort_batches=value))
