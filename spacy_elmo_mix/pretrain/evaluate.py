"""Held-out log-likelihoods of the language model and the perplexity of a unigram baseline."""

from __future__ import annotations

import math
from typing import Callable, Sequence, Tuple

import numpy as np
import torch

from .batches import Batch
from .model import LanguageModel


def heldout_totals(
    model: LanguageModel, examples: Sequence, make_batch: Callable[[Sequence], Batch], batch_size: int = 64
) -> Tuple[float, float, int]:
    """(forward NLL sum, backward NLL sum, predictions per direction) of ``model`` on ``examples``
    (dropout off, no gradients, on the model's device); zeros for no examples.

    make_batch: the data's batch maker (examples -> :class:`Batch`).
    batch_size: examples per forward pass.
    """
    was_training = model.training
    device = next(model.parameters()).device
    model.eval()
    totals, n = [0.0, 0.0], 0
    with torch.no_grad():
        for start in range(0, len(examples), batch_size):
            batch = make_batch(examples[start : start + batch_size]).to(device)
            forward, backward = model(batch)
            totals[0] += float(forward)
            totals[1] += float(backward)
            n += batch.n_predictions
    model.train(was_training)
    return totals[0], totals[1], n


def unigram_perplexity(train_counts: np.ndarray, heldout_counts: np.ndarray) -> float:
    """Perplexity on held-out text of add-one unigram word frequencies from the training text.

    train_counts, heldout_counts: occurrences of each vocabulary id as a prediction target (every
    word, ``<UNK>`` for rare ones, and one end marker per example), as :func:`target_counts` gives.
    The backward direction's start marker has the same count, so one number serves both directions.
    """
    log_probs = np.log((train_counts + 1.0) / (train_counts + 1.0).sum())
    return math.exp(-float((heldout_counts * log_probs).sum()) / float(heldout_counts.sum()))


def target_counts(examples: Sequence[np.ndarray], type_to_vocab: np.ndarray, vocab_size: int) -> np.ndarray:
    """Occurrences of each vocabulary id among the targets of ``examples`` (type-id arrays)."""
    words = type_to_vocab[np.concatenate(examples)] if len(examples) else np.zeros(0, np.int64)
    counts = np.bincount(words, minlength=vocab_size).astype(np.float64)
    counts[1] += len(examples)  # one </S> per example
    return counts
