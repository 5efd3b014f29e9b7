"""The softmax vocabulary: the most frequent words of the training corpus.

Its file ``vocab.txt`` has bilm-tf's layout: one word per line, ``<S>``, ``</S>``, ``<UNK>`` first,
then words by decreasing frequency (ties in first-seen order).
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Sequence, Union

import numpy as np

from ..atomic import atomic_write
from ..bilm.chars import BOS_TOKEN, EOS_TOKEN
from .corpus import CorpusError

UNK_TOKEN = "<UNK>"
SPECIALS = (BOS_TOKEN, EOS_TOKEN, UNK_TOKEN)
UNK_ID = 2


class Vocabulary:
    """Words the language model predicts; every other word is ``<UNK>``.

    words: the vocabulary, beginning with ``<S>``, ``</S>``, ``<UNK>``.
    """

    def __init__(self, words: Sequence[str]):
        if tuple(words[:3]) != SPECIALS:
            raise CorpusError(f"A vocabulary must begin with {', '.join(SPECIALS)}; got {list(words[:3])}")
        self.words: List[str] = list(words)
        self.index = {w: i for i, w in enumerate(self.words)}

    def __len__(self) -> int:
        return len(self.words)

    @classmethod
    def build(
        cls, types: Sequence[str], counts: np.ndarray, min_count: int = 1, max_size: int = 50_000
    ) -> "Vocabulary":
        """The at most ``max_size`` most frequent types seen at least ``min_count`` times.

        types: token strings by type id (ids 0 and 1 are the markers).
        counts: occurrences of each type id.
        max_size: total size including the three special entries.
        """
        if max_size < 4:
            raise ValueError(f"max vocabulary size must be at least 4, got {max_size}")
        order = np.argsort(-counts[2:], kind="stable") + 2
        kept = [types[i] for i in order[: max_size - 3] if counts[i] >= min_count and types[i] not in SPECIALS]
        return cls(list(SPECIALS) + kept)

    def type_to_vocab(self, types: Sequence[str]) -> np.ndarray:
        """Vocabulary id of each type id (``<UNK>`` for types outside the vocabulary)."""
        return np.asarray([self.index.get(t, UNK_ID) for t in types], dtype=np.int64)

    def save(self, path: Union[str, Path]) -> None:
        """Write ``vocab.txt`` atomically."""
        with atomic_write(Path(path)) as tmp:
            tmp.write_text("\n".join(self.words) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: Union[str, Path]) -> "Vocabulary":
        """Read a ``vocab.txt`` written by :meth:`save` (or by bilm-tf); a clear error naming the file
        when it is missing, not UTF-8, lacks the special entries or repeats a word."""
        path = Path(path)
        try:
            lines = path.read_text(encoding="utf-8-sig").splitlines()
        except FileNotFoundError:
            raise CorpusError(f"Vocabulary file not found: {path}") from None
        except UnicodeDecodeError as exc:
            raise CorpusError(f"Vocabulary file {path} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
        words = [w.strip() for w in lines if w.strip()]
        seen: Dict[str, int] = {}
        for number, word in enumerate(words, start=1):
            if word in seen:
                raise CorpusError(f"{path}: the word {word!r} appears twice (entries {seen[word]} and {number})")
            seen[word] = number
        try:
            return cls(words)
        except CorpusError as exc:
            raise CorpusError(f"{path}: {exc}") from None
