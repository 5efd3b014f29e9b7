"""The native biLM against outputs of the original implementations (bilm-tf and AllenNLP).

See ``../shared/elmo_fixtures/README.md`` for how the reference files were made.
"""
from __future__ import annotations

import json

import h5py
import numpy as np
import pytest

from spacy_elmo_mix.bilm import ElmoEmbedder, batch_to_char_ids

# The biLM is float32 throughout; the references agree with each other to ~1e-6. Against bilm-tf our
# largest difference is 1.07e-6 on values up to ~1.9, i.e. a few float32 ulp (ulp(1.9) = 1.2e-7), so
# the bound is 1e-6 absolute plus 1e-6 relative.
TF_TOLERANCE = dict(atol=1e-6, rtol=1e-6)
ALLENNLP_TOLERANCE = dict(atol=1e-5, rtol=0)
MIX_WEIGHTS, MIX_GAMMA = np.array([0.5, -0.2, 0.1]), 1.3
REFERENCE_CASES = {
    "fixture_model": ("tf_fixture/options.json", "tf_fixture/lm_weights.hdf5"),
    "tiny_random": ("reference/tiny_random/options.json", "reference/tiny_random/weights.hdf5"),
}


def test_layer0_matches_tf_token_embeddings(fixtures_dir, tiny_embedder):
    """Layer 0 is bilm-tf's token embedding of each vocabulary word, repeated for both halves."""
    words = (fixtures_dir / "tf_fixture" / "vocab_test.txt").read_text(encoding="utf-8").split("\n")
    words = [w for w in words if w]
    with h5py.File(fixtures_dir / "tf_fixture" / "elmo_token_embeddings.hdf5", "r") as f:
        expected = f["embedding"][...]
    assert len(words) == len(expected) == 458
    chunks = [words[i : i + 50] for i in range(0, len(words), 50)]
    layer0 = np.concatenate([layers[0] for layers in tiny_embedder.embed_batch(chunks, top_layer=0)])
    np.testing.assert_allclose(layer0[:, :16], expected, **TF_TOLERANCE)
    np.testing.assert_array_equal(layer0[:, 16:], layer0[:, :16])


def test_top_layer_matches_tf_batch_0(fixtures_dir, tiny_embedder):
    """bilm-tf's first (zero-state) batch: the top layer's forward half, then its backward half."""
    lists = json.loads((fixtures_dir / "tf_fixture" / "sentences.json").read_text(encoding="utf-8"))
    batch = [lists[k][0].split() for k in range(len(lists))]
    outputs = tiny_embedder.embed_batch(batch)
    for k, layers in enumerate(outputs):
        with h5py.File(fixtures_dir / "tf_fixture" / f"lm_embeddings_{k}.hdf5", "r") as f:
            expected = f["0"][...]  # [2, n_tokens, 16]
        top = layers[-1]
        np.testing.assert_allclose(np.stack([top[:, :16], top[:, 16:]]), expected, **TF_TOLERANCE)


@pytest.fixture(scope="module", params=sorted(REFERENCE_CASES))
def allennlp_case(request, fixtures_dir):
    """(sentences, reference npz, embedder) for one tiny model with AllenNLP reference outputs."""
    options, weights = (fixtures_dir / p for p in REFERENCE_CASES[request.param])
    reference = fixtures_dir / "reference"
    lines = (reference / f"sentences_{request.param}.txt").read_text(encoding="utf-8").splitlines()
    expected = dict(np.load(reference / f"expected_{request.param}.npz"))
    return [line.split() for line in lines], expected, ElmoEmbedder(options, weights)


def test_all_layers_match_allennlp(allennlp_case):
    sentences, expected, embedder = allennlp_case
    outputs = embedder.embed_batch(sentences)
    np.testing.assert_array_equal([len(s) for s in sentences], expected["lengths"])
    for i, layers in enumerate(outputs):
        np.testing.assert_allclose(layers, expected[f"layers_{i}"], **ALLENNLP_TOLERANCE)


def test_scalar_mix_matches_allennlp(allennlp_case):
    """``gamma * sum_j softmax(w)_j * layer_j`` of our layers equals AllenNLP's ``ScalarMix``."""
    sentences, expected, embedder = allennlp_case
    weights = np.exp(MIX_WEIGHTS) / np.exp(MIX_WEIGHTS).sum()
    for i, layers in enumerate(embedder.embed_batch(sentences)):
        mix = MIX_GAMMA * np.tensordot(weights, layers.astype(np.float64), axes=1)
        np.testing.assert_allclose(mix, expected[f"mix_{i}"], **ALLENNLP_TOLERANCE)


def test_char_ids_match_allennlp(allennlp_case):
    sentences, expected, _ = allennlp_case
    ids = batch_to_char_ids(sentences)
    for i, sentence in enumerate(sentences):
        np.testing.assert_array_equal(ids[i, : len(sentence)], expected[f"char_ids_{i}"])
        assert not ids[i, len(sentence) :].any()
