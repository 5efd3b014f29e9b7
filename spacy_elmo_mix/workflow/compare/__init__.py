"""Compare the weighting schemes: the paper's Table 1 from a folder of evaluation results.

Result layout (written by the grid runner and the ``evaluate`` step, read here)::

    results/
      runs/{dataset}/{scheme}/seed{N}/
        metrics.json      the run's evaluation (format: loading.py); its presence marks the run as finished
        log.txt           the run's captured stdout and stderr (the grid runner writes it)
      table.md            written by compare: mean ± std per dataset x scheme, best bold, † = worse
      scores.png          written by compare: score of every run, per scheme per dataset
      layer_weights.md    written by compare: learned s_j and gamma, averaged over seeds
      timing.md           written by compare: training time per scheme, ratio weighted12 / weighted

The comparison in four steps, one module each: :mod:`.loading` reads and checks each run's
``metrics.json`` and pools the runs one table may average; :mod:`.statistics` groups them into cells
and tests each row for significance; :mod:`.rendering` writes the Markdown files and :mod:`.plotting`
draws ``scores.png``. :func:`compare` runs them all. Every output is written atomically.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Optional, Sequence

from ...atomic import write_text_atomic
from .loading import PathLike, Results, load_results
from .plotting import plot_scores
from .rendering import render_layer_weights, render_table, render_timing
from .statistics import Table, build_table


@dataclass
class CompareReport:
    """What :func:`compare` read and wrote.

    results: the loaded runs, missing runs and notes; table: the analysed grid; outputs: name -> path.
    """

    results: Results
    table: Table
    outputs: Dict[str, Path]


def compare(
    results_dir: PathLike,
    datasets: Optional[Sequence[str]] = None,
    schemes: Optional[Sequence[str]] = None,
    seeds: Optional[Sequence[int]] = None,
    alpha: float = 0.01,
) -> CompareReport:
    """Read ``results_dir/runs`` and write table.md, scores.png, layer_weights.md and timing.md there.

    results_dir: the results folder (layout in the module docstring); datasets/schemes/seeds: the
    expected grid, for reporting missing runs (None: every value found); alpha: significance level.
    """
    results_dir = Path(results_dir)
    results = load_results(results_dir, datasets, schemes, seeds)
    table = build_table(results, alpha)
    outputs = {
        "table": write_text_atomic(results_dir / "table.md", render_table(table, results, alpha)),
        "scores": plot_scores(table, results_dir / "scores.png", alpha),
        "layer_weights": write_text_atomic(results_dir / "layer_weights.md", render_layer_weights(results)),
        "timing": write_text_atomic(results_dir / "timing.md", render_timing(results)),
    }
    return CompareReport(results, table, outputs)
