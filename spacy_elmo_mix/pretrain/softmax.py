"""The output layer: an adaptive softmax over the word vocabulary, shared by both directions."""

from __future__ import annotations

from typing import List

from torch import nn

HEAD_SIZE = 2000
CLUSTER_GROWTH = 5
DIV_VALUE = 4.0


def cutoffs_for(vocab_size: int) -> List[int]:
    """Cluster boundaries: a head of the ``HEAD_SIZE`` most frequent words, tails growing 5x.

    A vocabulary no larger than the head gets one tail of its rarer half (torch needs one cutoff).
    """
    if vocab_size <= HEAD_SIZE + 1:
        return [vocab_size // 2]
    cutoffs, edge = [], HEAD_SIZE
    while edge < vocab_size - 1:
        cutoffs.append(edge)
        edge *= CLUSTER_GROWTH
    return cutoffs


def adaptive_softmax(input_dim: int, vocab_size: int) -> nn.AdaptiveLogSoftmaxWithLoss:
    """An adaptive log-softmax from ``input_dim`` features to ``vocab_size`` words."""
    return nn.AdaptiveLogSoftmaxWithLoss(input_dim, vocab_size, cutoffs=cutoffs_for(vocab_size), div_value=DIV_VALUE)
