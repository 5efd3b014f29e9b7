"""``python -m spacy_elmo_mix convert DATASET INPUT OUTPUT``: CoNLL / WNUT / CoNLL-U to ``.spacy``.

INPUT is a data set's folder (OUTPUT: a folder that gets ``train.spacy``, ``dev.spacy`` and
``test.spacy``) or one file (OUTPUT: the ``.spacy`` file). Examples::

    python -m spacy_elmo_mix convert conll2003 ../shared/data/conll2003 corpus/conll2003
    python -m spacy_elmo_mix convert ud_ewt ../shared/data/ud_ewt corpus/ud_ewt --limit-train 500
    python -m spacy_elmo_mix convert wnut16 ../shared/data/wnut16/dev dev.spacy --max-sentences 100
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import List, Optional


def main(argv: Optional[List[str]] = None) -> int:
    from ..workflow.convert import DATASETS, SCHEMES, ConvertError, convert_dataset, convert_file

    parser = argparse.ArgumentParser(
        prog="python -m spacy_elmo_mix convert", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("dataset", choices=sorted(DATASETS), help="the input format")
    parser.add_argument("input", type=Path, help="the data set's folder, or one of its files")
    parser.add_argument("output", type=Path, help="output folder (folder input) or .spacy file (file input)")
    parser.add_argument("--max-sentences", type=int, help="keep the first N sentences of each file (quick runs; 0 = all)")
    parser.add_argument("--limit-train", type=int, help="keep the first N training sentences (the paper: 500 for POS)")
    parser.add_argument("--scheme", choices=SCHEMES, default="auto", help="span tags: auto, iob1, or iob2 (BIO, strict)")
    args = parser.parse_args(argv)
    if args.input.is_file() and args.limit_train is not None:
        parser.error("--limit-train applies to a data set's folder; for one file use --max-sentences")
    try:
        if args.input.is_dir():
            results = convert_dataset(args.dataset, args.input, args.output, args.max_sentences or None, args.limit_train, args.scheme)
        else:
            results = {"file": convert_file(args.dataset, args.input, args.output, args.max_sentences or None, args.scheme)}
    except (ConvertError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for split, stats in results.items():
        print(f"{split}: {stats.summary()}")
    return 0
