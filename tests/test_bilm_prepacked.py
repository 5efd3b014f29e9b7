"""``BiLM.set_prepacked``: MKL-packed recurrent and projection weights give the plain path's results."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from spacy_elmo_mix.bilm import ElmoEmbedder, batch_to_char_ids

pytestmark = pytest.mark.skipif(not torch._C.has_mkl, reason="this torch has no MKL (prepacked weights need it)")
# The same float32 products, grouped differently by MKL's packed kernel: a few ulp of values ~1.
PACKED_TOLERANCE = dict(atol=1e-6, rtol=1e-6)


@pytest.fixture
def embedder(tiny_model_files):
    return ElmoEmbedder(*tiny_model_files)


@pytest.fixture(scope="module")
def sentences(fixtures_dir):
    lines = (fixtures_dir / "reference" / "sentences_fixture_model.txt").read_text(encoding="utf-8").splitlines()
    return [line.split() for line in lines]


def packed_sizes(model):
    """The batch size each LSTM weight is packed for (None: not packed)."""
    return {getattr(w, "_packed_copy", ((None,),))[0][0] for stack in model.stacks for layer in stack
            for w in (layer.w_recurrent, layer.w_projection)}


def test_prepacked_equals_plain_and_repacks_for_a_new_batch_size(embedder, sentences):
    plain = list(embedder.embed_sentences(sentences, batch_size=8))
    embedder.model.set_prepacked(True)
    packed = list(embedder.embed_sentences(sentences[:16], batch_size=8, sort_batches=1))
    assert packed_sizes(embedder.model) == {8}
    packed += list(embedder.embed_sentences(sentences[16:], batch_size=14, sort_batches=1))
    assert packed_sizes(embedder.model) == {len(sentences) - 16}
    for a, b in zip(packed, plain):
        np.testing.assert_allclose(a, b, **PACKED_TOLERANCE)


def test_prepacked_matches_allennlp_reference(embedder, sentences, fixtures_dir):
    from test_bilm_reference import fixture_model_atol

    expected = np.load(fixtures_dir / "reference" / "expected_fixture_model.npz")
    references = [expected[f"layers_{i}"] for i in range(len(sentences))]
    atol = fixture_model_atol(fixtures_dir, sentences, references)
    embedder.model.set_prepacked(True)
    for layers, reference in zip(embedder.embed_batch(sentences), references):
        np.testing.assert_allclose(layers, reference, rtol=0, atol=atol)
    assert packed_sizes(embedder.model) == {len(sentences)}


def test_not_packed_with_gradients(tiny_model_files, sentences):
    from spacy_elmo_mix.bilm.loading import load_bilm

    model = load_bilm(*tiny_model_files).set_prepacked(True)
    ids, lengths = torch.from_numpy(batch_to_char_ids(sentences[:4])), torch.tensor([len(s) for s in sentences[:4]])
    model(ids, lengths).sum().backward()
    assert packed_sizes(model) == {None}
    assert model.stacks[0][0].w_recurrent.grad.abs().sum() > 0
