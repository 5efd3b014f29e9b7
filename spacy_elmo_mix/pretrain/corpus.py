"""Reading plain-text training files into sentences of word-type ids.

Every line is one example (a sentence or a paragraph). Lines are tokenized with spaCy's English
tokenizer (``spacy.blank("en")``) unless the text is pre-tokenized (split on whitespace). Each
distinct token string gets a type id; sentences are stored as ``int32`` arrays of type ids, which
keeps a corpus of millions of tokens compact. Type ids 0 and 1 are the sentence markers.

Bad input never reaches the training loop: a missing, empty or binary file, or a corpus without a
single token, raises :class:`CorpusError` naming the file; lines with invalid UTF-8 bytes and
overlong lines are skipped, counted and reported with a warning.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, Iterable, Iterator, List, Sequence, Union

import numpy as np

from ..bilm.chars import BOS_TOKEN, EOS_TOKEN
from ..errors import ElmoFileError

BINARY_PROBE_BYTES = 8192
DEFAULT_MAX_LINE_CHARS = 20_000


class CorpusError(ElmoFileError):
    """A training or held-out text file cannot be used."""


@dataclass
class Corpus:
    """Sentences as arrays of type ids, with the type table they index.

    types: token strings by type id (``types[0] = "<S>"``, ``types[1] = "</S>"``).
    sentences: one ``int32`` array of type ids per line (markers not included).
    skipped: number of skipped lines per reason (``"invalid UTF-8"``, ``"longer than N chars"``).
    sources: the files read, in order.
    """

    types: List[str]
    sentences: List[np.ndarray]
    skipped: Dict[str, int] = field(default_factory=dict)
    sources: List[str] = field(default_factory=list)

    @property
    def n_tokens(self) -> int:
        """Number of tokens (markers not counted)."""
        return int(sum(len(s) for s in self.sentences))

    def type_counts(self) -> np.ndarray:
        """Occurrences of each type id (markers: one ``</S>`` and one ``<S>`` per sentence)."""
        ids = np.concatenate(self.sentences) if self.sentences else np.zeros(0, np.int32)
        counts = np.bincount(ids, minlength=len(self.types))
        counts[0] = counts[1] = len(self.sentences)
        return counts


class TypeTable:
    """Growing mapping from token strings to type ids (``<S>`` = 0, ``</S>`` = 1)."""

    def __init__(self, types: Sequence[str] = (BOS_TOKEN, EOS_TOKEN)):
        self.types = list(types)
        self.ids = {t: i for i, t in enumerate(self.types)}

    def encode(self, tokens: Iterable[str]) -> np.ndarray:
        """Type ids of ``tokens``, adding new strings to the table."""
        ids = self.ids
        out = []
        for token in tokens:
            i = ids.get(token)
            if i is None:
                i = ids[token] = len(self.types)
                self.types.append(token)
            out.append(i)
        return np.asarray(out, dtype=np.int32)


def read_corpus(
    paths: Sequence[Union[str, Path]],
    pretokenized: bool = False,
    max_line_chars: int = DEFAULT_MAX_LINE_CHARS,
    types: Sequence[str] = (BOS_TOKEN, EOS_TOKEN),
) -> Corpus:
    """Read and tokenize ``paths`` into a :class:`Corpus`.

    pretokenized: split lines on whitespace instead of running spaCy's tokenizer.
    max_line_chars: longer lines are skipped (counted, with a warning).
    types: an existing type table to extend (e.g. the training corpus's, for held-out text).
    """
    if not paths:
        raise CorpusError("No text files given")
    table = TypeTable(types)
    tokenize = _whitespace_tokenizer() if pretokenized else _spacy_tokenizer()
    corpus = Corpus(types=table.types, sentences=[], sources=[str(p) for p in paths])
    for path in paths:
        path = Path(path)
        skipped: Dict[str, int] = {}
        before = len(corpus.sentences)
        lines = _read_lines(path, max_line_chars, skipped)
        for tokens in tokenize(lines):
            if tokens:
                corpus.sentences.append(table.encode(tokens))
        _warn_skipped(path, skipped)
        for reason, n in skipped.items():
            corpus.skipped[reason] = corpus.skipped.get(reason, 0) + n
        if len(corpus.sentences) == before and not skipped:
            warnings.warn(f"{path} contains no tokens", stacklevel=2)
    if not corpus.sentences:
        raise CorpusError(f"No usable text in {', '.join(corpus.sources)}: the corpus has no tokens")
    return corpus


def _read_lines(path: Path, max_line_chars: int, skipped: Dict[str, int]) -> Iterator[str]:
    """Yield the stripped, non-empty, decodable lines of ``path``; count the skipped ones."""
    _check_text_file(path)
    with path.open("rb") as f:
        for raw in f:
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                skipped["invalid UTF-8"] = skipped.get("invalid UTF-8", 0) + 1
                continue
            if len(line) > max_line_chars:
                key = f"longer than {max_line_chars} characters"
                skipped[key] = skipped.get(key, 0) + 1
                continue
            line = line.strip()
            if line:
                yield line


def _check_text_file(path: Path) -> None:
    """Raise :class:`CorpusError` for a missing, unreadable, empty or binary file."""
    if not path.exists():
        raise CorpusError(f"Text file not found: {path}")
    if not path.is_file():
        raise CorpusError(f"Not a file: {path}")
    try:
        with path.open("rb") as f:
            head = f.read(BINARY_PROBE_BYTES)
    except OSError as exc:
        raise CorpusError(f"Cannot read text file {path}: {exc}") from None
    if not head.strip():
        raise CorpusError(f"Text file {path} is empty")
    if b"\x00" in head:
        raise CorpusError(f"{path} looks like a binary file (it contains NUL bytes), not UTF-8 text")


def _warn_skipped(path: Path, skipped: Dict[str, int]) -> None:
    for reason, n in skipped.items():
        warnings.warn(f"{path}: skipped {n} line(s): {reason}", stacklevel=3)


def _whitespace_tokenizer() -> Callable[[Iterable[str]], Iterator[List[str]]]:
    def tokenize(lines: Iterable[str]) -> Iterator[List[str]]:
        for line in lines:
            yield line.split()

    return tokenize


def _spacy_tokenizer() -> Callable[[Iterable[str]], Iterator[List[str]]]:
    # English() is what spacy.blank("en") builds, without resolving the plugin registry.
    from spacy.lang.en import English

    tokenizer = English().tokenizer

    def tokenize(lines: Iterable[str]) -> Iterator[List[str]]:
        for doc in tokenizer.pipe(lines, batch_size=1000):
            yield [t.text for t in doc if not t.is_space]

    return tokenize
