"""Training examples and batches in the packed layout the biLM runs on.

An example is a window of at most ``max_len`` consecutive tokens of one line (longer lines are cut
into several windows). The model sees it as ``<S> w1 .. wn </S>`` forward and ``</S> wn .. w1 <S>``
backward; each position predicts the next one in its direction, starting from a zero state, like
the inference model.

The batch order of an epoch depends only on ``(seed, epoch)``, so a run can resume at any batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Sequence, TypeVar

import numpy as np
import torch
from torch import Tensor
from torch.nn.utils.rnn import pack_padded_sequence

from ..bilm.chars import word_to_char_ids

IGNORE = -100
BOS_TYPE, EOS_TYPE = 0, 1
SORT_POOL_BATCHES = 50
# a sentence: an array of type ids or a list of tokens
SentenceT = TypeVar("SentenceT", np.ndarray, List[str])


def make_examples(sentences: Sequence[SentenceT], max_len: int) -> List[SentenceT]:
    """Cut every sentence (array of type ids, or list of tokens) into windows of at most ``max_len`` tokens."""
    if max_len < 1:
        raise ValueError(f"max_len must be at least 1, got {max_len}")
    return [s[i : i + max_len] for s in sentences for i in range(0, len(s), max_len)]


def char_table(types: Sequence[str], max_chars: int = 50) -> np.ndarray:
    """``[n_types, max_chars]`` character ids (int16) of every type string."""
    return np.stack([word_to_char_ids(t, max_chars) for t in types]).astype(np.int16)


def epoch_plan(lengths: np.ndarray, tokens_per_batch: int, seed: int, epoch: int) -> List[np.ndarray]:
    """Example indices of each batch of one epoch, in training order.

    Examples are shuffled, sorted by length within pools of about ``SORT_POOL_BATCHES`` batches (so
    a batch wastes few LSTM steps), grouped into batches of about ``tokens_per_batch`` predicted
    tokens, and the batches shuffled.
    """
    rng = np.random.default_rng([seed, epoch])
    order = rng.permutation(len(lengths))
    mean_len = float(np.mean(lengths)) + 1
    pool = max(1, int(SORT_POOL_BATCHES * tokens_per_batch / mean_len))
    batches: List[np.ndarray] = []
    for start in range(0, len(order), pool):
        chunk = order[start : start + pool]
        chunk = chunk[np.argsort(lengths[chunk], kind="stable")]
        batches.extend(cut_batches(chunk, lengths[chunk] + 1, tokens_per_batch))
    return [batches[i] for i in rng.permutation(len(batches))]


def cut_batches(indices: np.ndarray, sizes: np.ndarray, budget: int) -> List[np.ndarray]:
    """Consecutive groups of ``indices`` whose ``sizes`` sum to at most ``budget`` (at least one each)."""
    groups, start, total = [], 0, 0
    for i, size in enumerate(sizes):
        if total + size > budget and i > start:
            groups.append(indices[start:i])
            start, total = i, 0
        total += int(size)
    groups.append(indices[start:])
    return groups


@dataclass
class Batch:
    """One batch, packed (sorted by length, one row per position and time step).

    char_ids: ``[n_unique, max_chars]`` ids of the distinct types in the batch.
    forward_index, backward_index: packed rows -> row of ``char_ids``, for each direction.
    batch_sizes: rows per time step (shared by both directions).
    forward_targets, backward_targets: vocabulary id each packed row predicts (``IGNORE`` for the
        last position of every example).
    lengths: tokens per example including the two markers, in the batch's own order.
    n_predictions: number of predicted tokens per direction.
    """

    char_ids: Tensor
    forward_index: Tensor
    backward_index: Tensor
    batch_sizes: List[int]
    forward_targets: Tensor
    backward_targets: Tensor
    lengths: Tensor
    n_predictions: int

    def to(self, device: torch.device) -> "Batch":
        """This batch with its tensors on ``device`` (itself when they are there already)."""
        if self.char_ids.device == device:
            return self
        moved = {
            k: getattr(self, k).to(device)
            for k in ("char_ids", "forward_index", "backward_index", "forward_targets", "backward_targets")
        }
        return Batch(**moved, batch_sizes=self.batch_sizes, lengths=self.lengths, n_predictions=self.n_predictions)


def make_batch(examples: Sequence[np.ndarray], chars: np.ndarray, type_to_vocab: np.ndarray) -> Batch:
    """Pack ``examples`` (type-id arrays) with their markers and next-word targets.

    chars: the :func:`char_table` of all types.
    type_to_vocab: vocabulary id of each type id.
    """
    lengths = torch.tensor([len(e) + 2 for e in examples], dtype=torch.int64)
    width = int(lengths.max())
    forward = np.full((len(examples), width), BOS_TYPE, dtype=np.int64)
    backward = np.full((len(examples), width), BOS_TYPE, dtype=np.int64)
    for b, example in enumerate(examples):
        n = len(example)
        forward[b, : n + 2] = np.concatenate([[BOS_TYPE], example, [EOS_TYPE]])
        backward[b, : n + 2] = forward[b, : n + 2][::-1]
    unique, inverse = np.unique(np.concatenate([forward, backward]), return_inverse=True)
    inverse = inverse.reshape(2, len(examples), width)
    fw_targets = _next_targets(forward, lengths, type_to_vocab)
    bw_targets = _next_targets(backward, lengths, type_to_vocab)
    packed = [_pack(torch.from_numpy(a), lengths) for a in (inverse[0], inverse[1], fw_targets, bw_targets)]
    return Batch(
        char_ids=torch.from_numpy(chars[unique].astype(np.int64)),
        forward_index=packed[0].data,
        backward_index=packed[1].data,
        batch_sizes=packed[0].batch_sizes.tolist(),
        forward_targets=packed[2].data,
        backward_targets=packed[3].data,
        lengths=lengths,
        n_predictions=int((lengths - 1).sum()),
    )


def _next_targets(sequences: np.ndarray, lengths: Tensor, type_to_vocab: np.ndarray) -> np.ndarray:
    """``targets[b, t]`` = vocabulary id of ``sequences[b, t + 1]``; ``IGNORE`` where there is none."""
    targets = np.full(sequences.shape, IGNORE, dtype=np.int64)
    targets[:, :-1] = type_to_vocab[sequences[:, 1:]]
    targets[np.arange(len(sequences)), lengths.numpy() - 1] = IGNORE
    return targets


def _pack(padded: Tensor, lengths: Tensor):
    return pack_padded_sequence(padded, lengths, batch_first=True, enforce_sorted=False)
