"""``python -m spacy_elmo_mix convert DATASET INPUT OUTPUT``: column, CoNLL-U or labelled-line files to ``.spacy``.

INPUT is a data set's folder (OUTPUT: a folder that gets ``train.spacy``, ``dev.spacy`` and
``test.spacy``) or one file (OUTPUT: the ``.spacy`` file). DATASET is a built-in data set, whose
files in the folder are named::

    conll2003   train.txt valid.txt test.txt            token POS chunk NER (space-separated)
    wnut16      train dev test                          token<TAB>tag
    conll2000   train.txt dev.txt test.txt              token POS chunk
    arguments   train.dat dev.dat test.dat              id<TAB>token<TAB>...<TAB>component tag
    ud_ewt      *-ud-train.conllu *-ud-dev.conllu *-ud-test.conllu   CoNLL-U (UD v1 or v2), UPOS
    ud_ewt_parse  the same files                        CoNLL-U: UPOS and the dependency tree
    sst5        sst_train.txt sst_dev.txt sst_test.txt  __label__N<TAB>tokens (5 classes)

or your own: give --format and --task (and --token-column/--tag-column, --train/--dev/--test file
names when they are not train*/dev*/test*), or describe it in a --datasets-file (JSON, the form of
spacy_elmo_mix/configs/datasets.json). Span tags may be BIO, IOB1 or BILOU/IOBES (detected).
Examples::

    python -m spacy_elmo_mix convert conll2003 ../shared/data/conll2003 corpus/conll2003
    python -m spacy_elmo_mix convert ud_ewt ../shared/data/ud_ewt corpus/ud_ewt --limit-train 500
    python -m spacy_elmo_mix convert ud_ewt_parse ../shared/data/ud_ewt corpus/ud_ewt_parse
    python -m spacy_elmo_mix convert jnlpba data/jnlpba corpus/jnlpba --format columns --task ner \\
        --train Genia4ERtask2.iob2 --dev dev.tsv --test Genia4EReval2.iob2
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path
from typing import List, Optional

from . import HelpFormatter, description, program


def main(argv: Optional[List[str]] = None) -> int:
    from ..workflow.convert import FORMATS, SCHEMES, SEPARATORS, TASKS, convert_dataset, convert_file, resolve_dataset

    parser = argparse.ArgumentParser(
        prog=program("convert"), description=description(__doc__), formatter_class=HelpFormatter
    )
    parser.add_argument(
        "dataset",
        help="a built-in data set (conll2003, wnut16, conll2000, arguments, ud_ewt, ud_ewt_parse, sst5) or your own's name",
    )
    parser.add_argument("input", type=Path, help="the data set's folder, or one of its files")
    parser.add_argument("output", type=Path, help="output folder (folder input) or .spacy file (file input)")
    parser.add_argument(
        "--max-sentences", type=int, help="keep the first N sentences of each file (quick runs; 0 = all)"
    )
    parser.add_argument(
        "--limit-train", type=int, help="keep the first N training sentences (the paper: 500 for POS; 0 = all)"
    )
    parser.add_argument(
        "--scheme", choices=SCHEMES, default="auto", help="span tags: auto (detect), iob1, iob2 (BIO, strict) or bilou"
    )
    parser.add_argument("--encoding", default="utf-8", help="the input's text encoding (a BOM is dropped)")
    own = parser.add_argument_group("your own data set (these also override a built-in one's settings)")
    own.add_argument(
        "--datasets-file",
        type=Path,
        help="a JSON file of data set descriptions (see spacy_elmo_mix/configs/datasets.json)",
    )
    own.add_argument(
        "--format", choices=FORMATS, help="columns (one token per line), conllu, or labelled_lines (LABEL<TAB>tokens)"
    )
    own.add_argument(
        "--task",
        choices=TASKS,
        help="ner (span tags -> entities), tagger (tag -> token.tag_), parser (CoNLL-U tree) or textcat (class -> doc.cats)",
    )
    own.add_argument(
        "--labels", metavar="CLASSES", help="textcat: the classes, separated by spaces (every doc's cats has each)"
    )
    own.add_argument("--token-column", type=int, help="1-based column of the token (default: 1)")
    own.add_argument("--tag-column", type=int, help="1-based column of the tag (default or 0: the last)")
    own.add_argument(
        "--separator", choices=sorted(SEPARATORS), help="column separator (default: whitespace, i.e. spaces and tabs)"
    )
    for split in ("train", "dev", "test"):
        own.add_argument(f"--{split}", metavar="FILE", help=f"the {split} file's name (or glob, or path) in INPUT")
    args = parser.parse_args(argv)
    for option in ("max_sentences", "limit_train"):
        if (getattr(args, option) or 0) < 0:
            parser.error(f"--{option.replace('_', '-')} must be 0 (all) or more, got {getattr(args, option)}")
    try:
        "".encode(args.encoding)
    except LookupError:
        parser.error(f"--encoding {args.encoding!r}: not an encoding Python knows")
    if args.input.is_file() and (args.limit_train is not None or args.train or args.dev or args.test):
        parser.error(
            "--limit-train and --train/--dev/--test apply to a data set's folder; for one file use --max-sentences"
        )
    files = {s: getattr(args, s) for s in ("train", "dev", "test")}
    spec = resolve_dataset(
        args.dataset,
        args.datasets_file,
        format=args.format,
        task=args.task,
        token_column=args.token_column,
        tag_column=args.tag_column or None,
        separator=args.separator,
        labels=args.labels.split() if args.labels and args.labels.strip() else None,
    )
    if any(files.values()):
        spec = replace(spec, files={split: files[split] or spec.files[split] for split in files})
    if args.input.is_dir():
        results = convert_dataset(
            spec, args.input, args.output, args.max_sentences, args.limit_train, args.scheme, args.encoding
        )
    else:
        results = {"file": convert_file(spec, args.input, args.output, args.max_sentences, args.scheme, args.encoding)}
    for split, stats in results.items():
        print(f"{split}: {stats.summary()}")
    return 0
