"""``python -m spacy_elmo_mix compare``: tabulate, test and plot the scheme comparison.

Reads ``RESULTS/runs/{dataset}/{scheme}/seed{N}/metrics.json`` and writes ``RESULTS/table.md``,
``scores.png``, ``layer_weights.md`` and ``timing.md`` (layout: ``spacy_elmo_mix.workflow.compare``).
Missing, unreadable and out-of-date runs (inputs changed since they ran) are reported, not
fatal; a missing RESULTS folder is an error. Example::

    python -m spacy_elmo_mix compare --results results --seeds 1 2 3 4 5
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import List, Optional


def main(argv: Optional[List[str]] = None) -> int:
    from ..workflow.compare import compare, table_notes

    parser = argparse.ArgumentParser(
        prog="python -m spacy_elmo_mix compare", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--results", type=Path, default=Path("results"), help="the results folder (default: results)")
    parser.add_argument("--datasets", nargs="+", help="expected datasets (default: those found)")
    parser.add_argument("--schemes", nargs="+", help="expected schemes (default: those found)")
    parser.add_argument("--seeds", nargs="+", type=int, help="expected seeds (default: those found)")
    parser.add_argument("--alpha", type=float, default=0.01, help="significance level (default: 0.01, as in the paper)")
    args = parser.parse_args(argv)
    if not 0.0 < args.alpha < 1.0:
        parser.error(f"--alpha must be a significance level between 0 and 1, got {args.alpha}")
    report = compare(args.results, args.datasets, args.schemes, args.seeds, args.alpha)
    print(f"{len(report.results.runs)} finished runs, {len(report.results.missing)} missing")
    for note in table_notes(report.table, report.results):
        print(f"  note: {note}")
    for path in report.outputs.values():
        print(f"wrote {path}")
    return 0
