"""Everything the trainer needs from the text: examples, vocabulary and character table."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Union

import numpy as np

from .batches import Batch, char_table, epoch_plan, make_batch, make_examples
from .corpus import DEFAULT_ENCODING, DEFAULT_MAX_LINE_CHARS, expand_paths, read_corpus
from .evaluate import target_counts
from .vocab import Vocabulary


@dataclass
class TrainingData:
    """Training and held-out windows as type-id arrays, with the tables that decode them.

    chars: character ids of every type; type_to_vocab: softmax id of every type.
    summary: corpus facts for the model card (files, lines, tokens, skipped lines, vocabulary size).
    heldout_as_trained: the held-out text in training windows, when ``heldout`` has other ones.
    """

    train: List[np.ndarray]
    heldout: List[np.ndarray]
    vocab: Vocabulary
    chars: np.ndarray
    type_to_vocab: np.ndarray
    summary: Dict[str, object]
    heldout_as_trained: List[np.ndarray] = field(default_factory=list)

    def epoch_batches(self, tokens_per_batch: int, seed: int, epoch: int, start: int = 0) -> Iterator[List[np.ndarray]]:
        """The global batches of ``epoch`` (see :func:`epoch_plan`) from batch ``start`` on."""
        lengths = np.array([len(e) for e in self.train])
        for indices in epoch_plan(lengths, tokens_per_batch, seed, epoch)[start:]:
            yield [self.train[i] for i in indices]

    def make_batch(self, examples: Sequence[np.ndarray]) -> Batch:
        """The packed :class:`Batch` of ``examples`` (type-id arrays of this data)."""
        return make_batch(examples, self.chars, self.type_to_vocab)

    def train_counts(self) -> np.ndarray:
        """Target occurrences of each vocabulary id in the training examples."""
        return target_counts(self.train, self.type_to_vocab, len(self.vocab))

    def heldout_counts(self) -> np.ndarray:
        """Target occurrences of each vocabulary id in the held-out examples."""
        return target_counts(self.heldout, self.type_to_vocab, len(self.vocab))

    def fingerprint(self) -> Dict[str, int]:
        """Numbers that must match when a run resumes on the same data."""
        return {
            "train_examples": len(self.train),
            "train_tokens": int(sum(len(e) for e in self.train)),
            "vocab_size": len(self.vocab),
        }


def prepare_data(
    train_paths: Sequence[Union[str, Path]],
    heldout_paths: Sequence[Union[str, Path]],
    max_len: int,
    pretokenized: bool = False,
    min_count: int = 3,
    max_vocab: int = 40_000,
    vocab: Optional[Vocabulary] = None,
    max_line_chars: int = DEFAULT_MAX_LINE_CHARS,
    encoding: str = DEFAULT_ENCODING,
    heldout_max_len: Optional[int] = None,
) -> TrainingData:
    """Read the text files, build (or reuse) the vocabulary and cut windows of ``max_len`` tokens
    (held-out text: ``heldout_max_len``, default ``max_len``).

    vocab: a fixed vocabulary (when resuming); otherwise built from the training files with
    ``min_count`` and ``max_vocab``.
    max_line_chars: longer lines are skipped with a warning.
    encoding: the text files' encoding.
    """
    train_paths, heldout_paths = expand_paths(train_paths), expand_paths(heldout_paths)
    read: Dict[str, Any] = dict(pretokenized=pretokenized, max_line_chars=max_line_chars, encoding=encoding)
    train = read_corpus(train_paths, **read)
    vocab = vocab or Vocabulary.build(train.types, train.type_counts(), min_count=min_count, max_size=max_vocab)
    heldout = read_corpus(heldout_paths, types=train.types, **read) if heldout_paths else None
    types = heldout.types if heldout else train.types
    summary = {
        "train_files": [str(p) for p in train_paths],
        "heldout_files": [str(p) for p in heldout_paths],
        "train_lines": len(train.sentences),
        "train_tokens": train.n_tokens,
        "heldout_lines": len(heldout.sentences) if heldout else 0,
        "heldout_tokens": heldout.n_tokens if heldout else 0,
        "skipped_lines": {
            **train.skipped,
            **({"heldout " + k: v for k, v in heldout.skipped.items()} if heldout else {}),
        },
        "vocab_size": len(vocab),
        "pretokenized": pretokenized,
    }
    return TrainingData(
        train=make_examples(train.sentences, max_len),
        heldout=make_examples(heldout.sentences, heldout_max_len or max_len) if heldout else [],
        vocab=vocab,
        chars=char_table(types),
        type_to_vocab=vocab.type_to_vocab(types),
        summary=summary,
        heldout_as_trained=make_examples(heldout.sentences, max_len)
        if heldout and (heldout_max_len or max_len) != max_len
        else [],
    )
