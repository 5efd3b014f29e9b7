"""Corpora larger than memory (``pretrain --stream``): the text is read from disk, never held whole.

Memory stays bounded as the corpus grows:

- the vocabulary is counted in one streaming pass with at most ``count_cap`` distinct words held
  (when more appear, the least frequent are dropped, lossy-counting style: a word's count may then
  be too low by at most the number of pruning rounds, and a word more frequent than
  ``tokens / count_cap`` is never lost), or read from a given ``vocab.txt`` (no counting pass);
- every epoch reads the files again, in an order drawn from ``(seed, epoch)``; windows of ``max_len``
  tokens fill a shuffle pool of ``SHUFFLE_POOL_BATCHES`` batches, which is sorted by length, cut into
  batches of about ``tokens_per_batch`` predictions and shuffled, so memory holds one pool;
- a batch is built from its own token strings (a small type table per batch).

The batch order depends only on ``(seed, epoch)``: every rank reads the same stream and trains on its
share of each global batch, and resuming skips the epoch's first batches (reading, not training).
The held-out text is small by nature and read into memory.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from ..bilm.chars import BOS_TOKEN, EOS_TOKEN
from .batches import Batch, char_table, cut_batches, make_batch, make_examples
from .corpus import (
    DEFAULT_ENCODING,
    DEFAULT_MAX_LINE_CHARS,
    CorpusError,
    TypeTable,
    expand_paths,
    make_tokenizer,
    read_lines,
)
from .vocab import UNK_ID, Vocabulary

SHUFFLE_POOL_BATCHES = 100
COUNT_CAP_PER_VOCAB_WORD = 20
MIN_COUNT_CAP = 100_000

Window = List[str]  # the tokens of one training example


class StreamingData:
    """Training text streamed from ``train_paths``; the same interface as :class:`TrainingData`.

    train_paths, heldout_paths: text files or glob patterns (``.gz`` decompressed).
    max_len: tokens per training window; heldout_max_len: per held-out window (None: ``max_len``);
        ``heldout_as_trained`` holds the held-out text in training windows when they differ.
    pretokenized, max_line_chars, encoding: as in :func:`~.corpus.read_corpus`.
    min_count, max_vocab: the vocabulary built from the counting pass (unless ``vocab`` is given).
    vocab: a fixed vocabulary (given or from a checkpoint): the counting pass is skipped.
    count_cap: most distinct words held while counting (default ``max(20 * max_vocab, 100000)``).
    """

    def __init__(
        self,
        train_paths: Sequence[Union[str, Path]],
        heldout_paths: Sequence[Union[str, Path]],
        max_len: int,
        pretokenized: bool = False,
        min_count: int = 3,
        max_vocab: int = 40_000,
        vocab: Optional[Vocabulary] = None,
        max_line_chars: int = DEFAULT_MAX_LINE_CHARS,
        encoding: str = DEFAULT_ENCODING,
        count_cap: Optional[int] = None,
        heldout_max_len: Optional[int] = None,
    ):
        self.train_paths, self.max_len = expand_paths(train_paths), max_len
        self._read: Dict[str, Any] = dict(pretokenized=pretokenized, max_line_chars=max_line_chars, encoding=encoding)
        self.skipped: Dict[str, int] = {}
        self._counts: Optional[Dict[str, int]] = None
        if vocab is None:
            cap = count_cap or max(COUNT_CAP_PER_VOCAB_WORD * max_vocab, MIN_COUNT_CAP)
            counts, self.n_lines, self.n_tokens, self.n_windows = count_words(
                self.lines(self.train_paths), cap, max_len
            )
            if not self.n_tokens:
                raise CorpusError(
                    f"No usable text in {', '.join(map(str, self.train_paths))}: the corpus has no tokens"
                )
            types = [BOS_TOKEN, EOS_TOKEN] + list(counts)
            vocab = Vocabulary.build(
                types, np.array([0, 0] + list(counts.values())), min_count=min_count, max_size=max_vocab
            )
            self._counts = {w: counts[w] for w in vocab.words[3:]}
        self.vocab = vocab
        heldout_paths = expand_paths(heldout_paths)
        heldout_lines = list(self.lines(heldout_paths)) if heldout_paths else []
        self.heldout: List[Window] = make_examples(heldout_lines, heldout_max_len or max_len)
        self.heldout_as_trained: List[Window] = (
            make_examples(heldout_lines, max_len) if (heldout_max_len or max_len) != max_len else []
        )
        self.summary = {
            "train_files": [str(p) for p in self.train_paths],
            "heldout_files": [str(p) for p in heldout_paths],
            "train_lines": getattr(self, "n_lines", None),
            "train_tokens": getattr(self, "n_tokens", None),
            "heldout_lines": len(heldout_lines),
            "heldout_tokens": sum(len(w) for w in self.heldout),
            "skipped_lines": dict(self.skipped),
            "vocab_size": len(vocab),
            "pretokenized": pretokenized,
            "streamed": True,
        }

    def lines(self, paths: Sequence[Path]) -> Iterator[List[str]]:
        """The tokens of every non-empty line of ``paths``, in order."""
        tokenize = make_tokenizer(self._read["pretokenized"])
        for path in paths:
            for tokens in tokenize(
                read_lines(path, self._read["max_line_chars"], self.skipped, self._read["encoding"])
            ):
                if tokens:
                    yield tokens

    def epoch_batches(self, tokens_per_batch: int, seed: int, epoch: int, start: int = 0) -> Iterator[List[Window]]:
        """The global batches of ``epoch`` from batch ``start`` on (the skipped ones are read, not built)."""
        rng = np.random.default_rng([seed, epoch])
        files = [self.train_paths[i] for i in rng.permutation(len(self.train_paths))]
        index = 0
        windows = (w for line in self.lines(files) for w in make_examples([line], self.max_len))
        for pool in _pools(windows, SHUFFLE_POOL_BATCHES * tokens_per_batch):
            lengths = np.array([len(w) for w in pool])
            order = rng.permutation(len(pool))
            order = order[np.argsort(lengths[order], kind="stable")]
            groups = cut_batches(order, lengths[order] + 1, tokens_per_batch)
            for g in rng.permutation(len(groups)):
                if index >= start:
                    yield [pool[i] for i in groups[g]]
                index += 1

    def make_batch(self, examples: Sequence[Window]) -> Batch:
        """The packed :class:`Batch` of ``examples`` (token lists), through a type table of its own."""
        table = TypeTable()
        ids = [table.encode(w) for w in examples]
        return make_batch(ids, char_table(table.types), self.vocab.type_to_vocab(table.types))

    def train_counts(self) -> Optional[np.ndarray]:
        """Target occurrences of each vocabulary id in the training text, from the counting pass
        (None with a given vocabulary: there was no counting pass)."""
        if self._counts is None:
            return None
        counts = np.zeros(len(self.vocab))
        for word, n in self._counts.items():
            counts[self.vocab.index[word]] = n
        counts[UNK_ID] = self.n_tokens - counts.sum()
        counts[1] = self.n_windows
        return counts

    def heldout_counts(self) -> np.ndarray:
        """Target occurrences of each vocabulary id in the held-out windows."""
        ids = [self.vocab.index.get(t, UNK_ID) for w in self.heldout for t in w]
        counts = np.bincount(np.array(ids, dtype=np.int64), minlength=len(self.vocab)).astype(np.float64)
        counts[1] += len(self.heldout)
        return counts

    def fingerprint(self) -> Dict[str, object]:
        """What must match when a run resumes: the files (names and sizes) and the vocabulary size."""
        return {"stream": [[str(p), os.path.getsize(p)] for p in self.train_paths], "vocab_size": len(self.vocab)}


def count_words(lines: Iterator[List[str]], cap: int, max_len: int) -> Tuple[Dict[str, int], int, int, int]:
    """(word counts, lines, tokens, windows of ``max_len``) of a stream of token lists, holding at
    most ``cap`` distinct words: whenever there are more, every word at or below the median count
    is dropped."""
    counts: Dict[str, int] = {}
    n_lines = n_tokens = n_windows = 0
    for tokens in lines:
        n_lines += 1
        n_tokens += len(tokens)
        n_windows += -(-len(tokens) // max_len)
        for token in tokens:
            counts[token] = counts.get(token, 0) + 1
        if len(counts) > cap:
            floor = int(np.median(np.fromiter(counts.values(), dtype=np.int64, count=len(counts))))
            counts = {w: n for w, n in counts.items() if n > floor}
    return counts, n_lines, n_tokens, n_windows


def _pools(windows: Iterator[Window], tokens: int) -> Iterator[List[Window]]:
    """Consecutive groups of ``windows`` holding at least ``tokens`` tokens (the last one fewer)."""
    pool: List[Window] = []
    size = 0
    for window in windows:
        pool.append(window)
        size += len(window) + 1
        if size >= tokens:
            yield pool
            pool, size = [], 0
    if pool:
        yield pool
