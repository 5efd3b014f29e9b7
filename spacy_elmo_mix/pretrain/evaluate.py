"""Held-out log-likelihoods of the language model and the perplexity of a unigram baseline."""
from __future__ import annotations

import math
from typing import Dict, Sequence, Tuple

import numpy as np
import torch

from .batches import make_batch
from .model import LanguageModel


def heldout_totals(
    model: LanguageModel, examples: Sequence[np.ndarray], chars: np.ndarray, type_to_vocab: np.ndarray, batch_size: int = 64
) -> Tuple[float, float, int]:
    """(forward NLL sum, backward NLL sum, predictions per direction) of ``model`` on ``examples``
    (dropout off, no gradients, on the model's device); zeros for no examples.

    chars, type_to_vocab: the data's character table and type -> vocabulary ids.
    batch_size: examples per forward pass.
    """
    was_training = model.training
    device = next(model.parameters()).device
    model.eval()
    totals, n = [0.0, 0.0], 0
    with torch.no_grad():
        for start in range(0, len(examples), batch_size):
            batch = make_batch(examples[start : start + batch_size], chars, type_to_vocab).to(device)
            forward, backward = model(batch)
            totals[0] += float(forward)
            totals[1] += float(backward)
            n += batch.n_predictions
    model.train(was_training)
    return totals[0], totals[1], n


def unigram_perplexity(train_examples: Sequence[np.ndarray], heldout_examples: Sequence[np.ndarray], type_to_vocab: np.ndarray, vocab_size: int) -> float:
    """Perplexity on held-out text of add-one unigram word frequencies from the training text.

    Counts the same predictions as the language model: every word (``<UNK>`` for rare ones) and one
    end marker per example; the backward direction's start marker has the same count, so one number
    serves both directions.
    """
    counts = _target_counts(train_examples, type_to_vocab, vocab_size) + 1.0
    log_probs = np.log(counts / counts.sum())
    heldout = _target_counts(heldout_examples, type_to_vocab, vocab_size)
    return math.exp(-float((heldout * log_probs).sum()) / float(heldout.sum()))


def _target_counts(examples: Sequence[np.ndarray], type_to_vocab: np.ndarray, vocab_size: int) -> np.ndarray:
    words = type_to_vocab[np.concatenate(examples)] if examples else np.zeros(0, np.int64)
    counts = np.bincount(words, minlength=vocab_size).astype(np.float64)
    counts[1] += len(examples)  # one </S> per example
    return counts
