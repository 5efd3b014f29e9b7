"""``python -m spacy_elmo_mix compare``: tabulate, test and plot the scheme comparison.

Reads ``RESULTS/runs/{dataset}/{scheme}/seed{N}/metrics.json`` and writes ``RESULTS/table.md``,
``scores.png``, ``layer_weights.md`` and ``timing.md`` (layout: ``spacy_elmo_mix.workflow.compare``).
Only runs of the given datasets, schemes and seeds are read. A cell averages only runs that differ
by the seed alone, all under one protocol; other runs, and missing, unreadable and out-of-date ones
(inputs changed since they ran), are listed in the notes, not fatal; a missing RESULTS folder is an
error. The table is printed at the end. Example::

    python -m spacy_elmo_mix compare --results results --seeds 1 2 3 4 5
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import List, Optional

from . import HelpFormatter, description, program


def main(argv: Optional[List[str]] = None) -> int:
    from ..workflow.compare import compare
    from ..workflow.compare.rendering import table_notes

    parser = argparse.ArgumentParser(
        prog=program("compare"), description=description(__doc__), formatter_class=HelpFormatter
    )
    parser.add_argument("--results", type=Path, default=Path("results"), help="the results folder")
    parser.add_argument(
        "--datasets", nargs="+", help="the datasets to tabulate; runs of others are not read (default: all found)"
    )
    parser.add_argument("--schemes", nargs="+", help="the schemes to tabulate (default: all found)")
    parser.add_argument("--seeds", nargs="+", type=int, help="the seeds to tabulate (default: all found)")
    parser.add_argument(
        "--alpha", type=float, default=0.01, help="significance level (default: %(default)s, as in the paper)"
    )
    args = parser.parse_args(argv)
    if not 0.0 < args.alpha < 1.0:
        parser.error(f"--alpha must be a significance level between 0 and 1, got {args.alpha}")
    report = compare(args.results, args.datasets, args.schemes, args.seeds, args.alpha)
    print(f"{len(report.results.runs)} finished runs, {len(report.results.missing)} missing")
    for note in table_notes(report.table, report.results):
        print(f"  note: {note}")
    for path in report.outputs.values():
        print(f"wrote {path}")
    print()
    print(report.outputs["table"].read_text(encoding="utf-8"), end="")
    return 0
