"""The embedded default biLM loads from the package with no network access and gives ELMo layers."""

from __future__ import annotations

import socket

import numpy as np
import pytest

from spacy_elmo_mix.bilm import ElmoEmbedder
from spacy_elmo_mix.default_model import DIRECTORY, default_model_files

MAX_BYTES = 25 * 1024 * 1024


@pytest.fixture()
def no_network(monkeypatch):
    def refuse(*args, **kwargs):
        raise OSError("network access is disabled in this test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def test_default_model_loads_offline_and_embeds(no_network):
    options, weights = default_model_files()
    assert weights.stat().st_size <= MAX_BYTES
    embedder = ElmoEmbedder(options, weights)
    layers = embedder.embed_sentence(["The", "model", "works", "offline", "."])
    assert layers.shape == (embedder.n_layers, 5, embedder.model.options.output_dim)
    assert np.isfinite(layers).all() and np.abs(layers).sum() > 0


def test_default_model_ships_vocabulary_card_and_curve():
    for name in ("vocab.txt", "MODEL_CARD.md", "training_curve.png"):
        assert (DIRECTORY / name).is_file(), name
    card = (DIRECTORY / "MODEL_CARD.md").read_text(encoding="utf-8")
    assert "unigram" in card and "## Downstream value" in card
