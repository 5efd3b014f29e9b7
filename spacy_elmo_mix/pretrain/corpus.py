"""Reading plain-text training files into sentences of word-type ids.

Every line is one example (a sentence or a paragraph). Lines are tokenized with spaCy's English
tokenizer (``spacy.blank("en")``) unless the text is pre-tokenized (split on whitespace). Each
distinct token string gets a type id; sentences are stored as ``int32`` arrays of type ids, which
keeps a corpus of millions of tokens compact. Type ids 0 and 1 are the sentence markers.

Files are read in ``encoding`` (UTF-8 by default; a byte-order mark at the start of a file is
dropped); ``.gz`` files are decompressed on the fly, and glob patterns name many files at once.

Bad input never reaches the training loop: a missing, empty, binary or undecodable file, a line with
NUL or other control characters, or a corpus without a single token raises :class:`CorpusError`
naming the file (and line); overlong lines are skipped, counted and reported with a warning.
"""

from __future__ import annotations

import codecs
import glob
import gzip
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Union, cast

import numpy as np

from ..bilm.chars import BOS_TOKEN, EOS_TOKEN
from ..errors import ElmoFileError

BINARY_PROBE_BYTES = 8192
DEFAULT_MAX_LINE_CHARS = 20_000
DEFAULT_ENCODING = "utf-8"
READ_CHUNK_BYTES = 1 << 20
# Control characters other than tab, line feed, vertical tab, form feed and carriage return
# (which are whitespace): text never contains them, binary data does.
CONTROL_CHARS = re.compile("[\x00-\x08\x0e-\x1f\x7f]")


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


def expand_paths(patterns: Sequence[Union[str, Path]]) -> List[Path]:
    """The files named by ``patterns``: plain paths as given, glob patterns (``*``, ``?``, ``[``,
    ``**``) expanded in sorted order; a pattern that matches no file is a :class:`CorpusError`."""
    paths: List[Path] = []
    for pattern in patterns:
        text = str(pattern)
        if glob.has_magic(text):
            matches = sorted(p for p in glob.glob(text, recursive=True) if Path(p).is_file())
            if not matches:
                raise CorpusError(f"No text file matches the pattern {text!r}")
            paths.extend(Path(p) for p in matches)
        else:
            paths.append(Path(text))
    return paths


def check_encoding(encoding: str) -> str:
    """The canonical name of ``encoding``; a :class:`CorpusError` for an unknown one."""
    try:
        return codecs.lookup(encoding).name
    except LookupError:
        raise CorpusError(f"Unknown text encoding {encoding!r} (e.g. utf-8, latin-1, cp1252)") from None


def read_corpus(
    paths: Sequence[Union[str, Path]],
    pretokenized: bool = False,
    max_line_chars: int = DEFAULT_MAX_LINE_CHARS,
    types: Sequence[str] = (BOS_TOKEN, EOS_TOKEN),
    encoding: str = DEFAULT_ENCODING,
) -> Corpus:
    """Read and tokenize ``paths`` into a :class:`Corpus`.

    paths: text files (``.gz`` ones are decompressed) or glob patterns.
    pretokenized: split lines at ASCII whitespace (a no-break space stays inside its token) instead
        of running spaCy's tokenizer.
    max_line_chars: longer lines are skipped (counted, with a warning).
    types: an existing type table to extend (e.g. the training corpus's, for held-out text).
    encoding: the files' text encoding (a UTF-8 byte-order mark is dropped).
    """
    paths, encoding = expand_paths(paths), check_encoding(encoding)
    if not paths:
        raise CorpusError("No text files given")
    table = TypeTable(types)
    tokenize = make_tokenizer(pretokenized)
    corpus = Corpus(types=table.types, sentences=[], sources=[str(p) for p in paths])
    for path in paths:
        skipped: Dict[str, int] = {}
        before = len(corpus.sentences)
        for tokens in tokenize(read_lines(path, max_line_chars, skipped, encoding)):
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


