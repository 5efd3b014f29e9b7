"""Convert the evaluation data sets to spaCy ``.spacy`` files (``DocBin``), one ``Doc`` per sentence.

Tokens are kept as given; ``spaces`` is True after every token but the last. Data sets:

=============  ==========================================================  ==============================
``conll2003``  4 space-separated columns ``token POS chunk NER``            ``doc.ents`` from the NER tags
``wnut16``     tab-separated ``token<TAB>tag``                              ``doc.ents`` from the tags
``conll2000``  3 space-separated columns ``token POS chunk``                ``doc.ents`` (chunk types as
                                                                            labels, for ``ner``) and
                                                                            ``token.tag_`` = the BIO chunk
                                                                            tag (for a ``tagger``)
``ud_ewt``     CoNLL-U                                                      ``token.pos_`` = UPOS (and
                                                                            ``token.tag_`` = UPOS, so that
                                                                            a plain ``tagger`` learns it)
=============  ==========================================================  ==============================

Sentences are separated by blank lines. ``-DOCSTART-`` lines are dropped; CoNLL-U comments, multiword
range lines (``1-2``) and empty nodes (``8.1``) are skipped. Span tags may be BIO (IOB2) or IOB1 (an
``I-`` tag starts an entity unless the previous tag has the same type): ``scheme="auto"`` accepts
both (IOB1 normalized to BIO, then decoded with spaCy's ``iob_to_biluo`` / ``biluo_tags_to_spans``),
``"iob2"`` rejects an ``I-`` tag that starts an entity, ``"iob1"`` states the input's scheme.
A malformed line raises :class:`ConvertError` naming the file and line. Outputs are written atomically.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from functools import partial
from itertools import islice
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional, Tuple, Union

from spacy.tokens import Doc, DocBin
from spacy.training.iob_utils import biluo_tags_to_spans, iob_to_biluo
from spacy.vocab import Vocab

from ..atomic import atomic_write
from ..errors import ElmoInputError

PathLike = Union[str, Path]
SCHEMES = ("auto", "iob1", "iob2")
UPOS = frozenset("ADJ ADP ADV AUX CCONJ DET INTJ NOUN NUM PART PRON PROPN PUNCT SCONJ SYM VERB X".split())
SPAN_TAG = re.compile(r"^(O|[BI]-\S+)$")
DOCSTART = "-DOCSTART-"


class ConvertError(ElmoInputError):
    """A line of an input file is malformed; the message starts with ``file:line:``."""


@dataclass
class Sentence:
    """One sentence as read from a file.

    words: the tokens; labels: one label per token (a span tag or a UPOS tag); lines: the 1-based line
    number of each token in ``path``; path: the file it was read from.
    """

    words: List[str]
    labels: List[str]
    lines: List[int]
    path: Path

    def error(self, index: int, message: str) -> ConvertError:
        """A :class:`ConvertError` located at token ``index`` of this sentence."""
        return ConvertError(f"{self.path}:{self.lines[index]}: {message}")


@dataclass
class ConvertStats:
    """What one conversion did.

    dataset/input/output: what was converted where; sentences/tokens: how many were written;
    labels: count per entity/chunk label (span data sets) or per UPOS tag; scheme: the span tagging
    scheme found (``iob1`` when some ``I-`` tag started an entity, else ``iob2``; None for POS);
    skipped_lines: token lines dropped (``-DOCSTART-``, CoNLL-U multiword ranges and empty nodes);
    truncated: whether ``max_sentences`` cut the file.
    """

    dataset: str
    input: Path
    output: Path
    sentences: int = 0
    tokens: int = 0
    labels: Counter = field(default_factory=Counter)
    scheme: Optional[str] = None
    skipped_lines: int = 0
    truncated: bool = False

    def summary(self) -> str:
        """One line for the command line."""
        scheme = f", scheme {self.scheme}" if self.scheme else ""
        cut = " (truncated by --max-sentences/--limit-train)" if self.truncated else ""
        return (
            f"{self.input} -> {self.output}: {self.sentences} sentences, {self.tokens} tokens, "
            f"{sum(self.labels.values())} labels of {len(self.labels)} types{scheme}{cut}"
        )


# ----------------------------------------------------------------------------------------- readers


def _numbered_blocks(path: Path) -> Iterator[List[Tuple[int, str]]]:
    """Yield the blank-line-separated blocks of ``path`` as lists of (line number, line)."""
    block: List[Tuple[int, str]] = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            line = line.rstrip("\r\n")
            if line.strip():
                block.append((number, line))
            elif block:
                yield block
                block = []
    if block:
        yield block


def read_columns(
    path: Path, stats: ConvertStats, separator: Optional[str], n_columns: int, label_column: int
) -> Iterator[Sentence]:
    """Yield the sentences of a column file.

    path: the file; stats: counts dropped ``-DOCSTART-`` lines; separator: the column separator
    (None: any whitespace); n_columns: columns per line; label_column: the label's column (0-based).
    """
    for block in _numbered_blocks(path):
        sentence = Sentence([], [], [], path)
        for number, line in block:
            columns = line.split(separator)
            if columns[0] == DOCSTART:
                stats.skipped_lines += 1
                continue
            if len(columns) != n_columns:
                raise ConvertError(f"{path}:{number}: expected {n_columns} columns, found {len(columns)}: {line!r}")
            sentence.words.append(columns[0])
            sentence.labels.append(columns[label_column])
            sentence.lines.append(number)
        if sentence.words:
            yield sentence


def read_conllu(path: Path, stats: ConvertStats) -> Iterator[Sentence]:
    """Yield the sentences of a CoNLL-U file, labelled with UPOS.

    path: the file; stats: counts skipped multiword range lines and empty nodes.
    """
    for block in _numbered_blocks(path):
        sentence = Sentence([], [], [], path)
        for number, line in block:
            if line.startswith("#"):
                continue
            columns = line.split("\t")
            if len(columns) != 10:
                raise ConvertError(f"{path}:{number}: expected 10 tab-separated CoNLL-U columns, found {len(columns)}")
            if re.fullmatch(r"\d+-\d+|\d+\.\d+", columns[0]):
                stats.skipped_lines += 1  # a multiword token range or an empty node
                continue
            if not columns[0].isdigit():
                raise ConvertError(f"{path}:{number}: invalid CoNLL-U token id {columns[0]!r}")
            sentence.words.append(columns[1])
            sentence.labels.append(columns[3])
            sentence.lines.append(number)
        if sentence.words:
            yield sentence


# ------------------------------------------------------------------------------------- annotation


def to_iob2(sentence: Sentence, scheme: str) -> Tuple[List[str], bool]:
    """The sentence's span tags in BIO (IOB2), and whether an ``I-`` tag started an entity (IOB1).

    sentence: tags in ``sentence.labels``; scheme: ``auto``/``iob1`` (accept I- starts and turn them
    into B-) or ``iob2`` (an I- start is an error). Raises :class:`ConvertError` on an invalid tag.
    """
    tags: List[str] = []
    i_started = False
    previous = "O"
    for index, tag in enumerate(sentence.labels):
        if not SPAN_TAG.match(tag):
            raise sentence.error(index, f"invalid tag {tag!r} (expected O, B-TYPE or I-TYPE)")
        if tag.startswith("I-") and previous[2:] != tag[2:]:
            if scheme == "iob2":
                raise sentence.error(index, f"{tag} after {previous} is not valid BIO (IOB2); use --scheme iob1 or auto")
            i_started = True
            tag = "B-" + tag[2:]
        tags.append(tag)
        previous = tag
    return tags, i_started


def _new_doc(vocab: Vocab, sentence: Sentence, **attrs) -> Doc:
    """A Doc of the sentence's words, a space after each but the last; ``attrs`` go to ``Doc()``."""
    spaces = [True] * (len(sentence.words) - 1) + [False]
    return Doc(vocab, words=sentence.words, spaces=spaces, **attrs)


