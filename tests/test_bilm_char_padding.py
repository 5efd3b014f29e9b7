"""The character CNN convolves only the character columns a batch uses (plus one window of padding).

Trimming the common padding must not change any token vector or gradient: every window that lies
wholly in a token's padding has the same value, and one such window is kept wherever the full row
had one. Checked in float64 against the full 50 columns, where the only differences can come from
rounding (1e-12 is ~4500 float64 units, while a lost or added window changes values by O(1)).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from spacy_elmo_mix.bilm import modules
from spacy_elmo_mix.bilm.chars import sentence_markers, word_to_char_ids
from spacy_elmo_mix.bilm.modules import CharCNN, _trim_padding
from spacy_elmo_mix.bilm.options import CharCNNOptions

MAX_CHARS = 50
WIDEST = 7
OPTIONS = CharCNNOptions(
    filters=((1, 4), (2, 4), (3, 6), (WIDEST, 6)),
    n_highway=1,
    char_embedding_dim=5,
    n_characters=262,
    max_characters_per_token=MAX_CHARS,
    activation="tanh",
)
SHORT = ["a", "", "to", "the", "Überraschung", ",", "1,234.5"]


def _char_ids(words, absent: int = 1) -> torch.Tensor:
    """Rows for ``words`` and the sentence markers, plus ``absent`` all-zero rows (padded tokens)."""
    rows = [word_to_char_ids(w, MAX_CHARS) for w in words] + list(sentence_markers(MAX_CHARS))
    rows += [np.zeros(MAX_CHARS, dtype=np.int64)] * absent
    return torch.from_numpy(np.stack(rows))


def _vectors_and_gradients(cnn: CharCNN, char_ids: torch.Tensor):
    cnn.zero_grad()
    out = cnn(char_ids)
    (out * torch.linspace(-1, 1, out.numel(), dtype=out.dtype).view_as(out)).sum().backward()
    return out.detach(), {name: p.grad.clone() for name, p in cnn.named_parameters()}


@pytest.fixture
def cnn() -> CharCNN:
    torch.manual_seed(0)
    model = CharCNN(OPTIONS, output_dim=8).double()
    with torch.no_grad():
        for conv in model.convolutions:
            conv.bias.normal_()  # padding windows then differ from zero and between filters
    return model


@pytest.mark.parametrize("words", [SHORT, SHORT + ["x" * 40], SHORT + ["y" * 60]], ids=["short", "long", "cut"])
def test_trimmed_columns_give_the_full_width_results(cnn, words, monkeypatch):
    char_ids = _char_ids(words)
    trimmed, trimmed_grads = _vectors_and_gradients(cnn, char_ids)
    monkeypatch.setattr(modules, "_trim_padding", lambda ids, widest: ids)
    full, full_grads = _vectors_and_gradients(cnn, char_ids)
    torch.testing.assert_close(trimmed, full, rtol=1e-12, atol=1e-12)
    for name, grad in full_grads.items():
        torch.testing.assert_close(trimmed_grads[name], grad, rtol=1e-12, atol=1e-12, msg=name)


def test_keeps_the_longest_token_and_one_window_of_padding():
    char_ids = _char_ids(SHORT)
    longest = 2 + len("Überraschung".encode("utf-8"))  # word markers and 13 bytes
    assert _trim_padding(char_ids, WIDEST).shape == (len(char_ids), longest + WIDEST)
    assert _trim_padding(_char_ids(SHORT + ["z" * 45]), WIDEST).shape[1] == MAX_CHARS
    absent_only = torch.zeros(3, MAX_CHARS, dtype=torch.int64)
    assert _trim_padding(absent_only, WIDEST).shape == (3, WIDEST)
