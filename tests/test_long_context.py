"""``pretraining/long_context.py``: positions are counted right and the per-position losses add up to
the model's own held-out loss."""

from __future__ import annotations

import importlib.util
import random

import numpy as np
import pytest
import torch
from test_pretrain import make_trainer

from elmo_testing import REPO
from spacy_elmo_mix.pretrain.data import prepare_data
from spacy_elmo_mix.pretrain.evaluate import heldout_totals


def _long_context():
    spec = importlib.util.spec_from_file_location("long_context", REPO / "pretraining" / "long_context.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_position_losses_add_up_to_the_heldout_loss(tmp_path):
    rng = random.Random(0)
    words = ["the", "cat", "sees", "a", "dog", "my", "friend", "calls", "."]
    train, heldout = tmp_path / "train.txt", tmp_path / "heldout.txt"
    train.write_text(
        "\n".join(" ".join(rng.choice(words) for _ in range(rng.randint(3, 12))) for _ in range(200)) + "\n",
        encoding="utf-8",
    )
    heldout.write_text(" ".join(rng.choice(words) for _ in range(40)) + "\nthe cat sees a dog .\n", encoding="utf-8")
    trainer = make_trainer((train, heldout), tmp_path / "run", max_steps=3)
    trainer.train(progress=False)
    tool = _long_context()
    sums, counts = tool.position_nll(str(trainer.checkpoint_path), str(heldout))
    # a 40-token line predicts at positions 0..40 and a 6-token line at 0..6, in each direction
    assert counts[0, :7].tolist() == [2] * 7 and counts[0, 7:41].tolist() == [1] * 34 and counts[0, 41:].sum() == 0
    assert np.array_equal(counts[0], counts[1])
    whole = prepare_data([heldout], [heldout], max_len=256, vocab=trainer.data.vocab)
    with torch.no_grad():
        forward, backward, n = heldout_totals(trainer.model, whole.heldout, whole.make_batch)
    assert n == counts[0].sum() == 48
    assert sums.sum(axis=1) == pytest.approx([forward, backward], rel=1e-5)
    rows = tool.perplexity_by_position(str(trainer.checkpoint_path), str(heldout))
    assert rows[2].startswith("| 1-9 |") and rows[-1].startswith("| 40-59 |") and rows[-1].endswith("| 1 |")
