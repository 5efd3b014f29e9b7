"""Gradients flow through ``BiLM.forward`` when asked; the frozen ``ElmoEmbedder`` has none."""

from __future__ import annotations

import numpy as np
import torch

from spacy_elmo_mix.bilm import batch_to_char_ids, load_bilm

SENTENCES = [s.split() for s in ("The cat sat on the mat .", "Hello", "Gradients reach every parameter , twice over .")]


def test_backward_reaches_lstm_and_char_cnn(tiny_model_files):
    model = load_bilm(*tiny_model_files).train()
    char_ids = torch.from_numpy(batch_to_char_ids(SENTENCES))
    lengths = torch.tensor([len(s) for s in SENTENCES])
    layers = model(char_ids, lengths)
    assert layers.requires_grad and layers.shape == (3, 3, 8, 32)
    (layers**2).sum().backward()
    names = [name for name, _ in model.named_parameters()]
    assert any(n.startswith("stacks.1.1.") for n in names) and any(
        n.startswith("char_cnn.convolutions.") for n in names
    )
    for name, parameter in model.named_parameters():
        assert parameter.grad is not None and parameter.grad.abs().sum() > 0, name


def test_padding_gets_no_gradient(tiny_model_files):
    """Positions past a sentence's end are zero and do not feed back into the model."""
    model = load_bilm(*tiny_model_files)
    char_ids = torch.from_numpy(batch_to_char_ids(SENTENCES))
    layers = model(char_ids, torch.tensor([len(s) for s in SENTENCES]))
    assert not layers[:, 1, 1:].any()
    layers[:, 1, 1:].sum().backward()
    assert all(p.grad is None or not p.grad.any() for p in model.parameters())


def test_embedder_is_frozen_and_deterministic(tiny_embedder):
    assert not any(p.requires_grad for p in tiny_embedder.model.parameters())
    with torch.enable_grad():
        first = tiny_embedder.embed_batch(SENTENCES)
    second = tiny_embedder.embed_batch(SENTENCES)
    for a, b in zip(first, second):
        assert isinstance(a, np.ndarray) and a.dtype == np.float32
        np.testing.assert_array_equal(a, b)
