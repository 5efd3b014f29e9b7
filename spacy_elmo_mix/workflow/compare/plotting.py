"""Plotting the comparison: ``scores.png``, every run's score per scheme and dataset (matplotlib,
imported only when drawing)."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np

from ...atomic import atomic_write
from .loading import PathLike
from .rendering import _row_label
from .statistics import Table


def plot_scores(table: Table, path: PathLike, alpha: float) -> Path:
    """Write ``scores.png``: a strip plot (every run a dot, the mean a bar) per dataset and scheme.

    table: the analysed grid; path: the PNG to write (atomically); alpha: the level behind the † marks.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n_rows = max(len(table.datasets), 1)
    fig, axes = plt.subplots(n_rows, 1, figsize=(1.3 * max(len(table.schemes), 3) + 2, 2.8 * n_rows), squeeze=False)
    for ax, dataset in zip(axes[:, 0], table.datasets):
        labels = []
        for x, scheme in enumerate(table.schemes):
            cell = table.cells.get((dataset, scheme))
            labels.append(scheme + ("\n(best)" if cell and cell.best else "†" if cell and cell.worse else ""))
            if cell:
                jitter = np.linspace(-0.15, 0.15, len(cell.scores)) if len(cell.scores) > 1 else [0.0]
                ax.scatter(x + np.asarray(jitter), 100 * np.asarray(cell.scores), s=14, alpha=0.7)
                ax.hlines(100 * cell.mean, x - 0.3, x + 0.3, color="black")
        ax.set_xticks(range(len(table.schemes)), labels, fontsize=8)
        ax.set_title(_row_label(table, dataset).replace("`", ""), fontsize=10)
        ax.set_ylabel("test score (%)")
        ax.grid(axis="y", alpha=0.3)
    if not table.datasets:
        axes[0, 0].text(0.5, 0.5, "no results found", ha="center", va="center")
    fig.suptitle(f"dots: runs (seeds); bar: mean; †: worse than the best (Welch's t-test, p < {alpha:g})", fontsize=9)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    with atomic_write(path) as tmp:
        tmp.write_bytes(buffer.getvalue())
    return Path(path)
