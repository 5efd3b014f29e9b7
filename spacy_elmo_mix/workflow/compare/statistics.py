"""Statistics of the comparison: the runs grouped into cells (dataset x scheme), each cell's mean and
standard deviation, the best cell of each row and the cells significantly worse than it.

Significance: within a row, each scheme is compared with the best one by Welch's t-test
(``scipy.stats.ttest_ind(equal_var=False)``, one-sided: the best is greater); p < ``alpha`` (0.01, as
in the paper) marks it with †. A comparison needs at least 2 seeds on both sides; otherwise the cell
is not marked and the table's notes say so.
"""

from __future__ import annotations

import math
import warnings
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from .loading import DATASETS, SCHEMES, Results


@dataclass
class Cell:
    """The runs of one dataset x scheme.

    scores: test scores (fractions) of its seeds; best: bold (the row's best mean); worse: † (worse
    than the best at p < alpha); p_value: of the test against the best (None: not tested).
    """

    scores: List[float]
    best: bool = False
    worse: bool = False
    p_value: Optional[float] = None

    @property
    def mean(self) -> float:
        return float(np.mean(self.scores))

    @property
    def std(self) -> float:
        """Sample standard deviation (ddof=1); NaN with fewer than 2 seeds."""
        return float(np.std(self.scores, ddof=1)) if len(self.scores) > 1 else math.nan


def welch_p_value(best: Sequence[float], other: Sequence[float]) -> Optional[float]:
    """One-sided Welch's t-test p-value that ``best`` has the greater mean; None when not testable.

    best/other: the two samples; fewer than 2 values on either side, or zero variance on both sides
    with equal means (a NaN from scipy), is not testable.
    """
    from scipy.stats import ttest_ind

    if len(best) < 2 or len(other) < 2:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # nearly constant samples: scipy warns, still answers
        p_value = float(ttest_ind(best, other, equal_var=False, alternative="greater").pvalue)
    return None if math.isnan(p_value) else p_value


def mark_row(cells: Dict[str, Cell], alpha: float) -> List[str]:
    """Set ``best``, ``worse`` and ``p_value`` on the cells of one row; return the untested schemes.

    cells: scheme -> cell, in column order (empty cells left out); alpha: the significance level.
    The reference is the first scheme with the highest mean; every scheme with that mean is bold.
    """
    top = max(cell.mean for cell in cells.values())
    reference = next(cell for cell in cells.values() if cell.mean == top)
    untested = []
    for scheme, cell in cells.items():
        cell.best = cell.mean == top
        if cell.best:
            continue
        cell.p_value = welch_p_value(reference.scores, cell.scores)
        cell.worse = cell.p_value is not None and cell.p_value < alpha
        if cell.p_value is None:
            untested.append(scheme)
    return untested


def scheme_order(schemes: Iterable[str]) -> List[str]:
    """The paper's column order for ``schemes``; unknown scheme ids after them, alphabetically."""
    schemes = set(schemes)
    return [s for s in SCHEMES if s in schemes] + sorted(schemes - set(SCHEMES))


def dataset_order(datasets: Iterable[str]) -> List[str]:
    """Known datasets in :data:`DATASETS` order, then the others alphabetically."""
    datasets = set(datasets)
    return [d for d in DATASETS if d in datasets] + sorted(datasets - set(DATASETS))


# ----------------------------------------------------------------------------------------- tables


@dataclass
class Table:
    """The analysed grid: rows (datasets) x columns (schemes) of cells, with notes for the footer.

    datasets/schemes: row and column order; cells: (dataset, scheme) -> Cell (absent: no run);
    metrics: dataset -> metric name(s); untested: (dataset, scheme) pairs not tested for significance;
    converged: dataset -> (runs that stopped by their stopping rule, runs that record whether they did).
    """

    datasets: List[str]
    schemes: List[str]
    cells: Dict[Tuple[str, str], Cell]
    metrics: Dict[str, List[str]]
    untested: List[Tuple[str, str]]
    converged: Dict[str, Tuple[int, int]] = field(default_factory=dict)


def build_table(results: Results, alpha: float) -> Table:
    """Group ``results.runs`` into cells and mark each row (see :func:`mark_row`).

    results: the loaded results (missing runs widen the grid so that they show as empty cells);
    alpha: the significance level.
    """
    keys = [(r.dataset, r.scheme) for r in results.runs] + [k[:2] for k in results.missing]
    datasets, schemes = dataset_order(k[0] for k in keys), scheme_order(k[1] for k in keys)
    cells: Dict[Tuple[str, str], Cell] = {}
    metrics: Dict[str, set] = defaultdict(set)
    converged: Dict[str, Tuple[int, int]] = {}
    for run in sorted(results.runs, key=lambda r: r.seed):
        cells.setdefault((run.dataset, run.scheme), Cell([])).scores.append(run.score)
        metrics[run.dataset].add(run.metric)
        if run.converged is not None:
            done, known = converged.get(run.dataset, (0, 0))
            converged[run.dataset] = (done + run.converged, known + 1)
    untested = []
    for dataset in datasets:
        row = {s: cells[dataset, s] for s in schemes if (dataset, s) in cells}
        if row:
            untested += [(dataset, s) for s in mark_row(row, alpha)]
    return Table(datasets, schemes, cells, {d: sorted(m) for d, m in metrics.items()}, untested, converged)
