"""Batching: a sentence's vectors do not depend on its batch; order, empty sentences, ``top_layer``."""

from __future__ import annotations

import numpy as np
import pytest

# Float32 GEMMs group sums differently for different numbers of rows: ~1e-6 on the tiny model.
BATCH_TOLERANCE = dict(atol=1e-5, rtol=0)
SENTENCE = "The quick brown fox jumps over the lazy dog .".split()
LONG = ("a much longer companion sentence " * 12).split()
SHORT = ["Hi"]


@pytest.fixture(scope="module")
def corpus(fixtures_dir):
    """70 sentences of varied length (the 30 reference sentences, cut and repeated)."""
    lines = (fixtures_dir / "reference" / "sentences_fixture_model.txt").read_text(encoding="utf-8").splitlines()
    sentences = [line.split() for line in lines]
    return [sentences[i % 30][: 1 + (7 * i) % 60] for i in range(70)]


@pytest.mark.parametrize(
    "batch, position",
    [([SENTENCE, LONG, SHORT], 0), ([SHORT, LONG, SENTENCE], 2), ([LONG, SENTENCE], 1), ([SHORT, SENTENCE, SHORT], 1)],
    ids=["first", "last", "after-longer", "between-shorter"],
)
def test_sentence_alone_equals_sentence_in_batch(tiny_embedder, batch, position):
    alone = tiny_embedder.embed_sentence(SENTENCE)
    np.testing.assert_allclose(tiny_embedder.embed_batch(batch)[position], alone, **BATCH_TOLERANCE)


def test_batch_size_1_equals_64_in_input_order(tiny_embedder, corpus):
    one = list(tiny_embedder.embed_sentences(corpus, batch_size=1))
    many = list(tiny_embedder.embed_sentences(corpus, batch_size=64))
    assert [a.shape for a in many] == [(3, len(s), 32) for s in corpus]
    for a, b in zip(one, many):
        np.testing.assert_allclose(a, b, **BATCH_TOLERANCE)


def test_first_layer_multiplies_each_distinct_word_once(tiny_embedder, lstm_calls):
    """Each direction's first LSTM layer runs its input product on the batch's distinct words (the
    sentence markers included) and reads it per position; the layers above read every position."""
    batch = [SENTENCE, SENTENCE, SHORT]
    tiny_embedder.embed_batch(batch)
    seen = [(c.x.shape[0], None if c.rows is None else c.rows.shape[0]) for c in lstm_calls]
    distinct, positions = len(set(SENTENCE) | set(SHORT)) + 2, sum(len(s) + 2 for s in batch)
    assert sorted(seen, key=str) == sorted([(distinct, positions)] * 2 + [(positions, None)] * 2, key=str)


def test_empty_sentence(tiny_embedder):
    assert tiny_embedder.embed_sentence([]).shape == (3, 0, 32)
    with_empty = tiny_embedder.embed_batch([[], SENTENCE, []])
    assert [a.shape for a in with_empty] == [(3, 0, 32), (3, len(SENTENCE), 32), (3, 0, 32)]
    np.testing.assert_allclose(with_empty[1], tiny_embedder.embed_sentence(SENTENCE), **BATCH_TOLERANCE)
    assert tiny_embedder.embed_batch([]) == []


@pytest.mark.parametrize("top_layer", [0, 1])
def test_top_layer_runs_only_lower_lstms(tiny_embedder, corpus, lstm_calls, top_layer):
    """Layers ``0..top_layer`` are identical to the full run; no LSTM above ``top_layer`` is called."""
    full = tiny_embedder.embed_batch(corpus[:8])
    lstm_calls.clear()
    partial = tiny_embedder.embed_batch(corpus[:8], top_layer=top_layer)
    for a, b in zip(partial, full):
        np.testing.assert_array_equal(a, b[: top_layer + 1])
    allowed = {id(stack[k]) for stack in tiny_embedder.model.stacks for k in range(top_layer)}
    assert {id(call.layer) for call in lstm_calls} == allowed


@pytest.mark.parametrize("top_layer", [-1, 3, 1.0, True, "1"])
def test_unavailable_top_layer_is_rejected(tiny_embedder, top_layer):
    with pytest.raises(ValueError, match="layers 0..2"):
        tiny_embedder.embed_sentence(SENTENCE, top_layer=top_layer)


@pytest.mark.parametrize("batch_size", [0, -1, 2.5, True])
def test_bad_batch_size_is_rejected(tiny_embedder, batch_size):
    with pytest.raises(ValueError, match="batch_size"):
        list(tiny_embedder.embed_sentences([SENTENCE], batch_size=batch_size))


@pytest.mark.parametrize(
    "bad, message", [("a str", "is a str"), ([1, "x"], "token 0 is int"), (None, "sentence 0 is NoneType")]
)
def test_bad_sentences_raise_the_package_error_naming_them(tiny_embedder, bad, message):
    from spacy_elmo_mix.errors import ElmoInputError

    with pytest.raises(ElmoInputError, match=message) as caught:
        tiny_embedder.embed_batch([bad])
    assert isinstance(caught.value, TypeError)  # still a TypeError for existing callers


def test_bad_sentence_in_a_stream_is_named_by_its_position(tiny_embedder):
    from spacy_elmo_mix.errors import ElmoInputError

    with pytest.raises(ElmoInputError, match="sentence 2 is NoneType"):
        list(tiny_embedder.embed_sentences([["a"], ["b"], None]))
