"""Convert labelled data sets to spaCy ``.spacy`` files (``DocBin``), one ``Doc`` per sentence.

A data set is data, not code: a :class:`DatasetSpec` says where its files are and how to read them.
The built-in ones (``conll2003``, ``wnut16``, ``conll2000``, ``arguments``, ``ud_ewt``, ``ud_ewt_parse``,
``sst5``) are entries of
``spacy_elmo_mix/configs/datasets.json``; your own come from a JSON file of the same form
(``--datasets-file``) or from command-line options. An entry's keys:

``format``        ``columns`` (one token per line, columns separated by ``separator``), ``conllu``, or
                  ``labelled_lines`` (one sentence per line: ``LABEL<TAB>tokens separated by spaces``,
                  fastText's ``__label__`` prefix dropped from the label)
``files``         split (``train``, ``dev``, ``test``) -> file name or glob inside the data set's folder
``task``          ``ner`` (span tags -> ``doc.ents``; with ``tags_too`` also ``token.tag_``),
                  ``tagger`` (the tag -> ``token.tag_``; CoNLL-U: UPOS -> ``token.pos_`` and ``tag_``),
                  ``parser`` (CoNLL-U: the tree -> ``token.head``/``dep_``, UPOS as for ``tagger``) or
                  ``textcat`` (``labelled_lines``: the label -> ``doc.cats``, one class per sentence)
``token_column``  1-based column of the token (``columns``; default 1)
``tag_column``    1-based column of the tag (``columns``; default: the last one)
``separator``     ``whitespace`` (default: runs of spaces and tabs) or ``tab``
``label``         the name in tables (optional)
``tag_suffix``    where a tag's own part ends (optional): ``":"`` keeps ``I-Premise`` of ``I-Premise:-1:Support``
``labels``        the classes of a ``textcat`` data set, in order (every doc's ``cats`` has each of them)

Tokens are kept as given (other whitespace in a token, such as a no-break or thin space, is part
of it: see ``SEPARATORS``); ``spaces`` is True after every token but the last. Sentences are separated
by blank lines; ``-DOCSTART-`` lines are dropped; CoNLL-U comments, multiword range lines (``1-2``)
and empty nodes (``8.1``) are skipped; UD v1 (``CONJ``) and v2 tags are accepted. A ``parser`` data
set's trees are checked (word ids in order, heads inside the sentence, one root, no cycle); its
``root`` relation is named ``ROOT``, as spaCy's own CoNLL-U converter names it. Span tags may be
BIO (IOB2), IOB1 (an ``I-`` tag starts an entity unless the previous tag has the same type) or
BILOU / IOBES (``L-``/``E-``, ``U-``/``S-``): ``scheme="auto"`` detects which (IOB1 normalized to BIO;
decoded with spaCy's ``iob_to_biluo`` / ``biluo_tags_to_spans``); ``iob1``, ``iob2`` and ``bilou``
state it (``iob2`` rejects an ``I-`` tag that starts an entity). Files are read as UTF-8 (a byte-order
mark is dropped) or the given encoding. A malformed line raises :class:`ConvertError` naming the file
and line. Outputs are written atomically.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field, fields, replace
from itertools import islice
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple, Union

from spacy.tokens import Doc, DocBin
from spacy.training.iob_utils import biluo_tags_to_spans, iob_to_biluo
from spacy.vocab import Vocab

from ..atomic import atomic_write
from ..errors import ElmoFileError, ElmoInputError

PathLike = Union[str, Path]
SCHEMES = ("auto", "iob1", "iob2", "bilou")
FORMATS = ("columns", "conllu", "labelled_lines")
TASKS = ("ner", "tagger", "parser", "textcat")
# The formats each task reads.
TASK_FORMATS = {
    "ner": ("columns",),
    "tagger": ("columns", "conllu"),
    "parser": ("conllu",),
    "textcat": ("labelled_lines",),
}
FASTTEXT_LABEL = "__label__"
SPLITS = ("train", "dev", "test")
# Column separators, by class. The formats separate columns by spaces or tabs (CoNLL-2003,
# CoNLL-2000: ``whitespace``) or by tabs (WNUT, CoNLL-U: ``tab``); the other characters str.split()
# takes for whitespace (no-break space U+00A0, thin space U+2009, U+3000, \x1c-\x1f, \x85, \v, \f...)
# are part of a token: ``New\u00a0York`` is one token. A blank line (a sentence end) holds only
# COLUMN_SPACE.
SEPARATORS = ("whitespace", "tab")
COLUMN_SPACE = " \t"
WHITESPACE_COLUMN = re.compile(r"[^ \t]+")
# UD v2's UPOS tags, and UD v1's CONJ (v2: CCONJ).
UPOS = frozenset("ADJ ADP ADV AUX CCONJ CONJ DET INTJ NOUN NUM PART PRON PROPN PUNCT SCONJ SYM VERB X".split())
SPAN_TAG = re.compile(r"^(O|[BILUES]-\S+)$")
DOCSTART = "-DOCSTART-"
REGISTRY = Path(__file__).resolve().parents[1] / "configs" / "datasets.json"


class ConvertError(ElmoInputError):
    """A line of an input file is malformed; the message starts with ``file:line:``."""


@dataclass(frozen=True)
class DatasetSpec:
    """How to find and read one data set (the keys of the module docstring's table).

    name: its id; format: one of :data:`FORMATS`; files: split -> file name or glob; task: one of
    :data:`TASKS`; token_column/tag_column: 1-based columns (tag_column None: the last); separator:
    ``whitespace`` or ``tab``; tags_too: a ``ner`` data set also sets ``token.tag_``; label: its
    name in tables; tag_suffix: where a tag's own part ends (None: the whole column), e.g. ``:``
    for the persuasive essays' ``I-Premise:-1:Support``, whose component type is ``I-Premise``;
    labels: the classes of a ``textcat`` data set (None for the other tasks).
    """

    name: str
    format: str
    files: Dict[str, str]
    task: str
    token_column: int = 1
    tag_column: Optional[int] = None
    separator: str = "whitespace"
    tags_too: bool = False
    label: str = ""
    tag_suffix: Optional[str] = None
    labels: Optional[List[str]] = None

    def check(self, where: str) -> "DatasetSpec":
        """Itself, or ElmoInputError naming ``where`` (the file or option it came from) and the bad key."""
        bad = []
        if self.format not in FORMATS:
            bad.append(f"format {self.format!r} (expected one of {', '.join(FORMATS)})")
        if self.task not in TASKS:
            bad.append(f"task {self.task!r} (expected one of {', '.join(TASKS)})")
        if self.task in TASK_FORMATS and self.format in FORMATS and self.format not in TASK_FORMATS[self.task]:
            bad.append(
                f"task {self.task!r} with format {self.format!r} (it reads {' or '.join(TASK_FORMATS[self.task])})"
            )
        bad += self._label_problems()
        if self.separator not in SEPARATORS:
            bad.append(f"separator {self.separator!r} (expected one of {', '.join(SEPARATORS)})")
        for key in ("token_column", "tag_column"):
            value = getattr(self, key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                bad.append(f"{key} {value!r} (expected a column number, 1 or more)")
        if self.tag_suffix is not None and (not isinstance(self.tag_suffix, str) or not self.tag_suffix):
            bad.append(f"tag_suffix {self.tag_suffix!r} (expected a non-empty string or null)")
        if self.tag_column is not None and self.tag_column == self.token_column:
            bad.append(f"tag_column {self.tag_column} is also the token column")
        if not isinstance(self.files, dict) or set(self.files) != set(SPLITS):
            bad.append(f"files {self.files!r} (expected one file name each for {', '.join(SPLITS)})")
        if bad:
            raise ElmoInputError(f"{where}: data set {self.name!r}: bad " + "; bad ".join(bad))
        return self

    def _label_problems(self) -> List[str]:
        """What is wrong with ``labels``: a ``textcat`` data set needs two or more distinct non-empty
        strings; the other tasks take none."""
        if self.task != "textcat":
            return [] if self.labels is None else [f"labels {self.labels!r} (only a textcat data set has classes)"]
        labels = self.labels
        if (
            not isinstance(labels, list)
            or len(labels) < 2
            or not all(isinstance(label, str) and label.strip() for label in labels)
            or len(set(labels)) != len(labels)
        ):
            return [f"labels {labels!r} (a textcat data set needs its classes: two or more distinct strings)"]
        return []


def load_datasets(path: Optional[PathLike] = None) -> Dict[str, DatasetSpec]:
    """The built-in data sets, plus (overriding them) those of the JSON file ``path`` (None: none).

    Raises ElmoFileError / ElmoInputError naming the file and the bad entry or key.
    """
    specs: Dict[str, DatasetSpec] = {}
    known = {f.name for f in fields(DatasetSpec)} - {"name"}
    for source in [REGISTRY] + ([Path(path)] if path else []):
        try:
            entries = json.loads(Path(source).read_text(encoding="utf-8-sig"))
        except OSError as exc:
            raise ElmoFileError(f"{source}: cannot read the data set list ({exc.strerror or exc})") from exc
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ElmoInputError(f"{source}: not a JSON data set list ({exc})") from exc
        if not isinstance(entries, dict) or not all(isinstance(e, dict) for e in entries.values()):
            raise ElmoInputError(
                f"{source}: expected a JSON object of data set name -> object with {', '.join(sorted(known))}"
            )
        for name, entry in entries.items():
            unknown = sorted(set(entry) - known)
            missing = sorted({"format", "files", "task"} - set(entry))
            if unknown or missing:
                raise ElmoInputError(
                    f"{source}: data set {name!r}: unknown keys {unknown} / missing keys {missing}; keys: {', '.join(sorted(known))}"
                )
            specs[name] = DatasetSpec(name, **entry).check(str(source))
    return specs


def resolve_dataset(name: str, datasets_file: Optional[PathLike] = None, **options) -> DatasetSpec:
    """The spec of data set ``name`` (built in or from ``datasets_file``) with ``options`` (keys of
    :class:`DatasetSpec`, None: not given) applied; a new data set needs at least ``format`` and ``task``.
    """
    given = {key: value for key, value in options.items() if value is not None}
    specs = load_datasets(datasets_file)
    if name in specs:
        return replace(specs[name], **given).check("the command line")
    if "format" not in given or "task" not in given:
        raise ElmoInputError(
            f"unknown data set {name!r}: known are {', '.join(specs)}; for your own give its format and task "
            f"(--format {'|'.join(FORMATS)} --task {'|'.join(TASKS)}) or a --datasets-file entry"
        )
    given.setdefault("files", {split: split + "*" for split in SPLITS})
    return DatasetSpec(name, **given).check("the command line")


# ----------------------------------------------------------------------------------------- readers


def _numbered_lines(path: Path, encoding: str) -> Iterator[Tuple[int, str]]:
    """Yield (line number, line without its end) of ``path``; ConvertError naming the line when it is
    not text in ``encoding`` (UTF-8: a leading byte-order mark is dropped)."""
    codec = "utf-8-sig" if encoding.replace("_", "-").lower() in ("utf-8", "utf8") else encoding
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                line = raw.decode(codec if number == 1 else encoding.replace("utf-8-sig", "utf-8"))
            except UnicodeDecodeError as exc:
                raise ConvertError(
                    f"{path}:{number}: not {encoding} text (byte {raw[exc.start]:#04x} at column {exc.start + 1}); "
                    "convert the file to UTF-8 or pass --encoding"
                ) from exc
            if "\x00" in line:
                raise ConvertError(f"{path}:{number}: a NUL byte: this is not a text file")
            yield number, line.rstrip("\r\n")


def _numbered_blocks(path: Path, encoding: str) -> Iterator[List[Tuple[int, str]]]:
    """Yield the blocks of ``path`` separated by blank lines (empty, or spaces and tabs only) as lists
    of (line number, line); ``encoding``: the file's text encoding."""
    block: List[Tuple[int, str]] = []
    for number, line in _numbered_lines(path, encoding):
        if line.strip(COLUMN_SPACE):
            block.append((number, line))
        elif block:
            yield block
            block = []
    if block:
        yield block


def split_columns(line: str, separator: str) -> List[str]:
    """The columns of one line of a column file.

    line: the line without its end; separator: ``whitespace`` (columns are the runs of characters
    other than space and tab) or ``tab`` (the line split at every tab). See ``SEPARATORS``.
    """
    return line.split("\t") if separator == "tab" else WHITESPACE_COLUMN.findall(line)


def read_columns(path: Path, stats: "ConvertStats", spec: DatasetSpec, encoding: str) -> Iterator["Sentence"]:
    """Yield the sentences of a column file.

    path: the file; stats: counts dropped ``-DOCSTART-`` lines; spec: the columns and separator;
    encoding: the file's text encoding. Every line must have as many columns as the file's first.
    """
    n_columns = None
    for block in _numbered_blocks(path, encoding):
        sentence = Sentence([], [], [], path)
        for number, line in block:
            columns = split_columns(line, spec.separator)
            if columns[0] == DOCSTART:
                stats.skipped_lines += 1
                continue
            n_columns = n_columns or len(columns)
            needed = max(spec.token_column, spec.tag_column or 2)
            if len(columns) != n_columns or len(columns) < needed:
                expected = n_columns if n_columns >= needed else f"at least {needed}"
                raise ConvertError(
                    f"{path}:{number}: expected {expected} {spec.separator}-separated columns, found {len(columns)}: {line!r}"
                )
            sentence.words.append(columns[spec.token_column - 1])
            tag = columns[(spec.tag_column or n_columns) - 1]
            sentence.labels.append(tag.split(spec.tag_suffix, 1)[0] if spec.tag_suffix else tag)
            sentence.lines.append(number)
        if sentence.words:
            yield sentence


def read_conllu(path: Path, stats: "ConvertStats", spec: DatasetSpec, encoding: str) -> Iterator["Sentence"]:
    """Yield the sentences of a CoNLL-U file, labelled with UPOS, with their HEAD and DEPREL columns.

    path: the file; stats: counts skipped multiword range lines and empty nodes; spec: unused (the
    columns are CoNLL-U's); encoding: the file's text encoding.
    """
    for block in _numbered_blocks(path, encoding):
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
            sentence.ids.append(columns[0])
            sentence.heads.append(columns[6])
            sentence.deps.append(columns[7])
        if sentence.words:
            yield sentence


def read_labelled_lines(path: Path, stats: "ConvertStats", spec: DatasetSpec, encoding: str) -> Iterator["Sentence"]:
    """Yield the sentences of a file of ``LABEL<TAB>tokens`` lines (SST-5's, fastText's form).

    path: the file; stats: unused; spec: unused (the label is checked against its classes when the
    doc is made); encoding: the file's text encoding. Blank lines are skipped; the tokens are the
    text split at spaces (a run of spaces is one break); a leading ``__label__`` is dropped.
    """
    for number, line in _numbered_lines(path, encoding):
        if not line.strip(COLUMN_SPACE):
            continue
        label, tab, text = line.partition("\t")
        words = [word for word in text.split(" ") if word]
        if not tab or not words or "\t" in text:
            raise ConvertError(
                f"{path}:{number}: expected LABEL<TAB>tokens separated by spaces (one tab), found {line!r}"
            )
        category = label.strip(COLUMN_SPACE).removeprefix(FASTTEXT_LABEL)
        yield Sentence(words, [], [number] * len(words), path, category=category)


READERS = {"columns": read_columns, "conllu": read_conllu, "labelled_lines": read_labelled_lines}


@dataclass
class Sentence:
    """One sentence as read from a file.

    words: the tokens; labels: one label per token (a span tag or a UPOS tag; none for a labelled
    line); lines: the 1-based line number of each token in ``path``; path: the file it was read
    from; ids, heads, deps: CoNLL-U's ID, HEAD and DEPREL of each token (empty for other formats);
    category: the class of a labelled line (None for other formats).
    """

    words: List[str]
    labels: List[str]
    lines: List[int]
    path: Path
    ids: List[str] = field(default_factory=list)
    heads: List[str] = field(default_factory=list)
    deps: List[str] = field(default_factory=list)
    category: Optional[str] = None

    def error(self, index: int, message: str) -> ConvertError:
        """A :class:`ConvertError` located at token ``index`` of this sentence."""
        return ConvertError(f"{self.path}:{self.lines[index]}: {message}")


@dataclass
class ConvertStats:
    """What one conversion did.

    dataset/input/output: what was converted where; sentences/tokens: how many were written;
    labels: count per entity/chunk label (span data sets) or per tag; scheme: the span tagging scheme
    found (``bilou``, ``iob1`` when some ``I-`` tag started an entity, else ``iob2``; None for tags);
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


# ------------------------------------------------------------------------------------- annotation


def to_iob2(sentence: Sentence, scheme: str) -> Tuple[List[str], bool]:
    """The sentence's IOB span tags in BIO (IOB2), and whether an ``I-`` tag started an entity (IOB1).

    sentence: tags in ``sentence.labels``; scheme: ``auto``/``iob1`` (accept I- starts and turn them
    into B-) or ``iob2`` (an I- start is an error). Raises :class:`ConvertError` on an invalid tag.
    """
    tags: List[str] = []
    i_started = False
    previous = "O"
    for index, tag in enumerate(sentence.labels):
        if tag[:2] not in ("B-", "I-") and tag != "O":
            raise sentence.error(
                index, f"{tag} is a BILOU tag in a sentence read as {scheme}; use --scheme bilou or auto"
            )
        if tag.startswith("I-") and previous[2:] != tag[2:]:
            if scheme == "iob2":
                raise sentence.error(
                    index, f"{tag} after {previous} is not valid BIO (IOB2); use --scheme iob1 or auto"
                )
            i_started = True
            tag = "B-" + tag[2:]
        tags.append(tag)
        previous = tag
    return tags, i_started


def check_biluo(sentence: Sentence) -> List[str]:
    """The sentence's BILOU tags (IOBES ``E-``/``S-`` renamed ``L-``/``U-``); ConvertError at the
    first tag that breaks the sequence (an entity must be ``U-`` or ``B-`` ``I-``* ``L-`` of one type)."""
    tags = [{"E": "L", "S": "U"}.get(tag[0], tag[0]) + tag[1:] if tag != "O" else tag for tag in sentence.labels]
    open_type = None
    for index, tag in enumerate(tags + ["O"]):
        inside = tag[:1] in ("I", "L")
        if inside != (open_type is not None) or (inside and tag[2:] != open_type):
            at = min(index, len(tags) - 1)
            previous = tags[index - 1] if index else "the sentence start"
            what = tag if index < len(tags) else "the sentence end"
            raise sentence.error(at, f"{what} after {previous} is not valid BILOU")
        open_type = tag[2:] if tag[:1] in ("B", "I") else None
    return tags


def _span_tags(sentence: Sentence, scheme: str) -> Tuple[List[str], str]:
    """(BILOU tags, the scheme found) of a sentence of span tags; ConvertError on an invalid one."""
    for index, tag in enumerate(sentence.labels):
        if not SPAN_TAG.match(tag):
            raise sentence.error(index, f"invalid tag {tag!r} (expected O, or B-, I-, L-, U-, E- or S- and a type)")
    is_biluo = any(tag[:2] in ("L-", "U-", "E-", "S-") for tag in sentence.labels)
    if scheme == "bilou" or (scheme == "auto" and is_biluo):
        return check_biluo(sentence), "bilou"
    tags, i_started = to_iob2(sentence, scheme)
    return iob_to_biluo(tags), "iob1" if i_started else "iob2"


def _new_doc(vocab: Vocab, sentence: Sentence, **attrs) -> Doc:
    """A Doc of the sentence's words, a space after each but the last; ``attrs`` go to ``Doc()``."""
    spaces = [True] * (len(sentence.words) - 1) + [False]
    return Doc(vocab, words=sentence.words, spaces=spaces, **attrs)


def annotate(vocab: Vocab, sentence: Sentence, spec: DatasetSpec, scheme: str, stats: ConvertStats) -> Doc:
    """The Doc of one sentence: entities from span tags (``ner``), tags (``tagger``; CoNLL-U: and
    UPOS), a dependency tree and UPOS (``parser``) or its class (``textcat``).

    vocab: the Doc's vocab; spec: the data set; scheme: for span tags (module docstring); stats: updated.
    """
    if spec.task == "textcat":
        return _categorized(vocab, sentence, spec, stats)
    if spec.task == "parser":
        return _parsed(vocab, sentence, stats)
    if spec.task == "tagger":
        if spec.format == "conllu":
            _check_upos(sentence)
        stats.labels.update(sentence.labels)
        pos = sentence.labels if spec.format == "conllu" else None
        return _new_doc(vocab, sentence, pos=pos, tags=sentence.labels)
    biluo, found = _span_tags(sentence, scheme)
    doc = _new_doc(vocab, sentence, tags=sentence.labels if spec.tags_too else None)
    doc.ents = biluo_tags_to_spans(doc, biluo)
    stats.labels.update(ent.label_ for ent in doc.ents)
    if found != "iob2" or stats.scheme is None:
        stats.scheme = found
    return doc


def _check_upos(sentence: Sentence) -> None:
    for index, tag in enumerate(sentence.labels):
        if tag not in UPOS:
            raise sentence.error(index, f"invalid UPOS tag {tag!r} (expected one of {' '.join(sorted(UPOS))})")


def _categorized(vocab: Vocab, sentence: Sentence, spec: DatasetSpec, stats: ConvertStats) -> Doc:
    """The Doc of a labelled line: ``cats`` is 1.0 for its class and 0.0 for each other one of
    ``spec.labels`` (a full row, so that an exclusive ``textcat`` learns from every class)."""
    labels = spec.labels or []
    if sentence.category not in labels:
        raise sentence.error(0, f"unknown class {sentence.category!r} (the data set's classes: {', '.join(labels)})")
    doc = _new_doc(vocab, sentence)
    doc.cats = {label: float(label == sentence.category) for label in labels}
    stats.labels[sentence.category] += 1
    return doc


def _parsed(vocab: Vocab, sentence: Sentence, stats: ConvertStats) -> Doc:
    """The Doc of a CoNLL-U sentence with its tree; ConvertError at the first token whose id, head
    or relation is invalid, or when the heads do not form one tree."""
    _check_upos(sentence)
    n = len(sentence.words)
    heads = []
    for index, (token_id, head, dep) in enumerate(zip(sentence.ids, sentence.heads, sentence.deps)):
        if token_id != str(index + 1):
            raise sentence.error(index, f"token id {token_id} out of order (expected {index + 1})")
        if not head.isdigit() or int(head) > n:
            raise sentence.error(index, f"head {head!r} is not a token of the sentence (1..{n}, 0: the root)")
        if not dep or dep == "_":
            raise sentence.error(index, "no dependency relation (DEPREL is empty)")
        heads.append(int(head) - 1 if int(head) else index)
    _check_tree(sentence, heads)
    deps = ["ROOT" if dep == "root" else dep for dep in sentence.deps]
    stats.labels.update(deps)
    return _new_doc(vocab, sentence, pos=sentence.labels, tags=sentence.labels, heads=heads, deps=deps)


def _check_tree(sentence: Sentence, heads: List[int]) -> None:
    """ConvertError unless ``heads`` (token -> head index, the root its own) have one root that every
    token reaches."""
    roots = [index for index, head in enumerate(heads) if head == index]
    if len(roots) != 1:
        raise sentence.error(roots[1] if roots else 0, f"{len(roots)} roots (HEAD 0): a sentence has one")
    for start in range(len(heads)):
        node, seen = start, {start}
        while heads[node] != node:
            node = heads[node]
            if node in seen:
                raise sentence.error(start, "the heads form a cycle")
            seen.add(node)


# ----------------------------------------------------------------------------------------- the API


def _spec(dataset: Union[str, DatasetSpec]) -> DatasetSpec:
    return dataset if isinstance(dataset, DatasetSpec) else resolve_dataset(dataset)


def check_count(value: Optional[int], option: str) -> Optional[int]:
    """``value`` (a sentence count, 0 or None: all) as None or a positive int; ElmoInputError naming
    ``option`` when it is negative or not an integer."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ElmoInputError(f"{option} must be a whole number of sentences, 0 or more (0: all), got {value!r}")
    return value or None


def check_output(path: Path, folder: bool) -> Path:
    """``path``, or ElmoFileError when it cannot be written: a folder where a file is meant (or the
    other way round), or a file where one of its parent folders would be."""
    if path.exists() and path.is_dir() != folder:
        raise ElmoFileError(
            f"{path}: exists and is a {'file' if folder else 'folder'}; give a {'folder' if folder else '.spacy file'}"
        )
    blocking = next((p for p in path.parents if p.exists() and not p.is_dir()), None)
    if blocking is not None:
        raise ElmoFileError(f"{path}: cannot be written: {blocking} is a file, not a folder")
    return path


def convert_file(
    dataset: Union[str, DatasetSpec],
    input_path: PathLike,
    output_path: PathLike,
    max_sentences: Optional[int] = None,
    scheme: str = "auto",
    encoding: str = "utf-8",
) -> ConvertStats:
    """Convert one file of ``dataset`` to a ``.spacy`` file and return what was done.

    dataset: a data set name (built in) or a :class:`DatasetSpec`; input_path: the file to read;
    output_path: the ``.spacy`` file to write (atomically; folders are created); max_sentences: keep
    only the first N sentences (None or 0: all); scheme: ``auto``, ``iob1``, ``iob2`` or ``bilou``
    for span tags (see the module docstring); encoding: the input's text encoding.
    """
    spec = _spec(dataset)
    if scheme not in SCHEMES:
        raise ElmoInputError(f"unknown scheme {scheme!r}; use one of {', '.join(SCHEMES)}")
    max_sentences = check_count(max_sentences, "max_sentences")
    input_path, output_path = Path(input_path), check_output(Path(output_path), folder=False)
    if not input_path.is_file():
        raise ElmoFileError(f"{input_path}: no such file")
    stats = ConvertStats(spec.name, input_path, output_path)
    sentences = READERS[spec.format](input_path, stats, spec, encoding)
    vocab, docbin = Vocab(), DocBin()
    for sentence in islice(sentences, max_sentences):
        docbin.add(annotate(vocab, sentence, spec, scheme, stats))
        stats.sentences += 1
        stats.tokens += len(sentence.words)
    if not stats.sentences:
        what = {
            "conllu": "CoNLL-U sentences",
            "columns": "lines of token and tag columns, sentences separated by blank lines",
            "labelled_lines": "LABEL<TAB>sentence lines",
        }[spec.format]
        raise ConvertError(f"{input_path}: no sentences found (expected {what})")
    stats.truncated = max_sentences is not None and next(sentences, None) is not None
    with atomic_write(output_path) as tmp:
        tmp.write_bytes(docbin.to_bytes())
    return stats


def split_files(dataset: Union[str, DatasetSpec], input_dir: PathLike) -> Dict[str, Path]:
    """The train/dev/test files of ``dataset`` in ``input_dir`` (split name -> path).

    Raises ElmoFileError naming the folder, the expected name and the files found when a split's file
    is missing or ambiguous.
    """
    spec, input_dir = _spec(dataset), Path(input_dir)
    if not input_dir.is_dir():
        raise ElmoFileError(f"{input_dir}: no such folder")
    found = {}
    for split in SPLITS:
        pattern = spec.files[split]
        matches = [Path(pattern)] if Path(pattern).is_absolute() else sorted(input_dir.glob(pattern))
        matches = [m for m in matches if m.is_file()]
        if len(matches) != 1:
            present = ", ".join(sorted(p.name for p in input_dir.iterdir())[:20]) or "none"
            raise ElmoFileError(
                f"{input_dir}: expected one file matching {pattern!r} for {split}, found {len(matches)} "
                f"(files there: {present}); name the files with --train/--dev/--test"
            )
        found[split] = matches[0]
    return found


def convert_dataset(
    dataset: Union[str, DatasetSpec],
    input_dir: PathLike,
    output_dir: PathLike,
    max_sentences: Optional[int] = None,
    limit_train: Optional[int] = None,
    scheme: str = "auto",
    encoding: str = "utf-8",
) -> Dict[str, ConvertStats]:
    """Convert the train/dev/test files of ``dataset`` to ``output_dir/{train,dev,test}.spacy``.

    dataset: a data set name or :class:`DatasetSpec`; input_dir: the data set's folder (e.g.
    ``../shared/data/ud_ewt``); output_dir: where to write; max_sentences: keep the first N sentences
    of every split (quick runs); limit_train: keep the first N training sentences (the paper used 500
    for POS); both None or 0: all; scheme, encoding: as in :func:`convert_file`. Returns split -> stats.
    """
    dataset = _spec(dataset)
    limits = [n for n in (check_count(max_sentences, "max_sentences"), check_count(limit_train, "limit_train")) if n]
    check_output(Path(output_dir), folder=True)
    results = {}
    for split, path in split_files(dataset, input_dir).items():
        limit = min(limits, default=None) if split == "train" else check_count(max_sentences, "max_sentences")
        results[split] = convert_file(dataset, path, Path(output_dir) / f"{split}.spacy", limit, scheme, encoding)
    return results