def _span_annotator(tags_too: bool):
    """An annotator setting ``doc.ents`` from span tags, and ``token.tag_`` to them when ``tags_too``."""

    def annotate(vocab: Vocab, sentence: Sentence, scheme: str, stats: ConvertStats) -> Doc:
        tags, i_started = to_iob2(sentence, scheme)
        doc = _new_doc(vocab, sentence, tags=tags if tags_too else None)
        doc.ents = biluo_tags_to_spans(doc, iob_to_biluo(tags))
        stats.labels.update(ent.label_ for ent in doc.ents)
        if i_started or stats.scheme is None:
            stats.scheme = "iob1" if i_started else "iob2"
        return doc

    return annotate


def _annotate_pos(vocab: Vocab, sentence: Sentence, scheme: str, stats: ConvertStats) -> Doc:
    """A Doc with ``pos_`` and ``tag_`` set to the UPOS tags (``scheme``: unused, POS has no spans)."""
    for index, tag in enumerate(sentence.labels):
        if tag not in UPOS:
            raise sentence.error(index, f"invalid UPOS tag {tag!r}")
    stats.labels.update(sentence.labels)
    return _new_doc(vocab, sentence, pos=sentence.labels, tags=sentence.labels)


@dataclass(frozen=True)
class DatasetFormat:
    """How to read and annotate one data set.

    reader: (path, stats) -> Sentences; annotate: (vocab, sentence, scheme, stats) -> Doc; splits: split name -> file name pattern (a glob) inside the data set's folder.
    """

    reader: Callable[[Path, ConvertStats], Iterator[Sentence]]
    annotate: Callable[[Vocab, Sentence, str, ConvertStats], Doc]
    splits: Dict[str, str]