def read_lines(
    path: Path, max_line_chars: int, skipped: Dict[str, int], encoding: str = DEFAULT_ENCODING
) -> Iterator[str]:
    """Yield the stripped, non-empty lines of ``path``; count the overlong (skipped) ones.

    A line that cannot be decoded in ``encoding`` or holds control characters (binary data) raises
    :class:`CorpusError` naming ``path:line``.
    """
    _check_text_file(path)
    try:
        with _open_binary(path) as f:
            for number, raw in enumerate(_raw_lines(f, 4 * max_line_chars + 2), start=1):
                line = None if raw is None else _decode(raw, path, number, encoding)
                if line is None or len(line) > max_line_chars:
                    key = f"longer than {max_line_chars} characters"
                    skipped[key] = skipped.get(key, 0) + 1
                    continue
                bad = CONTROL_CHARS.search(line)
                if bad:
                    raise CorpusError(
                        f"{path}:{number}: control character U+{ord(bad.group()):04X} at column {bad.start() + 1}: "
                        "binary data, not text"
                    )
                line = line.strip()
                if line:
                    yield line
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise CorpusError(f"Cannot read {path}: {exc}") from None


def _raw_lines(f, limit: int) -> Iterator[Optional[bytes]]:
    """The lines of the binary file ``f``; None for a line of more than ``limit`` bytes, which is
    read in pieces and dropped, so that a file without line breaks never sits whole in memory."""
    while True:
        raw = f.readline(limit + 1)
        if not raw:
            return
        if len(raw) <= limit or raw.endswith(b"\n"):
            yield raw
            continue
        while raw and not raw.endswith(b"\n"):
            raw = f.readline(READ_CHUNK_BYTES)
        yield None


def _decode(raw: bytes, path: Path, number: int, encoding: str) -> str:
    """``raw`` decoded; a UTF-8 byte-order mark on the first line is dropped."""
    if number == 1 and raw.startswith(codecs.BOM_UTF8) and encoding == "utf-8":
        raw = raw[len(codecs.BOM_UTF8) :]
    try:
        return raw.decode(encoding)
    except UnicodeDecodeError as exc:
        raise CorpusError(
            f"{path}:{number}: not valid {encoding} text (byte 0x{raw[exc.start]:02x} at byte {exc.start + 1} of the line); "
            "convert the file to UTF-8 or give its --encoding"
        ) from None


def _open_binary(path: Path):
    """``path`` opened for reading bytes, decompressed when its name ends in ``.gz``."""
    return gzip.open(path, "rb") if path.suffix == ".gz" else path.open("rb")


def _check_text_file(path: Path) -> None:
    """Raise :class:`CorpusError` for a missing, unreadable, empty or binary file."""
    if not path.exists():
        raise CorpusError(f"Text file not found: {path}")
    if not path.is_file():
        raise CorpusError(f"Not a file: {path}")
    try:
        with _open_binary(path) as f:
            head = f.read(BINARY_PROBE_BYTES)
    except (OSError, EOFError) as exc:
        raise CorpusError(f"Cannot read text file {path}: {exc}") from None
    if not head.strip():
        raise CorpusError(f"Text file {path} is empty")
    if b"\x00" in head:
        raise CorpusError(f"{path} looks like a binary file (it contains NUL bytes), not UTF-8 text")


def _warn_skipped(path: Path, skipped: Dict[str, int]) -> None:
    for reason, n in skipped.items():
        warnings.warn(f"{path}: skipped {n} line(s): {reason}", stacklevel=3)


def make_tokenizer(pretokenized: bool) -> Callable[[Iterable[str]], Iterator[List[str]]]:
    """lines -> token lists: whitespace splitting (``pretokenized``) or spaCy's English tokenizer."""
    return _whitespace_tokenizer() if pretokenized else _spacy_tokenizer()


# Pre-tokenized text separates tokens by ASCII whitespace only, as the converted data sets do: a
# no-break space, thin space or ideographic space (str.split() splits at them) is part of a token,
# so "New\u00a0York" stays one token.
ASCII_TOKEN = re.compile(r"[^ \t\n\r\f\v]+")


def _whitespace_tokenizer() -> Callable[[Iterable[str]], Iterator[List[str]]]:
    def tokenize(lines: Iterable[str]) -> Iterator[List[str]]:
        for line in lines:
            yield ASCII_TOKEN.findall(line)

    return tokenize


def _spacy_tokenizer() -> Callable[[Iterable[str]], Iterator[List[str]]]:
    # English() is what spacy.blank("en") builds, without resolving the plugin registry.
    from spacy.lang.en import English

    tokenizer = cast(Any, English().tokenizer)  # a spacy Tokenizer (spaCy types it as a callable)

    def tokenize(lines: Iterable[str]) -> Iterator[List[str]]:
        for doc in tokenizer.pipe(lines, batch_size=1000):
            yield [t.text for t in doc if not t.is_space]

    return tokenize
