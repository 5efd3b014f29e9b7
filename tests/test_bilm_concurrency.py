"""Both directions of a layer at the same time (``BiLM.concurrent_directions``, 2+ torch threads):
same results and gradients as one after the other, modes and thread count handled."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch
from conftest import torch_threads

from spacy_elmo_mix.bilm import batch_to_char_ids
from spacy_elmo_mix.bilm.loading import load_bilm
from spacy_elmo_mix.bilm.modules import LSTMLayer

# Each direction runs the same operations either way; only the number of threads per matrix product
# differs (1 instead of 2), which may regroup float32 sums: ~1e-7 relative on the tiny model.
THREAD_TOLERANCE = dict(atol=1e-6, rtol=1e-5)


@pytest.fixture
def two_threads():
    """torch on 2 threads for one test (the suite runs on one)."""
    with torch_threads(2):
        yield


@pytest.fixture(scope="module")
def model(tiny_model_files):
    return load_bilm(*tiny_model_files)


@pytest.fixture(scope="module")
def batch(fixtures_dir):
    lines = (fixtures_dir / "reference" / "sentences_fixture_model.txt").read_text(encoding="utf-8").splitlines()
    sentences = [line.split() for line in lines[:12]]
    return torch.from_numpy(batch_to_char_ids(sentences)), torch.tensor([len(s) for s in sentences])


def run(model, batch, concurrent: bool) -> torch.Tensor:
    model.concurrent_directions = concurrent
    try:
        return model(*batch)
    finally:
        model.concurrent_directions = True


def spy_threads(monkeypatch):
    """Record (direction stack index, thread id, torch threads) of every LSTMLayer call."""
    calls = []
    original = LSTMLayer.forward

    def spy(self, *args):
        calls.append((self, threading.get_ident(), torch.get_num_threads()))
        return original(self, *args)

    monkeypatch.setattr(LSTMLayer, "forward", spy)
    return calls


def test_directions_run_on_two_threads_with_one_torch_thread_each(model, batch, two_threads, monkeypatch):
    calls = spy_threads(monkeypatch)
    with torch.inference_mode():
        run(model, batch, concurrent=True)
    backward_layers = set(model.stacks[1])
    main = threading.get_ident()
    assert len(calls) == 4
    assert {ident == main for layer, ident, _ in calls if layer in backward_layers} == {False}
    assert {ident == main for layer, ident, _ in calls if layer not in backward_layers} == {True}
    assert {n for _, _, n in calls} == {1}
    assert torch.get_num_threads() == 2


@pytest.mark.parametrize("threads", [1, 2])
def test_in_turn_when_turned_off_or_one_thread(model, batch, monkeypatch, threads):
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        calls = spy_threads(monkeypatch)
        with torch.inference_mode():
            run(model, batch, concurrent=threads == 1)  # on, but 1 thread / off with 2 threads
    finally:
        torch.set_num_threads(previous)
    assert {ident for _, ident, _ in calls} == {threading.get_ident()}


def test_concurrent_equals_in_turn(model, batch, two_threads):
    with torch.inference_mode():
        together = run(model, batch, concurrent=True)
        torch.set_num_threads(1)
        in_turn = run(model, batch, concurrent=False)
    torch.testing.assert_close(together, in_turn, **THREAD_TOLERANCE)


def test_gradients_equal_in_turn(model, batch, two_threads):
    """With gradients (pretraining), the worker records its graph under the caller's grad mode."""
    grads = []
    for concurrent in (True, False):
        model.zero_grad()
        run(model, batch, concurrent).pow(2).sum().backward()
        grads.append([p.grad.clone() for p in model.parameters()])
    assert all(g.abs().sum() > 0 for g in grads[0][-4:])
    # Gradients sum over every position and gate: float32 regrouping moves them by up to ~n * 2^-24
    # of the tensor's scale (n ~ 1e3 terms), so compare against each tensor's largest value.
    for a, b in zip(*grads):
        assert float((a - b).abs().max()) <= 1e-4 * float(b.abs().max())
    model.zero_grad(set_to_none=True)


def test_worker_error_propagates_and_thread_count_restored(model, batch, two_threads, monkeypatch):
    original = LSTMLayer.forward

    def failing(self, *args):
        if self in set(model.stacks[1]):
            raise RuntimeError("backward direction failed")
        return original(self, *args)

    monkeypatch.setattr(LSTMLayer, "forward", failing)
    with torch.inference_mode(), pytest.raises(RuntimeError, match="backward direction failed"):
        run(model, batch, concurrent=True)
    assert torch.get_num_threads() == 2


def test_concurrent_matches_allennlp_reference(fixtures_dir, two_threads):
    """The oracle on 2 threads (directions at the same time), with test_bilm_reference's tolerance."""
    from test_bilm_reference import fixture_model_atol

    from spacy_elmo_mix.bilm import ElmoEmbedder

    reference = fixtures_dir / "reference"
    sentences = [
        line.split() for line in (reference / "sentences_fixture_model.txt").read_text(encoding="utf-8").splitlines()
    ]
    expected = np.load(reference / "expected_fixture_model.npz")
    embedder = ElmoEmbedder(
        fixtures_dir / "tf_fixture" / "options.json", fixtures_dir / "tf_fixture" / "lm_weights.hdf5"
    )
    assert embedder.model.concurrent_directions
    references = [expected[f"layers_{i}"] for i in range(len(sentences))]
    atol = fixture_model_atol(fixtures_dir, sentences, references)
    for layers, reference in zip(embedder.embed_batch(sentences), references):
        np.testing.assert_allclose(layers, reference, rtol=0, atol=atol)