def _txt_splits(dev: str) -> Dict[str, str]:
    """``train.txt`` / ``dev`` / ``test.txt``; dev: the development file's name."""
    return {"train": "train.txt", "dev": dev, "test": "test.txt"}


DATASETS: Dict[str, DatasetFormat] = {
    "conll2003": DatasetFormat(
        partial(read_columns, separator=None, n_columns=4, label_column=3), _span_annotator(False), _txt_splits("valid.txt")
    ),
    "wnut16": DatasetFormat(
        partial(read_columns, separator="\t", n_columns=2, label_column=1),
        _span_annotator(False),
        {"train": "train", "dev": "dev", "test": "test"},
    ),
    "conll2000": DatasetFormat(
        partial(read_columns, separator=None, n_columns=3, label_column=2), _span_annotator(True), _txt_splits("dev.txt")
    ),
    "ud_ewt": DatasetFormat(read_conllu, _annotate_pos, {s: f"*-ud-{s}.conllu" for s in ("train", "dev", "test")}),
}


# ----------------------------------------------------------------------------------------- the API


def _dataset_format(dataset: str) -> DatasetFormat:
    if dataset not in DATASETS:
        raise ValueError(f"unknown dataset {dataset!r}; known: {', '.join(DATASETS)}")
    return DATASETS[dataset]


def convert_file(
    dataset: str, input_path: PathLike, output_path: PathLike, max_sentences: Optional[int] = None, scheme: str = "auto"
) -> ConvertStats:
    """Convert one file of ``dataset`` to a ``.spacy`` file and return what was done.

    dataset: a key of :data:`DATASETS`; input_path: the file to read; output_path: the ``.spacy``
    file to write (atomically; folders are created); max_sentences: keep only the first N sentences
    (None: all); scheme: ``auto``, ``iob1`` or ``iob2`` for span tags (see the module docstring).
    """
    fmt = _dataset_format(dataset)
    if scheme not in SCHEMES:
        raise ValueError(f"unknown scheme {scheme!r}; use one of {', '.join(SCHEMES)}")
    input_path, output_path = Path(input_path), Path(output_path)
    if not input_path.is_file():
        raise FileNotFoundError(f"{input_path}: no such file")
    stats = ConvertStats(dataset, input_path, output_path)
    sentences = fmt.reader(input_path, stats)
    vocab, docbin = Vocab(), DocBin()
    for sentence in islice(sentences, max_sentences):
        docbin.add(fmt.annotate(vocab, sentence, scheme, stats))
        stats.sentences += 1
        stats.tokens += len(sentence.words)
    stats.truncated = max_sentences is not None and next(sentences, None) is not None
    with atomic_write(output_path) as tmp:
        tmp.write_bytes(docbin.to_bytes())
    return stats


def split_files(dataset: str, input_dir: PathLike) -> Dict[str, Path]:
    """The train/dev/test files of ``dataset`` in ``input_dir`` (split name -> path).

    Raises FileNotFoundError naming the folder and pattern when a split's file is missing or ambiguous.
    """
    input_dir = Path(input_dir)
    found = {}
    for split, pattern in _dataset_format(dataset).splits.items():
        matches = sorted(input_dir.glob(pattern))
        if len(matches) != 1:
            raise FileNotFoundError(f"{input_dir}: expected one file matching {pattern!r} for {split}, found {len(matches)}")
        found[split] = matches[0]
    return found


def convert_dataset(
    dataset: str,
    input_dir: PathLike,
    output_dir: PathLike,
    max_sentences: Optional[int] = None,
    limit_train: Optional[int] = None,
    scheme: str = "auto",
) -> Dict[str, ConvertStats]:
    """Convert the train/dev/test files of ``dataset`` to ``output_dir/{train,dev,test}.spacy``.

    dataset: a key of :data:`DATASETS`; input_dir: the data set's folder (e.g. ``../shared/data/ud_ewt``);
    output_dir: where to write; max_sentences: keep the first N sentences of every split (quick runs);
    limit_train: keep the first N training sentences (the paper used 500 for POS); scheme: as in
    :func:`convert_file`. Returns split name -> stats.
    """
    limits = [n for n in (max_sentences, limit_train) if n is not None]
    results = {}
    for split, path in split_files(dataset, input_dir).items():
        limit = min(limits, default=None) if split == "train" else max_sentences
        results[split] = convert_file(dataset, path, Path(output_dir) / f"{split}.spacy", limit, scheme)
    return results
